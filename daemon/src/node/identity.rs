//! This `taud`'s own key and self-signed certificate for node links, made with rcgen (ECDSA P-256
//! on ring), and the fingerprint that the other side pins: the SHA-256 of the certificate, in hex.
//!
//! Invariants: the private key never leaves the pairing store file (0600) and this process; it is
//! never logged or shown; only the fingerprint is.

use std::fmt;

use sha2::{Digest, Sha256};

use super::NodeError;

/// What a node's certificate's common name starts with; the rest is the name it was paired as.
pub const NODE_NAME_PREFIX: &str = "tau-node:";

/// A key pair and its self-signed certificate (DER).
#[derive(Clone)]
pub struct Identity {
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
    fingerprint: String,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A new key and certificate whose common name is `common_name`.
    pub fn generate(common_name: &str) -> Result<Self, NodeError> {
        let keys = |e: rcgen::Error| NodeError::Keys(e.to_string());
        let key = rcgen::KeyPair::generate().map_err(keys)?;
        let mut params = rcgen::CertificateParams::new(vec!["tau".to_owned()]).map_err(keys)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        let cert = params.self_signed(&key).map_err(keys)?;
        Ok(Self::from_der(cert.der().to_vec(), key.serialize_der()))
    }

    /// An identity from a stored certificate and PKCS#8 key.
    pub fn from_der(cert_der: Vec<u8>, key_der: Vec<u8>) -> Self {
        let fingerprint = fingerprint(&cert_der);
        Self {
            cert_der,
            key_der,
            fingerprint,
        }
    }

    /// The certificate (DER).
    pub fn cert_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// The private key (PKCS#8 DER).
    pub fn key_der(&self) -> &[u8] {
        &self.key_der
    }

    /// The SHA-256 of the certificate, hex.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// The fingerprint of a certificate: SHA-256 of its DER, lowercase hex.
pub fn fingerprint(cert_der: &[u8]) -> String {
    hex::encode(Sha256::digest(cert_der))
}

/// The node name a certificate claims in its common name (`tau-node:<name>`), if any. Untrusted:
/// it only says which paired node an unknown key pretends to be.
pub fn claimed_name(cert_der: &[u8]) -> Option<String> {
    let prefix = NODE_NAME_PREFIX.as_bytes();
    let at = cert_der.windows(prefix.len()).position(|w| w == prefix)?;
    // The common name is a short DER string: its length byte comes right before it.
    let length = usize::from(*cert_der.get(at.checked_sub(1)?)?);
    let end = at.checked_add(length)?;
    let name = cert_der.get(at.checked_add(prefix.len())?..end)?;
    let valid = !name.is_empty()
        && name.len() <= 24
        && name
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'_');
    valid.then(|| name.iter().map(|b| char::from(*b)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_identity_has_its_fingerprint_and_name() {
        let a = Identity::generate("tau-node:pi").unwrap();
        let b = Identity::generate("tau-node:pi").unwrap();
        assert_eq!(a.fingerprint(), fingerprint(a.cert_der()));
        assert_eq!(a.fingerprint().len(), 64);
        assert_ne!(a.fingerprint(), b.fingerprint(), "every key is new");
        assert_eq!(claimed_name(a.cert_der()).as_deref(), Some("pi"));
        let hub = Identity::generate("tau-hub").unwrap();
        assert_eq!(claimed_name(hub.cert_der()), None);
        let again = Identity::from_der(a.cert_der().to_vec(), a.key_der().to_vec());
        assert_eq!(again.fingerprint(), a.fingerprint());
        assert!(!format!("{a:?}").contains(&hex::encode(a.key_der())));
    }
}
