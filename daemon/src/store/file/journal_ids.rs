//! The message ids a session's journals still hold: those set aside after a damaged line (and,
//! while its replay fails, the live one). No new message may take one of them (see `journal.rs`).
//!
//! Invariants:
//! - A line read leniently gives every id it can: a line that parses as a batch (an `agent_id`
//!   and its `messages`) gives the ids of its messages whatever its checksum says; any other line
//!   (damaged past parsing or in a key, or an append cut short) gives every
//!   `"message_id":<digits>` its bytes still show, for the agent its `"agent_id"` names, else the
//!   hub's agent. Taking an id too many only leaves a gap in the
//!   session's ids; taking one too few lets a new message reuse the id of one that was
//!   acknowledged, which is what this guards against (a damaged last line is the case: no later
//!   line's ids stand above its own).
//! - An id read from damaged bytes above [`MAX_TEXTUAL_ID`] is not taken: it is a damaged number,
//!   and taking it would move the session's next id near the end of the range.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::fsutil::read_into;
use super::layout::JOURNAL_FILE;
use crate::store::DEFAULT_AGENT_ID;
use crate::store::id::validate_id;
use crate::store::store_error::IdKind;

/// The highest id taken from a line that does not parse (2^53, the largest integer every JSON
/// reader keeps exactly).
const MAX_TEXTUAL_ID: u64 = 1 << 53;

/// The message ids (with their agent) of every line of a journal, read leniently (see the module
/// documentation).
pub(super) fn readable_ids(bytes: &[u8]) -> Vec<(String, u64)> {
    let mut ids = Vec::new();
    for line in bytes.split(|&b| b == b'\n') {
        let record = serde_json::from_slice::<Value>(line).ok();
        let batch = record.as_ref().and_then(|record| {
            Some((
                record.get("agent_id")?.as_str()?,
                record.get("messages")?.as_array()?,
            ))
        });
        match batch {
            Some((agent_id, messages)) => ids.extend(
                messages
                    .iter()
                    .filter_map(|message| message.get("message_id")?.as_u64())
                    .map(|id| (agent_id.to_owned(), id)),
            ),
            // Not a batch as written: an events-only line shows no id; a damaged one may.
            None => ids.extend(textual_ids(line)),
        }
    }
    ids
}

/// The ids the bytes of a line that does not parse still show.
fn textual_ids(line: &[u8]) -> Vec<(String, u64)> {
    let numbers = values_after(line, b"\"message_id\":")
        .filter_map(|rest| {
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            std::str::from_utf8(&rest[..digits])
                .ok()?
                .parse::<u64>()
                .ok()
        })
        .filter(|&id| id <= MAX_TEXTUAL_ID);
    let mut ids: Vec<u64> = numbers.collect();
    if ids.is_empty() {
        return Vec::new();
    }
    ids.sort_unstable();
    ids.dedup();
    let agent_id = values_after(line, b"\"agent_id\":\"")
        .find_map(|rest| {
            let end = rest.iter().position(|&b| b == b'"')?;
            let name = std::str::from_utf8(&rest[..end]).ok()?;
            validate_id(IdKind::Agent, name).ok().map(|()| name)
        })
        .unwrap_or(DEFAULT_AGENT_ID)
        .to_owned();
    ids.into_iter().map(|id| (agent_id.clone(), id)).collect()
}

/// What follows each occurrence of `key` in `line` (spaces after it skipped).
fn values_after<'a>(line: &'a [u8], key: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut from = 0;
    std::iter::from_fn(move || {
        let found = line
            .get(from..)?
            .windows(key.len())
            .position(|window| window == key)?;
        let start = from + found + key.len();
        from = start;
        let rest = line.get(start..)?;
        let spaces = rest.iter().take_while(|&&b| b == b' ').count();
        rest.get(spaces..)
    })
}

