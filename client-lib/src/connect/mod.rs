//! How a client reaches the hub's gRPC API, in one place: the Unix socket (the hub checks the
//! caller's uid) or 127.0.0.1 with the bearer token. `tau`, tau-telegram, and the tests and
//! benchmarks that act as a client all connect here.
//!
//! - [`unix_channel`]: a channel to `<TAU_DATA_DIR>/hub/taud.sock` (`unix_socket.rs`).
//! - `loopback_tcp.rs`: the channel to `127.0.0.1:<port>` and the [`BearerAuth`] interceptor.
//! - [`token`]: reading `<TAU_DATA_DIR>/hub/token`, shared with the JSON control API's readers.
//!
//! Invariants: only the Unix socket or the loopback address is ever dialled; every attempt has a
//! deadline ([`CONNECT_TIMEOUT`], or the caller's); nothing here starts a hub; the token is read
//! from its file when connecting, sent only in the `authorization` metadata of calls over TCP,
//! and never printed.

mod loopback_tcp;
pub mod token;
mod unix_socket;

use std::path::PathBuf;
use std::time::Duration;

use tau_api::proto::v1::tau_client::TauClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

pub use self::loopback_tcp::BearerAuth;
pub use self::unix_socket::unix_channel;

/// How long connecting to the hub may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

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

/// Connects to the hub at `address` within [`CONNECT_TIMEOUT`]: the one way a client opens a gRPC
/// client.
pub async fn connect(address: &HubAddress) -> Result<HubClient, NotRunning> {
    match address {
        HubAddress::Unix(socket) => {
            let channel = unix_channel(socket, CONNECT_TIMEOUT).await?;
            Ok(TauClient::with_interceptor(channel, BearerAuth::default()))
        }
        HubAddress::Tcp { port, token_file } => loopback_tcp::connect(*port, token_file).await,
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
