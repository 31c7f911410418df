//! How `tau` reaches the hub, in one place: the gRPC API on the Unix socket (the hub checks the
//! caller's uid) or on 127.0.0.1 with the bearer token, and the JSON control API (`GET /health`,
//! `GET /status`) on the same loopback port. Every command that talks to the hub goes through
//! [`connect`] (gRPC) or [`control_http`] (JSON).
//!
//! - [`unix_socket`]: the channel to `<TAU_DATA_DIR>/hub/taud.sock`.
//! - [`loopback_tcp`]: the channel to `127.0.0.1:<port>` and the [`BearerAuth`] interceptor.
//! - [`token`]: reading `<TAU_DATA_DIR>/hub/token`, shared by both APIs.
//! - [`control_http`]: the JSON probes of `tau doctor`, `tau components`, `tau mcp` and `/status`.
//!
//! Invariants: only the Unix socket or the loopback address is ever dialled; every connection
//! attempt has a deadline ([`CONNECT_TIMEOUT`]; the JSON probes take theirs from the caller);
//! nothing here starts a hub (`crate::chat` does, through `hubctl::find_taud`); the token is read
//! from its file when connecting, sent only in the `authorization` metadata of calls over TCP (or
//! the `Authorization` header of `GET /status`), and never printed. See ARCHITECTURE.md.

pub mod control_http;
mod loopback_tcp;
pub mod token;
mod unix_socket;

use std::path::PathBuf;
use std::time::Duration;

use tau_api::proto::v1::tau_client::TauClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

pub use self::loopback_tcp::BearerAuth;

/// How long connecting to the hub may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The exit code of a command that needs a hub when none answers (EX_UNAVAILABLE).
pub const EXIT_NO_HUB: u8 = 69;

/// A `tau.v1.Tau` client on either transport.
pub type HubClient = TauClient<InterceptedService<Channel, BearerAuth>>;

/// No hub answers at an address.
#[derive(Debug, thiserror::Error)]
#[error("no hub answers on {}: {reason}", socket.display())]
pub struct NotRunning {
    /// The socket, or `127.0.0.1:<port>`.
    pub socket: PathBuf,
    /// Why, on one line.
    pub reason: String,
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

/// Connects to the hub at `address` within [`CONNECT_TIMEOUT`]: the one way every command opens
/// a gRPC client.
pub async fn connect(address: &HubAddress) -> Result<HubClient, NotRunning> {
    match address {
        HubAddress::Unix(socket) => {
            let channel = unix_socket::channel(socket).await?;
            Ok(TauClient::with_interceptor(channel, BearerAuth::default()))
        }
        HubAddress::Tcp { port, token_file } => loopback_tcp::connect(*port, token_file).await,
    }
}

/// The `tau.v1.Nodes` service on the Unix socket `socket` (`tau node`), within
/// [`CONNECT_TIMEOUT`].
pub async fn connect_nodes(
    socket: &std::path::Path,
) -> Result<tau_api::proto::v1::nodes_client::NodesClient<Channel>, NotRunning> {
    let channel = unix_socket::channel(socket).await?;
    Ok(tau_api::proto::v1::nodes_client::NodesClient::new(channel))
}

/// [`connect`] for the one-shot command `command` (`tau routine`, `tau approvals`) within
/// `deadline`; when no hub answers, prints one line saying so and gives [`EXIT_NO_HUB`].
pub async fn connect_or_report(
    command: &str,
    address: &HubAddress,
    deadline: Duration,
) -> Result<HubClient, std::process::ExitCode> {
    match tokio::time::timeout(deadline, connect(address)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(not_running)) => {
            eprintln!("{command}: {not_running}. Start one with `tau hub start`.");
            Err(std::process::ExitCode::from(EXIT_NO_HUB))
        }
        Err(_) => {
            eprintln!("{command}: the hub did not answer within {deadline:?}");
            Err(std::process::ExitCode::from(EXIT_NO_HUB))
        }
    }
}

/// An error and its sources on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
        source = source.and_then(std::error::Error::source);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn nothing_listening_is_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("taud.sock");
        let error = connect(&HubAddress::Unix(socket.clone()))
            .await
            .unwrap_err();
        assert_eq!(error.socket, socket);
        assert!(
            error.to_string().starts_with("no hub answers on "),
            "{error}"
        );
    }
}
