//! The bearer token for gRPC over TCP: `<TAU_DATA_DIR>/hub/token`, 32 random bytes as lowercase
//! hex, 0600, created on first start and kept across restarts (random per install).
//!
//! Invariants: the token is never logged (its `Debug` is redacted); an empty or malformed token
//! file is replaced, never accepted; a candidate is compared in constant time.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq;

use super::files::{create_new_private, write_atomic};

/// Random bytes in a token.
const TOKEN_BYTES: usize = 32;

/// The token file could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// File system failure.
    #[error("{path}: {source}")]
    Io {
        /// The token file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The token file is a symlink or not a regular file.
    #[error("{0}: the token file must be a regular file")]
    NotAFile(PathBuf),
    /// The operating system gave no randomness.
    #[error("no randomness for the hub token: {0}")]
    Random(getrandom::Error),
}

/// The hub's bearer token.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// Why an `authorization` header does not carry the hub token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BearerRefused {
    /// No `authorization: Bearer …` header.
    #[error("missing bearer token")]
    Missing,
    /// A bearer token that is not this one.
    #[error("invalid bearer token")]
    Wrong,
}

impl BearerToken {
    /// Checks an `authorization` header's value (`Bearer <token>`, scheme in any case).
    pub fn check_authorization(&self, value: Option<&[u8]>) -> Result<(), BearerRefused> {
        let value = value.ok_or(BearerRefused::Missing)?;
        let (scheme, candidate) = match value.iter().position(|b| *b == b' ') {
            Some(i) => (&value[..i], &value[i + 1..]),
            None => return Err(BearerRefused::Missing),
        };
        if !scheme.eq_ignore_ascii_case(b"bearer") {
            return Err(BearerRefused::Missing);
        }
        if self.matches(candidate.trim_ascii()) {
            Ok(())
        } else {
            Err(BearerRefused::Wrong)
        }
    }

    /// Whether `candidate` is this token (constant time in the token's length).
    pub fn matches(&self, candidate: &[u8]) -> bool {
        self.0.as_bytes().ct_eq(candidate).into()
    }

    /// The token text, for a client that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> TokenError + '_ {
    move |source| TokenError::Io {
        path: path.to_owned(),
        source,
    }
}

fn generate() -> Result<String, TokenError> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes).map_err(TokenError::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn well_formed(text: &str) -> bool {
    text.len() == TOKEN_BYTES * 2
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Loads the token at `path`, creating it (0600) if missing, tightening its mode if others could
/// read it, and replacing it if it is malformed.
pub fn ensure(path: &Path) -> Result<BearerToken, TokenError> {
    match create_new_private(path) {
        Ok(mut file) => {
            let token = generate()?;
            file.write_all(token.as_bytes()).map_err(io_err(path))?;
            file.sync_all().map_err(io_err(path))?;
            tracing::info!("created the hub token {}", path.display());
            return Ok(BearerToken(token));
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(path)(e)),
    }
    let meta = fs::symlink_metadata(path).map_err(io_err(path))?;
    if !meta.file_type().is_file() {
        return Err(TokenError::NotAFile(path.to_owned()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!("{} was readable by others; made it 0600", path.display());
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(io_err(path))?;
    }
    let text = fs::read_to_string(path).map_err(io_err(path))?;
    let text = text.trim();
    if well_formed(text) {
        return Ok(BearerToken(text.to_owned()));
    }
    tracing::warn!("{} was malformed; wrote a new token", path.display());
    let token = generate()?;
    write_atomic(path, token.as_bytes()).map_err(io_err(path))?;
    Ok(BearerToken(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn created_once_0600_hex_and_stable() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("token");
        let first = ensure(&path).unwrap();
        assert!(well_formed(first.expose()));
        assert_eq!(mode(&path), 0o600);
        assert_eq!(ensure(&path).unwrap(), first);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(
            ensure(&other.path().join("token")).unwrap(),
            first,
            "random per install"
        );
    }

    #[test]
    fn loose_mode_is_tightened_and_malformed_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("token");
        let token = ensure(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(ensure(&path).unwrap(), token);
        assert_eq!(mode(&path), 0o600);
        fs::write(&path, "").unwrap();
        let replaced = ensure(&path).unwrap();
        assert!(well_formed(replaced.expose()));
        assert_ne!(replaced, token);
    }

    #[test]
    fn symlink_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("elsewhere");
        fs::write(&target, "x").unwrap();
        let path = tmp.path().join("token");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(matches!(ensure(&path), Err(TokenError::NotAFile(_))));
    }

    #[test]
    fn matches_only_the_exact_token() {
        let token = BearerToken("ab".repeat(32));
        assert!(token.matches("ab".repeat(32).as_bytes()));
        assert!(!token.matches(b""));
        assert!(!token.matches("ab".repeat(31).as_bytes()));
        assert!(!token.matches("ac".repeat(32).as_bytes()));
        assert_eq!(format!("{token:?}"), "BearerToken(<redacted>)");
    }
}
