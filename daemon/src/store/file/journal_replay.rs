//! Reading a journal back: the line format (version 2, each line checksummed; version 1 still
//! read), what a damaged line loses (only itself), the replay of a journal found on open, and the
//! journals set aside. The writing side (appends, materializing, checkpoints) is `journal.rs`;
//! the invariants of both are stated there.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::checkpoint::empty_journal;
use super::fsutil::{TempFile, existing_dir, open_read, read_into, read_json, sync_dir};
use super::layout::{AGENTS_DIR, EVENTS_FILE, JOURNAL_FILE, MESSAGES_DIR, message_file_name};
use super::sync_pool::SyncPool;
use super::{jsonl, to_json};
use crate::store::contract::Durability;
use crate::store::records::SessionMessage;
use crate::store::store_error::SessionError;

/// What a journal set aside is named: this, then its UTC time (`<JOURNAL_FILE>.damaged-…`).
pub(super) const SET_ASIDE_INFIX: &str = ".damaged-";
/// The journal format this build writes; it replays this one and version 1.
pub(super) const JOURNAL_VERSION: u32 = 2;
/// The first format, without checksums, whose `events_len` is on a first line of its own.
pub(super) const JOURNAL_V1: u32 = 1;
/// What precedes a line's checksum: the line ends with `,"crc":"xxxxxxxx"}`.
pub(super) const CRC_FIELD: &[u8] = b",\"crc\":\"";
/// The length of a line's checksum field and closing brace.
pub(super) const CRC_TAIL_LEN: usize = CRC_FIELD.len() + 8 + 2;

/// One record of the journal (its checksum is added and checked around it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct JournalLine {
    pub(super) v: u32,
    /// `events.jsonl`'s length when the journal began: on every line (version 1: on a first line
    /// of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) events_len: Option<u64>,
    /// The agent of `messages`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) events: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) messages: Vec<SessionMessage>,
}

/// Appends `line` to `out` as a journal line: its JSON with the checksum of what precedes it as
/// the last field, and a newline. Appends encode theirs from bytes serialized once
/// (`materialize::encode_batch`), held equal to this by a test.
#[cfg(test)]
pub(super) fn encode_line(line: &JournalLine, out: &mut Vec<u8>) -> Result<(), SessionError> {
    use std::io::Write;
    let start = out.len();
    serde_json::to_writer(&mut *out, line)
        .map_err(|err| SessionError::corrupt("journal record", err))?;
    // An object always ends with its brace; the checksum field goes before it.
    if out.pop() != Some(b'}') {
        return Err(SessionError::corrupt(
            "journal record",
            "not serialized as an object",
        ));
    }
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(CRC_FIELD);
    writeln!(out, "{crc:08x}\"}}").map_err(|err| SessionError::corrupt("journal record", err))
}

/// Whether the line's checksum holds; `None` if it has no checksum field at its end.
pub(super) fn checksum_holds(line: &[u8]) -> Option<bool> {
    let body_len = line.len().checked_sub(CRC_TAIL_LEN)?;
    let (body, tail) = line.split_at(body_len);
    let hex = tail.strip_prefix(CRC_FIELD)?.strip_suffix(b"\"}")?;
    if !hex
        .iter()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return None;
    }
    let stored = std::str::from_utf8(hex)
        .ok()
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())?;
    Some(crc32fast::hash(body) == stored)
}

/// What one line of a journal holds.
#[derive(Debug, PartialEq)]
pub(super) enum Decoded {
    /// A whole record of a version this build replays.
    Record(JournalLine),
    /// A record of a newer format, of this version.
    Newer(u32),
    /// No whole record: damaged, or cut short.
    Damaged,
}