/// The message ids held by the session's journals set aside (`kept`) and, if `live`, by its
/// journal: see [`readable_ids`]. A file that cannot be read holds none.
pub(super) fn kept_ids(session_dir: &Path, kept: &[PathBuf], live: bool) -> Vec<(String, u64)> {
    let live = live.then(|| session_dir.join(JOURNAL_FILE));
    let mut ids = Vec::new();
    let mut bytes = Vec::new();
    for path in kept.iter().chain(&live) {
        if matches!(read_into(path, &mut bytes), Ok(true)) {
            ids.extend(readable_ids(&bytes));
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tau(ids: &[u64]) -> Vec<(String, u64)> {
        ids.iter().map(|&id| ("tau".to_owned(), id)).collect()
    }

    /// A line that parses gives its ids, checksum or not; one that does not gives what its bytes
    /// still show.
    #[test]
    fn the_ids_of_a_set_aside_journal_are_read_leniently() {
        let bytes = b"{\"v\":2,\"agent_id\":\"tau\",\"messages\":[{\"message_id\":4},{\"message_id\":5}],\"crc\":\"00000000\"}\n\
garbage\n\
{\"v\":9,\"agent_id\":\"helper\",\"messages\":[{\"message_id\":1}]}\n\
{\"v\":2,\"agent_id\":\"tau\",\"messages\":[{\"message_id\":6}";
        let mut expected = tau(&[4, 5]);
        expected.push(("helper".to_owned(), 1));
        expected.extend(tau(&[6]));
        assert_eq!(readable_ids(bytes), expected);
    }

    #[test]
    fn a_line_damaged_past_parsing_still_gives_its_ids() {
        // A quote lost in the middle of the line: no longer JSON.
        let line = br#"{"v":2,"events_len":0,"agent_id":"helper","events":[{"type":"turn}],"messages":[{"message_id":12,"role":"user"},{"message_id": 13,"role":"assistant"}],"crc":"1c291ca3"}"#;
        assert_eq!(
            readable_ids(line),
            [("helper".to_owned(), 12), ("helper".to_owned(), 13)]
        );
        // The agent's name damaged too: the ids go to the hub's agent.
        let line = br#"{"v":2,"agent_id":"he/per","messages":[{"message_id":7}"#;
        assert_eq!(readable_ids(line), [(DEFAULT_AGENT_ID.to_owned(), 7)]);
        let line = br#"{"v":2,"agent_#d":"tau","messages":[{"message_id":7},{"message_id":7}"#;
        assert_eq!(readable_ids(line), [(DEFAULT_AGENT_ID.to_owned(), 7)]);
        // Still JSON, but a key damaged: not a batch as written, its bytes still read.
        let line = br#"{"v":2,"agent_id":"helper","messageZ":[{"message_id":3}],"crc":"1c291ca3"}"#;
        assert_eq!(readable_ids(line), [("helper".to_owned(), 3)]);
        let line = br#"{"v":2,"agent_iD":"helper","messages":[{"message_id":3}],"crc":"1c291ca3"}"#;
        assert_eq!(readable_ids(line), [(DEFAULT_AGENT_ID.to_owned(), 3)]);
    }

    #[test]
    fn damaged_numbers_and_lines_without_ids_give_nothing() {
        for line in [
            &b"garbage"[..],
            br#"{"v":2,"agent_id":"tau","events":[{"type":"turn"}"#,
            br#"{"v":2,"agent_id":"tau","messages":[{"message_id":99999999999999999999}"#,
            br#"{"v":2,"agent_id":"tau","messages":[{"message_id":9007199254740993}"#,
            br#"{"v":2,"agent_id":"tau","messages":[{"message_id":-3}"#,
            br#"{"v":2,"agent_id":"tau","messages":[{"message_id":"#,
        ] {
            assert_eq!(readable_ids(line), [], "{}", String::from_utf8_lossy(line));
        }
        // The largest id taken from damaged bytes.
        let line = br#"{"agent_id":"tau","messages":[{"message_id":9007199254740992}"#;
        assert_eq!(readable_ids(line), tau(&[1 << 53]));
    }
}
