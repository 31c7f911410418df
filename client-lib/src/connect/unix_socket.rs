//! The gRPC channel to the hub's Unix socket (`<TAU_DATA_DIR>/hub/taud.sock`): the one place a
//! client dials it.
//!
//! Invariants: the attempt ends by the caller's deadline; the HTTP/2 `:authority` is `localhost`
//! (the socket path is not a valid authority).

use std::path::Path;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

use super::{NotRunning, error_chain};

/// A gRPC channel to the hub's Unix socket `socket`, connected within `deadline`.
pub async fn unix_channel(socket: &Path, deadline: Duration) -> Result<Channel, NotRunning> {
    let not_running = |reason: String| NotRunning {
        socket: socket.to_path_buf(),
        reason,
    };
    let endpoint = Endpoint::from_static("http://localhost").connect_timeout(deadline);
    let path = socket.to_path_buf();
    let connecting = endpoint.connect_with_connector(tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
    }));
    let channel = tokio::time::timeout(deadline, connecting)
        .await
        .map_err(|_| not_running("timed out".to_owned()))?
        .map_err(|e| not_running(error_chain(&e)))?;
    Ok(channel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_socket_is_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("taud.sock");
        let err = unix_channel(&socket, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(err.socket, socket);
        assert!(err.to_string().starts_with("no hub answers on "), "{err}");
    }
}
