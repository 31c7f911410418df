//! The file backend's write-ahead journal: `<session>/journal.jsonl`. A batch (events and
//! messages) is durable once its line is appended there, with one write and one `fdatasync`; its
//! message files and `events.jsonl` lines are written later without a sync ("materialized"), and
//! synced at a checkpoint that then empties the journal. A turn so pays one append per step
//! instead of a synced file creation per message plus a directory sync.
//!
//! ```text
//! {"v":2,"events_len":1234,"events":[…],"crc":"1c291ca3"}                            an event alone
//! {"v":2,"events_len":1234,"agent_id":"tau","events":[…],"messages":[…],"crc":"…"}   a batch
//! ```
//!
//! Each line is one record and stands alone: `events_len` is `events.jsonl`'s synced length when
//! the journal began, and `crc` the CRC-32 (IEEE, 8 lowercase hex digits) of every byte of the
//! line before `,"crc":`, so a line that was cut short or changed is known as such. Version 1
//! (still replayed, `tests/fixtures/journal-v1.jsonl`) had no checksum and gave `events_len`
//! only on a first line of its own.
//!
//! Invariants:
//! - Every event of the session goes through the journal, so `events.jsonl` past `events_len` holds
//!   exactly the journal's events (a prefix, when a crash came before they were materialized).
//! - A message id is refused (`MessageExists`) before its batch is journaled, so the journal never
//!   holds a message that would overwrite another; so is an id a set-aside journal still holds
//!   (see below), and the store's `message_id_floor` is past every such id.
//! - Every read of a session's messages or events materializes first ([`FileBackend::materialize`]),
//!   so readers only ever read files; the message count (deferred record) moves at the append.
//! - A checkpoint syncs what was materialized (files, directories, `events.jsonl`) before it
//!   empties the journal; a journal found with records on open is replayed ([`replay`]) before the
//!   session's files are counted: a message file that does not parse as its message is rewritten,
//!   and `events.jsonl` is cut back to `events_len` and given the journal's events again.
//! - A damaged record loses at most itself: a line whose checksum fails (or, version 1, that does
//!   not parse) is skipped with a warning naming the session and the line, and every whole record
//!   around it replays. A last line without its newline is an append a crash cut short (it never
//!   returned): replayed if whole, else skipped without a warning. A journal with a damaged line
//!   is set aside once replayed, never deleted: renamed `journal.jsonl.damaged-<UTC time>` beside
//!   it. So is a journal that cannot be replayed at all (a newer version, an unreadable file),
//!   unreplayed; the session goes on with a fresh journal either way. The message ids of every
//!   set-aside journal line that still parses stay taken, in this process and (read again at
//!   each reconciliation) the next.
//! - One store per sessions directory (one hub owns it): another store opened on it would replay,
//!   and remove, a journal this one still writes.
//! - Locks: the journal map's lock is held only to find or drop an entry; an entry's state lock is
//!   held through its disk work, but for a checkpoint's sync, which holds the entry's checkpoint
//!   lock instead (taken before the state lock), so appends go on meanwhile. Both come before the
//!   deferred, reserved and index locks, never after them.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fsutil::{TempFile, existing_dir, open_read, read_into, read_json, sync_dir};
use super::layout::{AGENTS_DIR, EVENTS_FILE, MESSAGES_DIR, message_file_name};
use super::{FileBackend, jsonl, to_json};
use crate::store::contract::Durability;
use crate::store::records::SessionMessage;
use crate::store::store_error::SessionError;

