//! Connecting to the hub's gRPC API over its Unix socket (`<TAU_DATA_DIR>/hub/taud.sock`).
//!
//! Invariants: the connection attempt has a deadline; nothing here starts a hub; the HTTP/2
//! `:authority` is `localhost` (the socket path is not a valid authority).

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tau_api::proto::v1::tau_client::TauClient;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// How long connecting to the socket may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// No hub answers on the socket.
#[derive(Debug, thiserror::Error)]
#[error("no hub answers on {}: {reason}", socket.display())]
pub struct NotRunning {
    pub socket: PathBuf,
    pub reason: String,
}

/// A `tau.v1.Tau` client over the hub's Unix socket.
pub async fn connect_unix(socket: &Path) -> Result<TauClient<Channel>, NotRunning> {
    Ok(TauClient::new(unix_channel(socket).await?))
}

/// A gRPC channel to the hub's Unix socket, connected within [`CONNECT_TIMEOUT`].
pub async fn unix_channel(socket: &Path) -> Result<Channel, NotRunning> {
    let not_running = |reason: String| NotRunning {
        socket: socket.to_path_buf(),
        reason,
    };
    let endpoint = Endpoint::from_static("http://localhost").connect_timeout(CONNECT_TIMEOUT);
    let path = socket.to_path_buf();
    let connecting = endpoint.connect_with_connector(tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
    }));
    let channel = tokio::time::timeout(CONNECT_TIMEOUT, connecting)
        .await
        .map_err(|_| not_running("timed out".to_owned()))?
        .map_err(|e| not_running(error_chain(&e)))?;
    Ok(channel)
}

/// An error and its sources on one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
        source = cause_of(source);
    }
    text
}

fn cause_of<'a>(
    error: Option<&'a (dyn std::error::Error + 'static)>,
) -> Option<&'a (dyn std::error::Error + 'static)> {
    error.and_then(std::error::Error::source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_socket_is_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("taud.sock");
        let err = connect_unix(&socket).await.unwrap_err();
        assert_eq!(err.socket, socket);
        assert!(err.to_string().starts_with("no hub answers on "), "{err}");
    }
}
