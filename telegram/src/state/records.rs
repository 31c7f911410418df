//! The channel's persisted records, one file each under `<data_dir>/telegram/`: the owner binding,
//! the poll offset, the chat's session and the pairing code `tau telegram pair` writes.
//!
//! Invariants: the owner is numeric ids only (a username is never stored); a pairing code is used
//! at most once and never after its expiry; every record carries `version`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::files::{FORMAT_VERSION, StateError, read_json, remove, write_json};

/// How long a pairing code stays valid.
pub const PAIRING_TTL_SECONDS: i64 = 600;

/// The files of the state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatePaths {
    pub dir: PathBuf,
    pub owner: PathBuf,
    pub offset: PathBuf,
    pub session: PathBuf,
    pub pairing: PathBuf,
    pub presentations: PathBuf,
}

impl StatePaths {
    /// The files under `dir` (`<data_dir>/telegram`).
    pub fn in_dir(dir: PathBuf) -> Self {
        Self {
            owner: dir.join("owner.json"),
            offset: dir.join("offset.json"),
            session: dir.join("session.json"),
            pairing: dir.join("pairing.json"),
            presentations: dir.join("presentations.json"),
            dir,
        }
    }

    /// The files of the installation whose data directory is `data_dir`.
    pub fn for_data_dir(data_dir: &Path) -> Self {
        Self::in_dir(super::files::state_dir(data_dir))
    }
}

/// Who the bot answers: one user (whose messages and taps alone count) in one chat (where the
/// channel talks). Two ids, never one taken for the other: a private chat's id equals its user's,
/// any other chat's does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnerBinding {
    pub version: u32,
    pub user_id: i64,
    pub chat_id: i64,
    /// When it was bound (Unix seconds); 0 for ids from `tau.toml`.
    pub bound_at: i64,
}

impl OwnerBinding {
    pub fn new(user_id: i64, chat_id: i64, bound_at: i64) -> Self {
        Self {
            version: FORMAT_VERSION,
            user_id,
            chat_id,
            bound_at,
        }
    }

    /// Whether an update from `user` in `chat` is the owner's: the owner's user id, in the owner's
    /// chat.
    pub fn is_owner(&self, user: i64, chat: i64) -> bool {
        self.user_id == user && self.chat_id == chat
    }
}

/// The next `getUpdates` offset: every update below it was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PollOffset {
    pub version: u32,
    pub offset: i64,
}

/// The session the owner's chat talks in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatSession {
    pub version: u32,
    pub session_id: String,
}

/// A one-time code for `/start <code>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingCode {
    pub version: u32,
    pub code: String,
    /// Unix seconds after which the code is refused.
    pub expires_at: i64,
}

/// Reads the owner binding.
pub fn read_owner(paths: &StatePaths) -> Result<Option<OwnerBinding>, StateError> {
    read_json(&paths.owner)
}

/// Stores the owner binding.
pub fn write_owner(paths: &StatePaths, owner: &OwnerBinding) -> Result<(), StateError> {
    write_json(&paths.owner, owner)
}

/// The persisted offset (0 when none).
pub fn read_offset(paths: &StatePaths) -> Result<i64, StateError> {
    Ok(read_json::<PollOffset>(&paths.offset)?.map_or(0, |o| o.offset))
}

/// Stores the offset.
pub fn write_offset(paths: &StatePaths, offset: i64) -> Result<(), StateError> {
    write_json(
        &paths.offset,
        &PollOffset {
            version: FORMAT_VERSION,
            offset,
        },
    )
}

/// The chat's session id, if one was opened.
pub fn read_session(paths: &StatePaths) -> Result<Option<String>, StateError> {
    Ok(read_json::<ChatSession>(&paths.session)?.map(|s| s.session_id))
}

/// Stores the chat's session id.
pub fn write_session(paths: &StatePaths, session_id: &str) -> Result<(), StateError> {
    write_json(
        &paths.session,
        &ChatSession {
            version: FORMAT_VERSION,
            session_id: session_id.to_owned(),
        },
    )
}

/// Makes a fresh pairing code valid for [`PAIRING_TTL_SECONDS`] from `now` and stores it,
/// replacing any earlier one.
pub fn issue_pairing_code(paths: &StatePaths, now: i64) -> Result<PairingCode, StateError> {
    let code = PairingCode {
        version: FORMAT_VERSION,
        code: random_code().map_err(|reason| StateError::Invalid {
            path: paths.pairing.clone(),
            reason,
        })?,
        expires_at: now + PAIRING_TTL_SECONDS,
    };
    write_json(&paths.pairing, &code)?;
    Ok(code)
}

/// Why `/start <code>` did not pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairingRefusal {
    /// No code was issued (or it was already used).
    NoCode,
    /// The code is past its expiry.
    Expired,
    /// The code does not match.
    Wrong,
}

/// Checks `given` against the stored code at `now`; a matching, unexpired code is used up (the
/// file removed) before `Ok` returns. A wrong code leaves it in place; an expired one is removed.
pub fn redeem_pairing_code(
    paths: &StatePaths,
    given: &str,
    now: i64,
) -> Result<Result<(), PairingRefusal>, StateError> {
    let Some(code) = read_json::<PairingCode>(&paths.pairing)? else {
        return Ok(Err(PairingRefusal::NoCode));
    };
    if now > code.expires_at {
        remove(&paths.pairing)?;
        return Ok(Err(PairingRefusal::Expired));
    }
    if !constant_time_eq(code.code.as_bytes(), given.trim().as_bytes()) {
        return Ok(Err(PairingRefusal::Wrong));
    }
    remove(&paths.pairing)?;
    Ok(Ok(()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Ten characters from an alphabet without look-alikes (about 50 bits).
fn random_code() -> Result<String, String> {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut bytes = [0u8; 10];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_code_pairs_once_and_never_after_its_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let paths = StatePaths::in_dir(dir.path().join("telegram"));
        let code = issue_pairing_code(&paths, 1000).unwrap();
        let mode = std::fs::metadata(&paths.pairing)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            redeem_pairing_code(&paths, "WRONG", 1001).unwrap(),
            Err(PairingRefusal::Wrong)
        );
        assert_eq!(
            redeem_pairing_code(&paths, &code.code, 1002).unwrap(),
            Ok(())
        );
        assert_eq!(
            redeem_pairing_code(&paths, &code.code, 1003).unwrap(),
            Err(PairingRefusal::NoCode)
        );
        let code = issue_pairing_code(&paths, 1000).unwrap();
        assert_eq!(
            redeem_pairing_code(&paths, &code.code, 1000 + PAIRING_TTL_SECONDS + 1).unwrap(),
            Err(PairingRefusal::Expired)
        );
    }

    #[test]
    fn a_newer_file_is_refused_not_misread() {
        let dir = tempfile::tempdir().unwrap();
        let paths = StatePaths::in_dir(dir.path().to_path_buf());
        std::fs::write(&paths.offset, r#"{"version": 9, "offset": 5}"#).unwrap();
        let err = read_offset(&paths).unwrap_err();
        assert!(err.to_string().contains("newer tau"), "{err}");
    }
}
