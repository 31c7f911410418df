//! Where a client finds the hub and how it proves who it is: the Unix socket (the hub checks the
//! caller's uid) or TCP on 127.0.0.1 with the bearer token from `<TAU_DATA_DIR>/hub/token`.
//!
//! Invariants: only the loopback address is ever dialled; the token is read from its file when
//! connecting, sent only in the `authorization` metadata of calls over TCP, and never printed;
//! every connection attempt has a deadline ([`crate::grpc::CONNECT_TIMEOUT`]).

use std::path::{Path, PathBuf};

use tau_api::proto::v1::tau_client::TauClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::grpc::{self, CONNECT_TIMEOUT, NotRunning, error_chain};

/// A `tau.v1.Tau` client on either transport.
pub type HubClient = TauClient<InterceptedService<Channel, BearerAuth>>;

/// Adds `authorization: Bearer <token>` to every call when a token is set.
#[derive(Clone, Default)]
pub struct BearerAuth {
    header: Option<MetadataValue<Ascii>>,
}

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerAuth")
            .field("token", &self.header.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl Interceptor for BearerAuth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(header) = &self.header {
            request
                .metadata_mut()
                .insert("authorization", header.clone());
        }
        Ok(request)
    }
}

/// How to reach the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubAddress {
    /// The Unix socket `<TAU_DATA_DIR>/hub/taud.sock`.
    Unix(PathBuf),
    /// `127.0.0.1:<port>`, authenticated with the token in `token_file`.
    Tcp {
        /// The control port (TAU_HUB_PORT, `[hub] control_port`).
        port: u16,
        /// `<TAU_DATA_DIR>/hub/token`.
        token_file: PathBuf,
    },
}

impl HubAddress {
    /// Where it is, for messages (never the token).
    pub fn describe(&self) -> String {
        match self {
            HubAddress::Unix(socket) => socket.display().to_string(),
            HubAddress::Tcp { port, .. } => format!("127.0.0.1:{port}"),
        }
    }
}

/// Connects to the hub at `address`.
pub async fn connect(address: &HubAddress) -> Result<HubClient, NotRunning> {
    match address {
        HubAddress::Unix(socket) => {
            let channel = grpc::unix_channel(socket).await?;
            Ok(TauClient::with_interceptor(channel, BearerAuth::default()))
        }
        HubAddress::Tcp { port, token_file } => connect_tcp(*port, token_file).await,
    }
}

async fn connect_tcp(port: u16, token_file: &Path) -> Result<HubClient, NotRunning> {
    let not_running = |reason: String| NotRunning {
        socket: PathBuf::from(format!("127.0.0.1:{port}")),
        reason,
    };
    let token = read_token(token_file).map_err(not_running)?;
    let header = MetadataValue::try_from(format!("Bearer {token}"))
        .map_err(|_| not_running(format!("{} is not a valid token", token_file.display())))?;
    let endpoint = Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .map_err(|e| not_running(error_chain(&e)))?
        .connect_timeout(CONNECT_TIMEOUT);
    let channel = tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect())
        .await
        .map_err(|_| not_running("timed out".to_owned()))?
        .map_err(|e| not_running(error_chain(&e)))?;
    Ok(TauClient::with_interceptor(
        channel,
        BearerAuth {
            header: Some(header),
        },
    ))
}

/// The token in `file`, trimmed; an error names the file, never its content.
fn read_token(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read the token {}: {e}", file.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("the token file {} is empty", file.display()));
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interceptor_adds_the_bearer_header_only_with_a_token() {
        let mut with = BearerAuth {
            header: Some(MetadataValue::try_from("Bearer abc").unwrap()),
        };
        let request = with.call(tonic::Request::new(())).unwrap();
        assert_eq!(
            request.metadata().get("authorization").unwrap(),
            "Bearer abc"
        );
        let request = BearerAuth::default().call(tonic::Request::new(())).unwrap();
        assert!(request.metadata().get("authorization").is_none());
        assert!(!format!("{with:?}").contains("abc"));
    }

    #[test]
    fn a_missing_or_empty_token_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        assert!(read_token(&file).unwrap_err().contains("token"));
        std::fs::write(&file, "  \n").unwrap();
        assert!(read_token(&file).unwrap_err().contains("empty"));
        std::fs::write(&file, "secret\n").unwrap();
        assert_eq!(read_token(&file).unwrap(), "secret");
    }

    #[tokio::test]
    async fn nothing_listening_is_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("taud.sock");
        let error = connect(&HubAddress::Unix(socket)).await.unwrap_err();
        assert!(error.to_string().starts_with("no hub answers"), "{error}");
    }
}
