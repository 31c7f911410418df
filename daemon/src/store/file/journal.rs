//! The file backend's write-ahead journal: `<session>/journal.jsonl`. A batch (events and
//! messages) is durable once its line is appended there, with one write and one `fdatasync`; its
//! message files and `events.jsonl` lines are written later without a sync ("materialized"), and
//! synced at a checkpoint that then empties the journal (at a flush once the journal holds 512
//! batches, is 30 s old or has [`CHECKPOINT_UNSYNCED`] paths to sync, and when the session closes). A turn so pays one append per step
//! instead of a synced file creation per message plus a directory sync.
//!
//! ```text
//! {"v":1,"events_len":1234}                                 first line: events.jsonl's synced length
//! {"v":1,"events":[…]}                                      an event alone
//! {"v":1,"agent_id":"tau","events":[…],"messages":[…]}      a batch
//! ```
//!
//! Invariants:
//! - Every event of the session goes through the journal, so `events.jsonl` past `events_len` holds
//!   exactly the journal's events (a prefix, when a crash came before they were materialized).
//! - A message id is refused (`MessageExists`) before its batch is journaled, so the journal never
//!   holds a message that would overwrite another.
//! - Every read of a session's messages or events materializes first ([`FileBackend::materialize`]),
//!   so readers only ever read files; the message count (deferred record) moves at the append.
//! - A checkpoint syncs what was materialized (files, directories, `events.jsonl`) before it
//!   empties the journal; a journal found with records on open is replayed ([`replay`]) before the
//!   session's files are counted: a message file that does not parse as its message is rewritten,
//!   and `events.jsonl` is cut back to `events_len` and given the journal's events again.
//! - One store per sessions directory (one hub owns it): another store opened on it would replay,
//!   and remove, a journal this one still writes.
//! - Locks: the journal map's lock is held only to find or drop an entry; an entry's state lock is
//!   held through its disk work, but for a checkpoint's sync, which holds the entry's checkpoint
//!   lock instead (taken before the state lock), so appends go on meanwhile. Both come before the
//!   deferred and index locks, never after them.

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fsutil::{TempFile, existing_dir, open_read, read_json, sync_dir};
use super::layout::{AGENTS_DIR, EVENTS_FILE, MESSAGES_DIR, message_file_name};
use super::{FileBackend, jsonl, to_json};
use crate::store::contract::Durability;
use crate::store::records::SessionMessage;
use crate::store::store_error::SessionError;

/// The journal's name in a session directory.
pub(super) const JOURNAL_FILE: &str = "journal.jsonl";
/// The journal format this build writes and replays.
const JOURNAL_VERSION: u32 = 1;
/// A journal with this many batches is checkpointed at the next flush.
const CHECKPOINT_LINES: usize = 512;
/// A journal this old is checkpointed at the next flush: by then the kernel has written most of
/// what was materialized, so the syncs are cheap.
const CHECKPOINT_AGE: Duration = Duration::from_secs(30);
/// Messages held unmaterialized before an append materializes them itself.
const PENDING_MAX: usize = 64;
/// Files and directories materialized since the last checkpoint past which the next flush
/// checkpoints: each is a path the session holds in memory until then (a busy session would
/// otherwise gather 30 s of them, some 100 KiB).
const CHECKPOINT_UNSYNCED: usize = 128;

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct JournalLine {
    pub(super) v: u32,
    /// On the first line only: `events.jsonl`'s length when the journal began.
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
        // A journal with records now is one its session's replay could not empty.
        let inherited = std::fs::symlink_metadata(session_dir.join(JOURNAL_FILE))
            .is_ok_and(|meta| meta.len() > 0);
        let entry = Arc::new(JournalEntry {
            state: Mutex::new(SessionJournal {
                inherited,
                lines: usize::from(inherited),
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
        let mut lines = Vec::with_capacity(2);
        if journal.lines == 0 || !events.is_empty() {
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
            if journal.lines == 0 {
                lines.push(JournalLine {
                    v: JOURNAL_VERSION,
                    events_len: Some(events_len),
                    agent_id: None,
                    events: Vec::new(),
                    messages: Vec::new(),
                });
            }
        }
        let mut batch = JournalLine {
            v: JOURNAL_VERSION,
            events_len: None,
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
        lines.push(batch);
        jsonl::append_lines(session_dir, JOURNAL_FILE, &lines, self.durability)?;
        let Some(batch) = lines.pop() else {
            return Ok(());
        };
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
                || journal.unsynced.len() >= CHECKPOINT_UNSYNCED
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
}

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

/// Replays the journal of the session in `session_dir` after a crash (see the module
/// documentation) and empties it; returns how many records it had to write again. A journal of
/// another version is refused and kept.
pub(super) fn replay(session_dir: &Path, durability: Durability) -> Result<usize, SessionError> {
    let path = session_dir.join(JOURNAL_FILE);
    // Most sessions have none (every session is surveyed once per process): one stat, not an
    // open and a removal.
    if std::fs::symlink_metadata(&path).is_err_and(|err| err.kind() == std::io::ErrorKind::NotFound)
    {
        return Ok(0);
    }
    let lines: Vec<JournalLine> = jsonl::read_lines(&path)?;
    if let Some(line) = lines.iter().find(|line| line.v != JOURNAL_VERSION) {
        return Err(SessionError::corrupt(
            path.display(),
            format!(
                "journal version {} (this build replays {JOURNAL_VERSION})",
                line.v
            ),
        ));
    }
    let mut repaired = 0;
    if let Some(events_len) = lines.iter().find_map(|line| line.events_len) {
        let events: Vec<&Value> = lines.iter().flat_map(|line| &line.events).collect();
        repaired += restore_events(session_dir, events_len, &events, durability)?;
    } else if lines
        .iter()
        .any(|line| !line.events.is_empty() || !line.messages.is_empty())
    {
        return Err(SessionError::corrupt(
            path.display(),
            "journal records without its first line",
        ));
    }
    // Every path the journal names, to sync: a crash of the process leaves whole files unsynced.
    let mut paths = vec![session_dir.to_path_buf(), session_dir.join(EVENTS_FILE)];
    for line in &lines {
        let Some(agent_id) = &line.agent_id else {
            continue;
        };
        let Some(dir) = existing_dir(session_dir, &[AGENTS_DIR, agent_id, MESSAGES_DIR])? else {
            tracing::warn!(session_dir = %session_dir.display(), agent_id, "a journaled agent has no messages directory; its messages are not replayed");
            continue;
        };
        for message in &line.messages {
            let name = message_file_name(message.message_id);
            let file = dir.join(&name);
            // A file that parses as its message is whole (a redaction may have replaced it).
            let whole = matches!(read_json::<SessionMessage>(&file), Ok(Some(stored)) if stored.message_id == message.message_id);
            if !whole {
                TempFile::write(&dir, &name, &to_json(message)?, durability)?.replace(&file)?;
                repaired += 1;
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
    empty_journal(session_dir, true, durability)?;
    Ok(repaired)
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
