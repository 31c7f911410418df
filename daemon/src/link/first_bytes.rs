//! [`FirstBytes`]: a node's TLS stream to its hub, opened only once the hub has sent its first
//! bytes. In TLS 1.3 the client finishes its handshake before the server has checked the client's
//! key, so a hub that refuses the key says so only afterwards; waiting for the hub's first bytes
//! (its HTTP/2 settings) before sending anything makes that refusal arrive as the TLS alert it is,
//! never lost to a reset, so the node can tell a refused key from a network fault.
//!
//! Invariant: the bytes read ahead are handed to the reader first, in order, exactly once.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// How long the hub may take to send its first bytes.
pub const FIRST_BYTES_DEADLINE: Duration = Duration::from_secs(10);

/// A stream with the bytes already read from it in front.
pub struct FirstBytes<S> {
    ahead: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S: AsyncRead + Unpin> FirstBytes<S> {
    /// Waits (at most [`FIRST_BYTES_DEADLINE`]) for the peer's first bytes; an error when it
    /// closes, refuses (the TLS alert) or stays silent.
    pub async fn read_ahead(mut inner: S) -> io::Result<Self> {
        let mut ahead = vec![0u8; 1024];
        let n = tokio::time::timeout(FIRST_BYTES_DEADLINE, inner.read(&mut ahead))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the hub sent nothing"))??;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the hub closed the connection",
            ));
        }
        ahead.truncate(n);
        Ok(Self {
            ahead,
            at: 0,
            inner,
        })
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FirstBytes<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(rest) = this.ahead.get(this.at..).filter(|rest| !rest.is_empty()) {
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.at = this.at.saturating_add(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FirstBytes<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn the_bytes_read_ahead_come_first_then_the_rest() {
        let (mut a, b) = tokio::io::duplex(64);
        a.write_all(b"hello").await.unwrap();
        let mut stream = FirstBytes::read_ahead(b).await.unwrap();
        a.write_all(b" world").await.unwrap();
        drop(a);
        let mut all = String::new();
        stream.read_to_string(&mut all).await.unwrap();
        assert_eq!(all, "hello world");
        let (a, b) = tokio::io::duplex(64);
        drop(a);
        assert!(
            FirstBytes::read_ahead(b).await.is_err(),
            "a closed peer is an error"
        );
    }
}
