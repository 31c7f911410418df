//! The TLS 1.3 configurations of a node link (rustls on ring), each side presenting its own
//! self-signed certificate and checking the other's against the key it pinned.
//!
//! Invariants: TLS 1.3 only, ALPN `h2`; the handshake's signatures are checked as usual (the peer
//! proves it holds the key); a hub admits a client key only when [`ClientKeys::admit`] says so (a
//! pinned node, or any key while a pairing code is outstanding, which may then only pair); a node
//! admits only the hub key it pinned, except while joining, when it learns the key it saw so the
//! pairing proof can bind it.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, DistinguishedName, Error, ServerConfig,
    SignatureScheme,
};

use super::NodeError;
use super::identity::{Identity, claimed_name, fingerprint};

/// Who decides which client keys a hub admits at the handshake.
pub trait ClientKeys: Send + Sync {
    /// Whether a client presenting the certificate with `fingerprint` (claiming to be node
    /// `claimed`, untrusted) may finish the handshake.
    fn admit(&self, fingerprint: &str, claimed: Option<&str>) -> bool;
}

/// Which hub key a node accepts.
#[derive(Clone)]
pub enum HubKey {
    /// Only this fingerprint.
    Pinned(String),
    /// Any key (joining); the fingerprint seen is kept here for the pairing proof.
    Learn(Arc<Mutex<Option<String>>>),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn keys(e: Error) -> NodeError {
    NodeError::Keys(e.to_string())
}

fn own_cert(identity: &Identity) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
    (
        vec![CertificateDer::from(identity.cert_der().to_vec())],
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(identity.key_der().to_vec())),
    )
}

/// The hub's node listener: its own certificate, client keys admitted by `clients`.
pub fn server_config(
    identity: &Identity,
    clients: Arc<dyn ClientKeys>,
) -> Result<Arc<ServerConfig>, NodeError> {
    let provider = provider();
    let verifier = PinnedClients {
        clients,
        provider: Arc::clone(&provider),
    };
    let (certs, key) = own_cert(identity);
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(keys)?
        .with_client_cert_verifier(Arc::new(verifier))
        .with_single_cert(certs, key)
        .map_err(keys)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// A node dialling its hub: its own certificate, the hub's key checked by `hub`.
pub fn client_config(identity: &Identity, hub: HubKey) -> Result<Arc<ClientConfig>, NodeError> {
    let provider = provider();
    let verifier = PinnedHub {
        hub,
        provider: Arc::clone(&provider),
    };
    let (certs, key) = own_cert(identity);
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(keys)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_client_auth_cert(certs, key)
        .map_err(keys)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

fn refused() -> Error {
    Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure)
}

struct PinnedClients {
    clients: Arc<dyn ClientKeys>,
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for PinnedClients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PinnedClients")
    }
}

impl ClientCertVerifier for PinnedClients {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        let claimed = claimed_name(end_entity);
        if self
            .clients
            .admit(&fingerprint(end_entity), claimed.as_deref())
        {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(refused())
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

struct PinnedHub {
    hub: HubKey,
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for PinnedHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PinnedHub")
    }
}

impl ServerCertVerifier for PinnedHub {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let seen = fingerprint(end_entity);
        match &self.hub {
            HubKey::Pinned(pinned) if *pinned == seen => Ok(ServerCertVerified::assertion()),
            HubKey::Pinned(_) => Err(refused()),
            HubKey::Learn(slot) => {
                *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(seen);
                Ok(ServerCertVerified::assertion())
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
