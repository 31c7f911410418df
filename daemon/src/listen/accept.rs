//! Accepting connections: the [`Acceptor`] a listener is served through (TCP, the Unix socket, or
//! a test double) and the back-off after a failed accept.
//!
//! Invariants: a failed accept never ends the accept loop; an error of the accepted connection
//! itself (aborted, reset) is retried at once; any other error (EMFILE, ENFILE, ENOBUFS, ENOMEM)
//! pauses accepting, from [`FIRST_PAUSE`] doubling to [`LONGEST_PAUSE`], so a process out of file
//! descriptors does not spin; the first failure of a run is logged as a warning, the rest at debug.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

/// The first pause after a resource error.
pub const FIRST_PAUSE: Duration = Duration::from_millis(50);

/// The longest pause between accepts while errors go on.
pub const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// A source of connections.
pub trait Acceptor: Send + 'static {
    /// The connection.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// What the listener knows of the peer; every request of the connection carries it as an
    /// extension.
    type Info: Clone + Send + Sync + 'static;

    /// The next connection.
    fn accept(&mut self) -> impl Future<Output = io::Result<(Self::Io, Self::Info)>> + Send;
}

impl Acceptor for tokio::net::TcpListener {
    type Io = tokio::net::TcpStream;
    type Info = axum::extract::ConnectInfo<SocketAddr>;

    async fn accept(&mut self) -> io::Result<(Self::Io, Self::Info)> {
        let (stream, peer) = tokio::net::TcpListener::accept(self).await?;
        // gRPC sends small frames; do not let Nagle hold them back. Not fatal if refused.
        let _ = stream.set_nodelay(true);
        Ok((stream, axum::extract::ConnectInfo(peer)))
    }
}

/// Whether an accept error belongs to the one connection being accepted (retry at once) rather
/// than to the process or the system (pause first).
pub fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

/// The pauses after consecutive failed accepts.
#[derive(Debug, Default)]
pub struct Backoff {
    next: Option<Duration>,
}

impl Backoff {
    /// The pause to take after `e` (`None`: retry at once), logging the first failure of a run.
    pub fn after(&mut self, listener: &str, e: &io::Error) -> Option<Duration> {
        if is_connection_error(e) {
            tracing::debug!(listener, "accept failed for one connection: {e}");
            return None;
        }
        let pause = self.next.unwrap_or(FIRST_PAUSE);
        if self.next.is_none() {
            tracing::warn!(
                listener,
                "cannot accept connections ({e}); pausing {} ms and retrying",
                pause.as_millis()
            );
        } else {
            tracing::debug!(listener, "accept still failing: {e}");
        }
        self.next = Some((pause * 2).min(LONGEST_PAUSE));
        Some(pause)
    }

    /// An accept succeeded: the next failure starts a new run.
    pub fn reset(&mut self) {
        self.next = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emfile() -> io::Error {
        io::Error::from_raw_os_error(nix::libc::EMFILE)
    }

    #[test]
    fn resource_errors_pause_with_a_doubling_bounded_backoff() {
        let mut backoff = Backoff::default();
        let pauses: Vec<_> = (0..8)
            .map(|_| backoff.after("t", &emfile()).unwrap())
            .collect();
        assert_eq!(pauses[0], FIRST_PAUSE);
        assert_eq!(pauses[1], FIRST_PAUSE * 2);
        assert!(pauses.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*pauses.last().unwrap(), LONGEST_PAUSE);
        let enfile = io::Error::from_raw_os_error(nix::libc::ENFILE);
        assert_eq!(backoff.after("t", &enfile), Some(LONGEST_PAUSE));
        backoff.reset();
        assert_eq!(backoff.after("t", &emfile()), Some(FIRST_PAUSE));
    }

    #[test]
    fn a_failed_connection_is_retried_at_once() {
        let mut backoff = Backoff::default();
        for errno in [
            nix::libc::ECONNABORTED,
            nix::libc::ECONNRESET,
            nix::libc::EINTR,
        ] {
            let e = io::Error::from_raw_os_error(errno);
            assert!(is_connection_error(&e), "{e}");
            assert_eq!(backoff.after("t", &e), None);
        }
        assert!(!is_connection_error(&emfile()));
    }
}
