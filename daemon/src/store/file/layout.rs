//! Where the file backend keeps what, by name: the file and directory names of a session (see
//! the layout in the parent module), `session.json`'s shape, and the message file names.
//!
//! Invariant: a message file's name is its id in canonical form (six digits, wider past 999999),
//! and a message file holds the message its name says. See ARCHITECTURE.md (store).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::records::{Session, SessionMessage};
use crate::store::store_error::SessionError;

pub(super) const SESSION_FILE: &str = "session.json";
pub(super) const META_FILE: &str = "meta.json";
pub(super) const EVENTS_FILE: &str = "events.jsonl";
/// The write-ahead journal (see `journal.rs`).
pub(super) const JOURNAL_FILE: &str = "journal.jsonl";
pub(super) const AGENTS_DIR: &str = "agents";
pub(super) const AGENT_FILE: &str = "agent.json";
pub(super) const MESSAGES_DIR: &str = "messages";

/// `session.json` as stored: the session record plus the listing counter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct SessionFile {
    #[serde(flatten)]
    pub(super) session: Session,
    #[serde(default)]
    pub(super) message_count: u64,
}

/// The message file name of `id`: six digits, wider past 999999.
pub(super) fn message_file_name(id: u64) -> String {
    format!("{id:06}.json")
}

/// The id of a message file name, if it is one in canonical form.
pub(super) fn parse_message_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id: u64 = digits.parse().ok()?;
    (message_file_name(id) == name).then_some(id)
}

/// Refuses a message file that holds another message than its name says.
pub(super) fn check_message_id(
    path: &Path,
    record: &SessionMessage,
    message_id: u64,
) -> Result<(), SessionError> {
    if record.message_id != message_id {
        return Err(SessionError::corrupt(
            path.display(),
            format!(
                "holds message_id {} instead of {message_id}",
                record.message_id
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_file_names_are_canonical() {
        assert_eq!(message_file_name(0), "000000.json");
        assert_eq!(message_file_name(1_234_567), "1234567.json");
        assert_eq!(parse_message_file_name("000042.json"), Some(42));
        assert_eq!(parse_message_file_name("1234567.json"), Some(1_234_567));
        for other in [
            "42.json",
            "0000042.json",
            ".000001.json.ab.tmp",
            "00000a.json",
            "000001.jsn",
        ] {
            assert_eq!(parse_message_file_name(other), None, "{other}");
        }
    }
}