pub(super) fn decode_line(line: &[u8]) -> Decoded {
    #[derive(Deserialize)]
    struct Version {
        v: u32,
    }
    let Ok(Version { v }) = serde_json::from_slice::<Version>(line) else {
        return Decoded::Damaged;
    };
    let whole = match v {
        JOURNAL_VERSION => checksum_holds(line) == Some(true),
        // Version 1 had no checksum: a line that parses is whole.
        JOURNAL_V1 => checksum_holds(line).is_none(),
        newer if newer > JOURNAL_VERSION => return Decoded::Newer(newer),
        _ => false,
    };
    if !whole {
        return Decoded::Damaged;
    }
    match serde_json::from_slice::<JournalLine>(line) {
        Ok(record) => Decoded::Record(record),
        Err(_) => Decoded::Damaged,
    }
}

/// A journal as read: its whole records, the lines that held none, and whether a line was of a
/// newer format.
#[derive(Debug, Default)]
pub(super) struct JournalRead {
    pub(super) records: Vec<JournalLine>,
    /// The numbers (from 1) of the lines that end with a newline but hold no whole record.
    pub(super) damaged: Vec<usize>,
    /// The version of the first line of a newer format.
    pub(super) newer: Option<u32>,
}

pub(super) fn parse_journal(bytes: &[u8]) -> JournalRead {
    let mut read = JournalRead::default();
    for (index, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let (line, ended) = match line.strip_suffix(b"\n") {
            Some(line) => (line, true),
            None => (line, false),
        };
        match decode_line(line) {
            Decoded::Record(record) => read.records.push(record),
            Decoded::Newer(version) => {
                read.newer.get_or_insert(version);
            }
            Decoded::Damaged if ended => read.damaged.push(index + 1),
            // The last append, cut short by a crash before it returned.
            Decoded::Damaged => {}
        }
    }
    read
}

/// Whether `name` is that of a journal set aside.
pub(super) fn is_set_aside(name: &str) -> bool {
    name.strip_prefix(JOURNAL_FILE)
        .is_some_and(|rest| rest.starts_with(SET_ASIDE_INFIX))
}

/// The journals of the session set aside, by path (a directory listing of its own; the
/// reconciliation finds them in its scan).
pub(super) fn set_aside_journals(session_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(session_dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_str().is_some_and(is_set_aside))
        .map(|entry| entry.path())
        .collect()
}

/// Replays the journal of the session `session_id` in `session_dir` after a crash (see the
/// module documentation) and removes it, or sets it aside when a line was damaged or the
/// journal cannot be replayed at all; returns how many records it had to write again. An error
/// (a record that cannot be written again) leaves the journal where it is, for the next process.
pub(super) fn replay(
    session_id: &str,
    session_dir: &Path,
    syncer: &SyncPool,
    durability: Durability,
) -> Result<usize, SessionError> {
    let path = session_dir.join(JOURNAL_FILE);
    // Most sessions have none (every session is surveyed once per process): one stat, not an
    // open and a removal.
    if std::fs::symlink_metadata(&path).is_err_and(|err| err.kind() == std::io::ErrorKind::NotFound)
    {
        return Ok(0);
    }
    let mut bytes = Vec::new();
    if let Err(err) = read_into(&path, &mut bytes) {
        let aside = set_aside(session_dir, durability)?;
        tracing::warn!(session_id, %err, set_aside = %aside.display(), "a session's journal cannot be read; it is set aside, not replayed, and the session goes on with a new one");
        return Ok(0);
    }
    let read = parse_journal(&bytes);
    drop(bytes);
    if let Some(version) = read.newer {
        let aside = set_aside(session_dir, durability)?;
        tracing::warn!(session_id, version, replays = JOURNAL_VERSION, set_aside = %aside.display(), "a session's journal has a newer format; it is set aside, not replayed, and the session goes on with a new one");
        return Ok(0);
    }
    for line in &read.damaged {
        tracing::warn!(session_id, line, path = %path.display(), "a journal line is damaged: its record is skipped, the others replay, and the journal is kept aside");
    }
    let lines = read.records;
    let mut rewritten = 0;
    let events: Vec<&Value> = lines.iter().flat_map(|line| &line.events).collect();
    match lines.iter().find_map(|line| line.events_len) {
        Some(events_len) => {
            rewritten += restore_events(session_dir, events_len, &events, durability)?;
        }
        // A version 1 journal whose first line was lost.
        None if !events.is_empty() => {
            rewritten += restore_events_unanchored(session_dir, &events, durability)?;
        }
        None => {}
    }
    // Every path the journal names, to sync: a crash of the process leaves whole files unsynced.
    let mut paths = vec![session_dir.to_path_buf(), session_dir.join(EVENTS_FILE)];
    for line in &lines {
        let Some(agent_id) = &line.agent_id else {
            continue;
        };
        let Some(dir) = existing_dir(session_dir, &[AGENTS_DIR, agent_id, MESSAGES_DIR])? else {
            tracing::warn!(
                session_id,
                agent_id,
                "a journaled agent has no messages directory; its messages are not replayed"
            );
            continue;
        };
        for message in &line.messages {
            let name = message_file_name(message.message_id);
            let file = dir.join(&name);
            // A file that parses as its message is whole (a redaction may have replaced it).
            let whole = matches!(read_json::<SessionMessage>(&file), Ok(Some(stored)) if stored.message_id == message.message_id);
            if !whole {
                TempFile::write(&dir, &name, &to_json(message)?, durability)?.replace(&file)?;
                rewritten += 1;
            }
            paths.push(file);
        }
        if !paths.contains(&dir) {
            paths.push(dir);
        }
    }
    if !lines.is_empty() {
        syncer.sync_paths(paths.iter(), durability)?;
    }
    if read.damaged.is_empty() {
        empty_journal(session_dir, true, durability)?;
        return Ok(rewritten);
    }
    let aside = set_aside(session_dir, durability)?;
    tracing::info!(session_id, set_aside = %aside.display(), "kept a replayed journal with damaged lines aside");
    Ok(rewritten)
}

