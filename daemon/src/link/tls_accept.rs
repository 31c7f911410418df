//! The node listener's acceptor: TCP connections whose TLS handshakes run concurrently (each
//! under [`HANDSHAKE_DEADLINE`], at most [`MAX_HANDSHAKES`] at once), handed to `crate::listen`
//! once done, with the peer's key fingerprint and address as each request's [`NodePeer`].
//!
//! Invariant: a connection reaches the gRPC server only after rustls accepted its client key
//! (`crate::node::NodeRegistry` admits it); a handshake that fails is logged and dropped.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::listen::Acceptor;
use crate::node::fingerprint;

/// How long a TLS handshake may take.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// Handshakes in progress at once.
pub const MAX_HANDSHAKES: usize = 16;

/// The node a request came from, as its TLS handshake proved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePeer {
    /// SHA-256 of its certificate, hex.
    pub fingerprint: String,
    pub address: SocketAddr,
}

/// Connections whose handshake is done.
pub struct Handshaken {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, NodePeer)>,
    task: JoinHandle<()>,
}

impl Drop for Handshaken {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Handshaken {
    /// Accepts on `listener`, handshaking with `tls`.
    pub fn start(listener: TcpListener, tls: Arc<rustls::ServerConfig>) -> Self {
        let (tx, rx) = mpsc::channel(MAX_HANDSHAKES);
        let task = tokio::spawn(accept_loop(listener, TlsAcceptor::from(tls), tx));
        Self { rx, task }
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: TlsAcceptor,
    tx: mpsc::Sender<(TlsStream<TcpStream>, NodePeer)>,
) {
    let permits = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let (tcp, address) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("node listener: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let tls = tls.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_DEADLINE, tls.accept(tcp)).await {
                Ok(Ok(stream)) => {
                    let key = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|certs| certs.first())
                        .map(|cert| fingerprint(cert));
                    if let Some(fingerprint) = key {
                        let peer = NodePeer {
                            fingerprint,
                            address,
                        };
                        let _ = tx.send((stream, peer)).await;
                    }
                }
                Ok(Err(e)) => tracing::warn!(%address, "node listener: handshake refused: {e}"),
                Err(_) => tracing::warn!(%address, "node listener: handshake took too long"),
            }
        });
    }
}

impl Acceptor for Handshaken {
    type Io = TlsStream<TcpStream>;
    type Info = NodePeer;

    async fn accept(&mut self) -> io::Result<(Self::Io, Self::Info)> {
        self.rx
            .recv()
            .await
            .ok_or_else(|| io::Error::other("the node listener stopped"))
    }
}
