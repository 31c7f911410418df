//! TLS for the web client when it listens beyond loopback: the certificate and key from
//! `[web] tls_cert` and `tls_key` (PEM), and an acceptor that hands the listener only connections
//! whose handshake finished.
//!
//! Invariants: every error loading the files is one line naming the key and the file (`taud`
//! prints it and refuses to start); TLS 1.2 and 1.3 only (rustls' safe defaults, ring); a handshake has
//! [`HANDSHAKE_DEADLINE`] and at most [`MAX_HANDSHAKES`] run at once (a connection beyond that is
//! closed at once); a failed handshake closes its connection and never ends the accept loop.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;

use crate::listen::Acceptor;

/// How long a TLS handshake may take.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// Handshakes in progress at most.
pub const MAX_HANDSHAKES: usize = 64;

/// The server's TLS settings from PEM files; one line saying what is wrong otherwise.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("web.tls_cert {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("web.tls_cert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "web.tls_cert {}: no certificate in it",
            cert.display()
        ));
    }
    let key_path = key;
    let key = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| format!("web.tls_key {}: {e}", key_path.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            format!(
                "web.tls_cert {} and web.tls_key {}: {e}",
                cert.display(),
                key_path.display()
            )
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

type Handshake = io::Result<(TlsStream<TcpStream>, SocketAddr)>;

/// A TCP listener whose connections are TLS.
pub struct TlsAcceptor {
    listener: TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    handshakes: JoinSet<Handshake>,
}

impl TlsAcceptor {
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> Self {
        Self {
            listener,
            tls: tokio_rustls::TlsAcceptor::from(config),
            handshakes: JoinSet::new(),
        }
    }
}

impl Acceptor for TlsAcceptor {
    type Io = TlsStream<TcpStream>;
    type Info = axum::extract::ConnectInfo<SocketAddr>;

    async fn accept(&mut self) -> io::Result<(Self::Io, Self::Info)> {
        loop {
            tokio::select! {
                accepted = self.listener.accept() => {
                    let (tcp, peer) = accepted?;
                    if self.handshakes.len() >= MAX_HANDSHAKES {
                        continue;
                    }
                    let _ = tcp.set_nodelay(true);
                    let tls = self.tls.clone();
                    self.handshakes.spawn(async move {
                        match tokio::time::timeout(HANDSHAKE_DEADLINE, tls.accept(tcp)).await {
                            Ok(Ok(stream)) => Ok((stream, peer)),
                            Ok(Err(e)) => Err(e),
                            Err(_) => Err(io::ErrorKind::TimedOut.into()),
                        }
                    });
                }
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Ok((stream, peer))) = done {
                        return Ok((stream, axum::extract::ConnectInfo(peer)));
                    }
                }
            }
        }
    }
}