/// The journal's name in a session directory.
pub(super) const JOURNAL_FILE: &str = "journal.jsonl";
/// What a journal set aside is named: this, then its UTC time (`<JOURNAL_FILE>.damaged-…`).
const SET_ASIDE_INFIX: &str = ".damaged-";
/// The journal format this build writes; it replays this one and version 1.
const JOURNAL_VERSION: u32 = 2;
/// The first format, without checksums, whose `events_len` is on a first line of its own.
const JOURNAL_V1: u32 = 1;
/// What precedes a line's checksum: the line ends with `,"crc":"xxxxxxxx"}`.
const CRC_FIELD: &[u8] = b",\"crc\":\"";
/// The length of a line's checksum field and closing brace.
const CRC_TAIL_LEN: usize = CRC_FIELD.len() + 8 + 2;
/// A journal with this many batches is checkpointed at the next flush.
const CHECKPOINT_LINES: usize = 512;
/// A journal this old is checkpointed at the next flush: by then the kernel has written most of
/// what was materialized, so the syncs are cheap.
const CHECKPOINT_AGE: Duration = Duration::from_secs(30);
/// Messages held unmaterialized before an append materializes them itself.
const PENDING_MAX: usize = 64;

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
/// the last field, and a newline.
fn encode_line(line: &JournalLine, out: &mut Vec<u8>) -> Result<(), SessionError> {
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
fn checksum_holds(line: &[u8]) -> Option<bool> {
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
enum Decoded {
    /// A whole record of a version this build replays.
    Record(JournalLine),
    /// A record of a newer format, of this version.
    Newer(u32),
    /// No whole record: damaged, or cut short.
    Damaged,
}

fn decode_line(line: &[u8]) -> Decoded {
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
struct JournalRead {
    records: Vec<JournalLine>,
    /// The numbers (from 1) of the lines that end with a newline but hold no whole record.
    damaged: Vec<usize>,
    /// The version of the first line of a newer format.
    newer: Option<u32>,
}

fn parse_journal(bytes: &[u8]) -> JournalRead {
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

/// The message ids (with their agent) of every line of a journal that parses as JSON, checksum
/// or not: what a journal set aside may still hold.
fn readable_ids(bytes: &[u8]) -> Vec<(String, u64)> {
    let mut ids = Vec::new();
    for line in bytes.split(|&b| b == b'\n') {
        let Ok(Value::Object(record)) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let Some(Value::String(agent_id)) = record.get("agent_id") else {
            continue;
        };
        let Some(Value::Array(messages)) = record.get("messages") else {
            continue;
        };
        ids.extend(
            messages
                .iter()
                .filter_map(|message| message.get("message_id")?.as_u64())
                .map(|id| (agent_id.clone(), id)),
        );
    }
    ids
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

/// A message journaled and not yet materialized: its directory and record.
struct PendingMessage {
    dir: PathBuf,
    message: SessionMessage,
}

/// One session's journal as this process knows it.
#[derive(Default)]
pub(super) struct SessionJournal {
    /// Batches in the journal since it began (0: empty, its first line not written).
    lines: usize,
    /// When the journal began.
    began: Option<Instant>,
    /// The journal held records this process did not write (a replay failed): it is never
    /// emptied by this process, whose checkpoints then only sync.
    inherited: bool,
    /// `events.jsonl`'s length when the journal began, once known (every line carries it).
    events_len: Option<u64>,
    events: Vec<Value>,
    messages: Vec<PendingMessage>,
    /// Files and directories materialized since the last checkpoint, to sync at the next one.
    unsynced: HashSet<PathBuf>,
}

impl SessionJournal {
    fn is_clean(&self) -> bool {
        self.lines == 0 && self.events.is_empty() && self.messages.is_empty()
    }
}

/// A session's journal state, and the lock that lets one checkpoint at a time sync it.
pub(super) struct JournalEntry {
    state: Mutex<SessionJournal>,
    /// Held by a checkpoint through its sync (without `state`, so appends go on): a second
    /// checkpoint must not empty the journal while the first still syncs what it covers.
    checkpointing: Mutex<()>,
}

fn lock_entry(entry: &JournalEntry) -> MutexGuard<'_, SessionJournal> {
    // Each change to an entry follows its disk work, so a poisoned entry is as the disk left it.
    entry.state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FileBackend {
    fn lock_journals(&self) -> MutexGuard<'_, HashMap<String, Arc<JournalEntry>>> {
        self.journals.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn journal_entry(&self, session_id: &str, session_dir: &Path) -> Arc<JournalEntry> {
        let mut journals = self.lock_journals();
        if let Some(entry) = journals.get(session_id) {
            return Arc::clone(entry);
        }
        // A journal with records now is one its session's replay could not empty (its ids are
        // reserved by the reconciliation); new lines go on from where it began.
        let path = session_dir.join(JOURNAL_FILE);
        let inherited = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.len() > 0);
        let mut events_len = None;
        let mut bytes = Vec::new();
        if inherited && matches!(read_into(&path, &mut bytes), Ok(true)) {
            events_len = parse_journal(&bytes)
                .records
                .iter()
                .find_map(|record| record.events_len);
        }
        let entry = Arc::new(JournalEntry {
            state: Mutex::new(SessionJournal {
                inherited,
                lines: usize::from(inherited),
                events_len,
                ..SessionJournal::default()
            }),
            checkpointing: Mutex::new(()),
        });
        journals.insert(session_id.to_owned(), Arc::clone(&entry));
        entry
    }

    fn existing_entry(&self, session_id: &str) -> Option<Arc<JournalEntry>> {
        self.lock_journals().get(session_id).cloned()
    }

    /// Journals `events` and `messages` (of `agent_id`, in `messages_dir`) durably; they are
    /// materialized later. `MessageExists` (nothing written) if an id is taken.
    pub(super) fn journal_batch(
        &self,
        session_id: &str,
        session_dir: &Path,
        messages_dir: Option<(&str, &Path)>,
        events: &[Value],
        messages: &[SessionMessage],
    ) -> Result<(), SessionError> {
        let entry = self.journal_entry(session_id, session_dir);
        let mut journal = lock_entry(&entry);
        if journal.events_len.is_none() || !events.is_empty() {
            let events_file = session_dir.join(EVENTS_FILE);
            let events_len = match std::fs::symlink_metadata(&events_file) {
                // Refused now, not when materialized: nothing is written through a link.
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(SessionError::Symlink { path: events_file });
                }
                Ok(meta) => meta.len(),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => 0,
                Err(err) => return Err(SessionError::io(events_file, err)),
            };
            journal.events_len.get_or_insert(events_len);
        }
        let mut batch = JournalLine {
            v: JOURNAL_VERSION,
            events_len: journal.events_len,
            agent_id: None,
            events: events.to_vec(),
            messages: Vec::new(),
        };
        if let Some((agent_id, dir)) = messages_dir {
            for (n, message) in messages.iter().enumerate() {
                let taken = messages[..n]
                    .iter()
                    .chain(
                        journal
                            .messages
                            .iter()
                            .filter(|p| p.dir == dir)
                            .map(|p| &p.message),
                    )
                    .any(|m| m.message_id == message.message_id)
                    || self.is_reserved(session_id, agent_id, message.message_id)
                    || std::fs::symlink_metadata(dir.join(message_file_name(message.message_id)))
                        .is_ok();
                if taken {
                    return Err(SessionError::MessageExists {
                        session_id: session_id.to_owned(),
                        agent_id: agent_id.to_owned(),
                        message_id: message.message_id,
                    });
                }
            }
            batch.agent_id = Some(agent_id.to_owned());
            batch.messages = messages.to_vec();
        }
        let mut line = Vec::with_capacity(512);
        encode_line(&batch, &mut line)?;
        jsonl::append_bytes(session_dir, JOURNAL_FILE, &line, self.durability)?;
        journal.lines += 1;
        journal.began.get_or_insert_with(Instant::now);
        journal.events.extend(batch.events);
        if let Some((_, dir)) = messages_dir {
            journal
                .messages
                .extend(batch.messages.into_iter().map(|message| PendingMessage {
                    dir: dir.to_path_buf(),
                    message,
                }));
        }
        if journal.messages.len() > PENDING_MAX {
            self.materialize_locked(session_dir, &mut journal)?;
        }
        Ok(())
    }

    /// Writes the session's journaled records to their files (not synced), so a read finds them.
    pub(super) fn materialize(&self, session_id: &str) -> Result<(), SessionError> {
        let Some(entry) = self.existing_entry(session_id) else {
            return Ok(());
        };
        let mut journal = lock_entry(&entry);
        self.materialize_locked(&self.root.join(session_id), &mut journal)
    }

    fn materialize_locked(
        &self,
        session_dir: &Path,
        journal: &mut SessionJournal,
    ) -> Result<(), SessionError> {
        if !journal.events.is_empty() {
            jsonl::append_lines(
                session_dir,
                EVENTS_FILE,
                &journal.events,
                Durability::NoSync,
            )?;
            journal.events.clear();
            let events = session_dir.join(EVENTS_FILE);
            journal.unsynced.insert(session_dir.to_path_buf());
            journal.unsynced.insert(events);
        }
        let pending = std::mem::take(&mut journal.messages);
        let mut rest = pending.into_iter();
        while let Some(next) = rest.next() {
            let name = message_file_name(next.message.message_id);
            let path = next.dir.join(&name);
            let written = to_json(&next.message).and_then(|bytes| {
                TempFile::write(&next.dir, &name, &bytes, Durability::NoSync)?.link_new(&path)
            });
            match written {
                Ok(true) => {}
                // Refused at the append, so only someone writing behind the store's back.
                Ok(false) => {
                    tracing::warn!(path = %path.display(), "a journaled message's file exists already; kept");
                }
                Err(err) => {
                    journal.messages.push(next);
                    journal.messages.extend(rest);
                    return Err(err);
                }
            }
            journal.unsynced.insert(path);
            journal.unsynced.insert(next.dir);
        }
        Ok(())
    }

    /// Materializes, then (when `force`, or the journal is large or old) syncs what was
    /// materialized and empties the journal.
    pub(super) fn checkpoint(&self, session_id: &str, force: bool) -> Result<(), SessionError> {
        self.checkpoint_as(session_id, force, false)
    }

    /// `checkpoint`; with `remove`, an emptied journal's file goes too (a closed session keeps
    /// the seed's layout).
    fn checkpoint_as(
        &self,
        session_id: &str,
        force: bool,
        remove: bool,
    ) -> Result<(), SessionError> {
        let Some(entry) = self.existing_entry(session_id) else {
            return Ok(());
        };
        let session_dir = self.root.join(session_id);
        let _checkpointing = entry
            .checkpointing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (lines, unsynced) = {
            let mut journal = lock_entry(&entry);
            self.materialize_locked(&session_dir, &mut journal)?;
            let due = journal.lines >= CHECKPOINT_LINES
                || journal
                    .began
                    .is_some_and(|at| at.elapsed() >= CHECKPOINT_AGE);
            if journal.lines == 0 || !(force || due) {
                return Ok(());
            }
            (journal.lines, std::mem::take(&mut journal.unsynced))
        };
        // Synced without the entry's lock, so the session's next append need not wait for it.
        if let Err(err) = sync_paths(&session_dir, unsynced.iter(), self.durability) {
            lock_entry(&entry).unsynced.extend(unsynced);
            return Err(err);
        }
        let mut journal = lock_entry(&entry);
        // A batch journaled meanwhile may not be materialized yet: the journal stays, and the
        // next checkpoint syncs only what came after.
        if journal.inherited || journal.lines != lines {
            return Ok(());
        }
        empty_journal(&session_dir, remove, self.durability)?;
        journal.lines = 0;
        journal.began = None;
        journal.events_len = None;
        Ok(())
    }

    /// Checkpoints the session's journal and forgets its entry when nobody else holds it.
    pub(super) fn close_journal(&self, session_id: &str) -> Result<(), SessionError> {
        self.checkpoint_as(session_id, true, true)?;
        let mut journals = self.lock_journals();
        if let Some(entry) = journals.get(session_id)
            && Arc::strong_count(entry) == 1
            && lock_entry(entry).is_clean()
        {
            journals.remove(session_id);
        }
        Ok(())
    }

    /// The sessions with a journal entry (what a closing store checkpoints).
    pub(super) fn journaled_sessions(&self) -> Vec<String> {
        self.lock_journals().keys().cloned().collect()
    }

    fn lock_reserved(&self) -> MutexGuard<'_, ReservedIds> {
        // Only ever grown: a poisoned map is a smaller one.
        self.reserved.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `ids` (agent, message id) of the session taken: a journal set aside (or one that
    /// could not be replayed) holds them.
    pub(super) fn reserve_ids(&self, session_id: &str, ids: Vec<(String, u64)>) {
        if ids.is_empty() {
            return;
        }
        let mut reserved = self.lock_reserved();
        let agents = reserved.entry(session_id.to_owned()).or_default();
        for (agent_id, id) in ids {
            agents.entry(agent_id).or_default().insert(id);
        }
    }

    fn is_reserved(&self, session_id: &str, agent_id: &str, message_id: u64) -> bool {
        let reserved = self.lock_reserved();
        reserved
            .get(session_id)
            .and_then(|agents| agents.get(agent_id))
            .is_some_and(|ids| ids.contains(&message_id))
    }

    /// One past the highest id reserved for the agent, 0 when none is.
    pub(super) fn reserved_floor(&self, session_id: &str, agent_id: &str) -> u64 {
        let reserved = self.lock_reserved();
        reserved
            .get(session_id)
            .and_then(|agents| agents.get(agent_id))
            .and_then(|ids| ids.last())
            .map_or(0, |last| last.saturating_add(1))
    }
}

/// Message ids a journal set aside still holds, by session and agent (see [`kept_ids`]).
pub(super) type ReservedIds = HashMap<String, HashMap<String, BTreeSet<u64>>>;

/// Syncs every path in `paths` (files and directories); on Linux one `syncfs` does it all,
/// unless the kernel (or a sandbox) refuses the call.
fn sync_paths<'a>(
    session_dir: &Path,
    paths: impl ExactSizeIterator<Item = &'a PathBuf>,
    durability: Durability,
) -> Result<(), SessionError> {
    if durability == Durability::NoSync || paths.len() == 0 {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        let dir =
            std::fs::File::open(session_dir).map_err(|err| SessionError::io(session_dir, err))?;
        match nix::unistd::syncfs(&dir) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::ENOSYS | nix::errno::Errno::EPERM) => {}
            Err(err) => return Err(SessionError::io(session_dir, std::io::Error::from(err))),
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = session_dir;
    for path in paths {
        let file = std::fs::File::open(path).map_err(|err| SessionError::io(path, err))?;
        file.sync_all().map_err(|err| SessionError::io(path, err))?;
    }
    Ok(())
}

/// Empties the session's journal, or removes it with `remove` (a checkpoint's or a replay's last
/// step).
fn empty_journal(
    session_dir: &Path,
    remove: bool,
    durability: Durability,
) -> Result<(), SessionError> {
    let path = session_dir.join(JOURNAL_FILE);
    if remove {
        return match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(session_dir, durability),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(SessionError::io(&path, err)),
        };
    }
    let file = match OpenOptions::new()
        .write(true)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&path)
    {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(SessionError::io(&path, err)),
    };
    file.set_len(0)
        .map_err(|err| SessionError::io(&path, err))?;
    if durability == Durability::Full {
        file.sync_data()
            .map_err(|err| SessionError::io(&path, err))?;
    }
    Ok(())
}

/// Replays the journal of the session `session_id` in `session_dir` after a crash (see the
/// module documentation) and removes it, or sets it aside when a line was damaged or the
/// journal cannot be replayed at all; returns how many records it had to write again. An error
/// (a record that cannot be written again) leaves the journal where it is, for the next process.
pub(super) fn replay(
    session_id: &str,
    session_dir: &Path,
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
        sync_paths(session_dir, paths.iter(), durability)?;
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
fn set_aside(session_dir: &Path, durability: Durability) -> Result<PathBuf, SessionError> {
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
fn restore_events(
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
fn restore_events_unanchored(
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

    /// What a set-aside journal still tells: the ids of every line that parses, checksum or not.
    #[test]
    fn the_ids_of_a_set_aside_journal_are_read_leniently() {
        let bytes = b"{\"v\":2,\"agent_id\":\"tau\",\"messages\":[{\"message_id\":4},{\"message_id\":5}],\"crc\":\"00000000\"}\n\
garbage\n\
{\"v\":9,\"agent_id\":\"helper\",\"messages\":[{\"message_id\":1}]}\n\
{\"v\":2,\"agent_id\":\"tau\",\"messages\":[{\"message_id\":6}";
        assert_eq!(
            readable_ids(bytes),
            [
                ("tau".to_owned(), 4),
                ("tau".to_owned(), 5),
                ("helper".to_owned(), 1)
            ]
        );
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
