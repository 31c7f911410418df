//! The channel's link to the hub: a gRPC client over the hub's own Unix socket (the peer-uid rule
//! holds as for any local client), connected through the client library
//! (`tau_client::connect::unix_channel`), and a deadline around every unary call.
//!
//! Invariant: connecting ends by [`CONNECT_TIMEOUT`]; a unary call by [`CALL_TIMEOUT`]; StartTurn
//! and the wait for a turn's first message by the channel's call timeout ([`within`]), which is
//! [`CALL_TIMEOUT`] but in tests.

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use tau_api::proto::v1::tau_client::TauClient;
use tonic::transport::Channel;

/// The gRPC client of the hub.
pub type HubClient = TauClient<Channel>;

/// How long connecting to the hub's socket may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a unary call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the hub could not be reached or refused a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    #[error("no hub answers on {socket}: {reason}")]
    Unreachable { socket: String, reason: String },
    #[error("the hub did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the hub refused the call: {0}")]
    Status(String),
}

impl From<tonic::Status> for HubError {
    fn from(status: tonic::Status) -> Self {
        HubError::Status(format!("{:?}: {}", status.code(), status.message()))
    }
}

/// Connects to the hub's socket.
pub async fn connect(socket: &Path) -> Result<HubClient, HubError> {
    let channel = tau_client::connect::unix_channel(socket, CONNECT_TIMEOUT)
        .await
        .map_err(|not_running| HubError::Unreachable {
            socket: socket.display().to_string(),
            reason: not_running.reason,
        })?;
    Ok(TauClient::new(channel))
}

/// `read` (a stream's next message, say) under `limit`: the channel's call timeout
/// (`ChannelOptions::hub_call_timeout`, [`CALL_TIMEOUT`] but in tests).
pub async fn within<T>(
    limit: Duration,
    read: impl Future<Output = Result<T, tonic::Status>>,
) -> Result<T, HubError> {
    match tokio::time::timeout(limit, read).await {
        Ok(read) => read.map_err(HubError::from),
        Err(_) => Err(HubError::Timeout(limit)),
    }
}

/// Runs one unary call under [`CALL_TIMEOUT`].
pub async fn unary<T>(
    call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, HubError> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(status.into()),
        Err(_) => Err(HubError::Timeout(CALL_TIMEOUT)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read that never ends gives way at the call timeout; one that ends is taken as it is.
    #[tokio::test(start_paused = true)]
    async fn a_read_that_never_ends_times_out() {
        let never = std::future::pending::<Result<u8, tonic::Status>>();
        assert_eq!(
            within(CALL_TIMEOUT, never).await,
            Err(HubError::Timeout(CALL_TIMEOUT))
        );
        assert_eq!(within(CALL_TIMEOUT, async { Ok(7) }).await, Ok(7));
        let refused = async { Err::<u8, _>(tonic::Status::not_found("gone")) };
        assert!(matches!(
            within(CALL_TIMEOUT, refused).await,
            Err(HubError::Status(_))
        ));
    }
}