/// Renames the session's journal `journal.jsonl.damaged-<UTC time>` (with `-2`, `-3` … when
/// that name is taken), kept beside it; returns the new path.
pub(super) fn set_aside(
    session_dir: &Path,
    durability: Durability,
) -> Result<PathBuf, SessionError> {
    let path = session_dir.join(JOURNAL_FILE);
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let base = format!("{JOURNAL_FILE}{SET_ASIDE_INFIX}{stamp}");
    for n in 1..=1000u32 {
        let name = match n {
            1 => base.clone(),
            n => format!("{base}-{n}"),
        };
        let target = session_dir.join(name);
        // One process writes the session (see the module documentation): a name free now is
        // free at the rename.
        match std::fs::symlink_metadata(&target) {
            Ok(_) => continue,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(SessionError::io(target, err)),
        }
        std::fs::rename(&path, &target).map_err(|err| SessionError::io(&path, err))?;
        sync_dir(session_dir, durability)?;
        return Ok(target);
    }
    Err(SessionError::corrupt(
        path.display(),
        "no free name to set the journal aside",
    ))
}

/// Unless `events.jsonl` past `events_len` holds exactly `events`, cuts it back to `events_len`
/// and appends them (synced); returns how many were written.
pub(super) fn restore_events(
    session_dir: &Path,
    events_len: u64,
    events: &[&Value],
    durability: Durability,
) -> Result<usize, SessionError> {
    let path = session_dir.join(EVENTS_FILE);
    let mut present: Vec<Value> = Vec::new();
    if let Some(mut file) = open_read(&path)? {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes)
            .map_err(|err| SessionError::io(&path, err))?;
        let start = usize::try_from(events_len)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        present = jsonl::parse_lines(&path, &bytes[start..]);
    }
    let intact = present.len() == events.len()
        && present
            .iter()
            .zip(events)
            .all(|(stored, journaled)| stored == *journaled);
    if intact {
        return Ok(0);
    }
    if let Some(file) = open_read(&path)? {
        drop(file);
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(&path)
            .map_err(|err| SessionError::io(&path, err))?;
        let len = file
            .metadata()
            .map_err(|err| SessionError::io(&path, err))?
            .len();
        // Never longer: a shorter file than its synced length is damage this cannot undo.
        file.set_len(events_len.min(len))
            .map_err(|err| SessionError::io(&path, err))?;
    }
    jsonl::append_lines(session_dir, EVENTS_FILE, events, durability)?;
    Ok(events.len())
}

