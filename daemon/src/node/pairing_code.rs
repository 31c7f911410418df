//! One-time pairing codes and the proofs that bind a code to both certificates.
//!
//! A code reads `<name>:XXXXX-XXXXX-XXXXX-XXXXX`: the node's name, then 100 random bits in
//! Crockford-style base32 (no I, L, O, U). Each side proves it knows the code with
//! HMAC-SHA256(secret, role | node fingerprint | hub fingerprint), each fingerprint as that side
//! saw it in the very TLS handshake the proof travels on, so a relay in the middle (which must
//! present its own keys to both sides) cannot pass either proof on.
//!
//! Invariants: the secret is compared in constant time; it is never logged; a code is refused
//! with one line saying whether it was already used, expired or wrong.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::NodeError;

/// How long a code is valid.
pub const CODE_LIFETIME: Duration = Duration::from_secs(600);

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Random characters in a code (5 bits each: 100 bits).
const SECRET_CHARS: usize = 20;

/// Why a pairing code was refused (one line each).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairError {
    /// Used once already.
    #[error("this pairing code was already used; on the hub, run tau node pair {0} for a new one")]
    Reused(String),
    /// Older than ten minutes.
    #[error(
        "this pairing code expired (codes last 10 minutes); on the hub, run tau node pair {0} for a new one"
    )]
    Expired(String),
    /// Not a code the hub issued for this name, or relayed through another machine.
    #[error(
        "this pairing code is wrong, or the connection passed through another machine; on the hub, run tau node pair NAME for a new one"
    )]
    Wrong,
    /// Not shaped like a code at all.
    #[error("a pairing code reads NAME:XXXXX-XXXXX-XXXXX-XXXXX, as tau node pair printed it")]
    Malformed,
}

/// A new code for `name`: the name, ':' and 20 random characters in four groups.
pub fn new_code(name: &str) -> Result<String, NodeError> {
    let mut bytes = [0u8; SECRET_CHARS];
    getrandom::fill(&mut bytes).map_err(|e| NodeError::Keys(format!("no randomness: {e}")))?;
    let mut code = format!("{name}:");
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 && i % 5 == 0 {
            code.push('-');
        }
        code.push(char::from(ALPHABET[usize::from(b & 31)]));
    }
    Ok(code)
}

/// The name and the normalized secret of `code` (case and dashes ignored).
pub fn code_name(code: &str) -> Result<(String, String), PairError> {
    let (name, secret) = code.trim().split_once(':').ok_or(PairError::Malformed)?;
    let secret: String = secret
        .chars()
        .filter(|c| *c != '-' && !c.is_whitespace())
        .map(|c| c.to_ascii_uppercase())
        .collect();
    if name.is_empty()
        || secret.len() != SECRET_CHARS
        || !secret.bytes().all(|b| ALPHABET.contains(&b))
    {
        return Err(PairError::Malformed);
    }
    Ok((name.to_owned(), secret))
}

fn mac(secret: &str, role: &str, node_fp: &str, hub_fp: &str) -> Vec<u8> {
    // HMAC takes a key of any length, so this cannot fail; an empty proof would never match.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return Vec::new();
    };
    for part in ["tau-pair-v1 ", role, "|", node_fp, "|", hub_fp] {
        mac.update(part.as_bytes());
    }
    mac.finalize().into_bytes().to_vec()
}

/// The node's proof, hex.
pub fn node_proof(secret: &str, node_fp: &str, hub_fp: &str) -> String {
    hex::encode(mac(secret, "node", node_fp, hub_fp))
}

/// The hub's proof, hex.
pub fn hub_proof(secret: &str, node_fp: &str, hub_fp: &str) -> String {
    hex::encode(mac(secret, "hub", node_fp, hub_fp))
}

/// Whether two proofs are equal (constant time).
pub fn proofs_match(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_carry_the_name_and_100_random_bits() {
        let code = new_code("pi").unwrap();
        let (name, secret) = code_name(&code).unwrap();
        assert_eq!(name, "pi");
        assert_eq!(secret.len() * 5, 100);
        assert_ne!(code, new_code("pi").unwrap());
        let loose = code.to_lowercase().replace('-', " ");
        assert_eq!(code_name(&loose).unwrap().1, secret);
        for bad in ["pi", ":ABCDE", "pi:ABC", "pi:IIIII-IIIII-IIIII-IIIII"] {
            assert_eq!(code_name(bad), Err(PairError::Malformed), "{bad}");
        }
    }

    #[test]
    fn a_proof_binds_the_secret_and_both_fingerprints() {
        let p = node_proof("S", "node", "hub");
        assert!(proofs_match(&p, &node_proof("S", "node", "hub")));
        assert!(!proofs_match(&p, &node_proof("T", "node", "hub")));
        assert!(!proofs_match(&p, &node_proof("S", "relay", "hub")));
        assert!(!proofs_match(&p, &node_proof("S", "node", "relay")));
        assert!(
            !proofs_match(&p, &hub_proof("S", "node", "hub")),
            "roles differ"
        );
    }
}
