//! The gRPC channel to the hub on `127.0.0.1:<port>`, every call carrying the bearer token.
//!
//! Invariants: only the loopback address is dialled; the attempt ends by [`CONNECT_TIMEOUT`]; the
//! token goes only into the `authorization` metadata and never into a message or `Debug` output.

use std::path::{Path, PathBuf};

use tau_api::proto::v1::tau_client::TauClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::transport::Endpoint;

use super::{CONNECT_TIMEOUT, HubClient, NotRunning, error_chain, token};

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

/// A client of the hub on `127.0.0.1:<port>` with the token in `token_file`.
pub(super) async fn connect(port: u16, token_file: &Path) -> Result<HubClient, NotRunning> {
    let not_running = |reason: String| NotRunning {
        socket: PathBuf::from(format!("127.0.0.1:{port}")),
        reason,
    };
    let token = token::read(token_file).map_err(not_running)?;
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

    #[tokio::test]
    async fn without_a_token_nothing_is_dialled() {
        let dir = tempfile::tempdir().unwrap();
        let error = connect(1, &dir.path().join("token")).await.unwrap_err();
        assert_eq!(error.socket, PathBuf::from("127.0.0.1:1"));
        assert!(error.reason.contains("hub token"), "{error}");
    }
}