/// `restore_events` without `events_len` (a version 1 journal whose first line was lost):
/// `events.jsonl` is taken to end with a prefix of `events` (those materialized before the
/// crash, the last maybe torn); the longest such prefix it ends with is kept, a torn last line
/// cut off, and the rest appended (synced). Returns how many were written.
pub(super) fn restore_events_unanchored(
    session_dir: &Path,
    events: &[&Value],
    durability: Durability,
) -> Result<usize, SessionError> {
    let path = session_dir.join(EVENTS_FILE);
    let mut bytes = Vec::new();
    read_into(&path, &mut bytes)?;
    let whole = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    let present: Vec<Value> = jsonl::parse_lines(&path, &bytes[..whole]);
    let kept = (0..=events.len().min(present.len()))
        .rev()
        .find(|&k| {
            present[present.len() - k..]
                .iter()
                .zip(&events[..k])
                .all(|(stored, journaled)| stored == *journaled)
        })
        .unwrap_or(0);
    if kept == events.len() {
        return Ok(0);
    }
    if whole < bytes.len() {
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(&path)
            .map_err(|err| SessionError::io(&path, err))?;
        file.set_len(u64::try_from(whole).unwrap_or(u64::MAX))
            .map_err(|err| SessionError::io(&path, err))?;
    }
    jsonl::append_lines(session_dir, EVENTS_FILE, &events[kept..], durability)?;
    Ok(events.len() - kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(events_len: u64, events: Vec<Value>) -> JournalLine {
        JournalLine {
            v: JOURNAL_VERSION,
            events_len: Some(events_len),
            agent_id: None,
            events,
            messages: Vec::new(),
        }
    }

    fn encoded(line: &JournalLine) -> Vec<u8> {
        let mut out = Vec::new();
        encode_line(line, &mut out).unwrap();
        out
    }

    /// The format as documented, its checksum computed elsewhere (Python's `zlib.crc32`).
    #[test]
    fn a_line_ends_with_the_checksum_of_what_precedes_it() {
        assert_eq!(
            encoded(&record(0, Vec::new())),
            b"{\"v\":2,\"events_len\":0,\"crc\":\"676441f8\"}\n"
        );
    }

    #[test]
    fn a_whole_line_decodes_and_a_changed_or_cut_one_does_not() {
        let line = record(7, vec![json!({"type": "turn", "v": 1})]);
        let bytes = encoded(&line);
        let text = &bytes[..bytes.len() - 1];
        assert_eq!(decode_line(text), Decoded::Record(line));

        let changed = String::from_utf8(text.to_vec())
            .unwrap()
            .replace("turn", "tUrn");
        assert_eq!(decode_line(changed.as_bytes()), Decoded::Damaged);
        for cut in [1, 10, text.len() - 1] {
            assert_eq!(decode_line(&text[..cut]), Decoded::Damaged, "cut at {cut}");
        }
        let unchecked = br#"{"v":2,"events_len":7,"events":[{"type":"turn","v":1}]}"#;
        assert_eq!(decode_line(unchecked), Decoded::Damaged, "no checksum");
        let wrong = br#"{"v":2,"events_len":7,"crc":"00000000"}"#;
        assert_eq!(decode_line(wrong), Decoded::Damaged);
        assert_eq!(decode_line(b""), Decoded::Damaged);
        assert_eq!(decode_line(b"garbage"), Decoded::Damaged);
    }

    #[test]
    fn the_first_format_decodes_without_a_checksum_and_a_newer_one_is_named() {
        let v1 = br#"{"v":1,"events_len":12}"#;
        assert_eq!(
            decode_line(v1),
            Decoded::Record(JournalLine {
                v: 1,
                events_len: Some(12),
                agent_id: None,
                events: Vec::new(),
                messages: Vec::new(),
            })
        );
        assert_eq!(
            decode_line(br#"{"v":3,"anything":"else"}"#),
            Decoded::Newer(3)
        );
        assert_eq!(decode_line(br#"{"v":0}"#), Decoded::Damaged);
    }

    #[test]
    fn a_journal_is_read_line_by_line() {
        let first = encoded(&record(0, vec![json!({"n": 1})]));
        let second = encoded(&record(0, vec![json!({"n": 2})]));
        let third = encoded(&record(0, vec![json!({"n": 3})]));
        let mut bytes = b"garbage\n".to_vec();
        bytes.extend_from_slice(&first);
        bytes.extend_from_slice(b"\n");
        bytes.extend_from_slice(&second);
        // The last append, cut short: no warning, no record.
        bytes.extend_from_slice(&third[..third.len() / 2]);
        let read = parse_journal(&bytes);
        let events: Vec<&Value> = read.records.iter().flat_map(|r| &r.events).collect();
        assert_eq!(events, [&json!({"n": 1}), &json!({"n": 2})]);
        assert_eq!(read.damaged, [1, 3]);
        assert_eq!(read.newer, None);

        // A last line whole but for its newline is replayed.
        let read = parse_journal(&third[..third.len() - 1]);
        assert_eq!(read.records.len(), 1);
        assert!(read.damaged.is_empty());

        let read = parse_journal(b"{\"v\":9}\n");
        assert_eq!(read.newer, Some(9));
    }

    #[test]
    fn set_aside_names_are_recognised() {
        assert!(is_set_aside("journal.jsonl.damaged-20260101T000000Z"));
        assert!(is_set_aside("journal.jsonl.damaged-20260101T000000Z-2"));
        assert!(!is_set_aside("journal.jsonl"));
        assert!(!is_set_aside("events.jsonl.damaged-20260101T000000Z"));
    }

    #[test]
    fn a_journal_set_aside_never_replaces_another() {
        let dir = tempfile::tempdir().unwrap();
        let mut names = Vec::new();
        for n in 0..3 {
            std::fs::write(dir.path().join(JOURNAL_FILE), format!("{n}")).unwrap();
            names.push(set_aside(dir.path(), Durability::NoSync).unwrap());
        }
        assert!(!dir.path().join(JOURNAL_FILE).exists());
        for (n, name) in names.iter().enumerate() {
            assert_eq!(std::fs::read_to_string(name).unwrap(), format!("{n}"));
        }
        let mut found = set_aside_journals(dir.path());
        found.sort();
        names.sort();
        assert_eq!(found, names);
    }

    /// Without `events_len`, the longest prefix of the journal's events that `events.jsonl`
    /// ends with is kept, a torn line after it cut, and the rest appended.
    #[test]
    fn events_without_their_start_are_appended_after_what_was_materialized() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(EVENTS_FILE);
        let (a, b, c) = (json!({"n": "a"}), json!({"n": "b"}), json!({"n": "c"}));
        let journaled = [&b, &c];
        let cases: [(&str, usize); 4] = [
            ("{\"n\":\"a\"}\n", 2),
            ("{\"n\":\"a\"}\n{\"n\":\"b\"}\n", 1),
            ("{\"n\":\"a\"}\n{\"n\":\"b\"}\n{\"n\":", 1),
            ("{\"n\":\"a\"}\n{\"n\":\"b\"}\n{\"n\":\"c\"}\n", 0),
        ];
        for (before, written) in cases {
            std::fs::write(&path, before).unwrap();
            assert_eq!(
                restore_events_unanchored(dir.path(), &journaled, Durability::NoSync).unwrap(),
                written,
                "{before}"
            );
            let events: Vec<Value> = jsonl::read_lines(&path).unwrap();
            assert_eq!(events, [a.clone(), b.clone(), c.clone()], "{before}");
        }
    }
}
