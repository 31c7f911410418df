//! The file backend's write-ahead journal: `<session>/journal.jsonl`. A batch (events and
//! messages) is durable once its line is appended there, with one write and one `fdatasync`; its
//! message files and `events.jsonl` lines are written later without a sync ("materialized", by
//! the store's `tidy_session`, which the hub runs after each turn off the turn's path, or by a
//! read), and synced at a checkpoint that then
//! empties the journal (at a tidy or flush once the journal holds [`CHECKPOINT_LINES`] batches, is
//! 30 s old or has [`CHECKPOINT_UNSYNCED`] paths to sync, and when the session closes). A turn so
//! pays one append per step instead of a synced file creation per message plus a directory sync,
//! and never a materialization or a checkpoint. The line format and the replay are in
//! `journal_replay.rs`; a checkpoint's last step (sync, then empty) in `checkpoint.rs`.
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
//!   empties the journal; a journal found with records on open is replayed (`journal_replay::replay`) before the
//!   session's files are counted: a message file that does not parse as its message is rewritten,
//!   and `events.jsonl` is cut back to `events_len` and given the journal's events again.
//! - A damaged record loses at most itself: a line whose checksum fails (or, version 1, that does
//!   not parse) is skipped with a warning naming the session and the line, and every whole record
//!   around it replays. A last line without its newline is an append a crash cut short (it never
//!   returned): replayed if whole, else skipped without a warning. A journal with a damaged line
//!   is set aside once replayed, never deleted: renamed `journal.jsonl.damaged-<UTC time>` beside
//!   it. So is a journal that cannot be replayed at all (a newer version, an unreadable file),
//!   unreplayed; the session goes on with a fresh journal either way. Every message id a
//!   set-aside journal still shows, on a line that parses or in the bytes of one that does not
//!   (`journal_ids.rs`), stays taken, in this process and (read again at each reconciliation)
//!   the next.
//! - One store per sessions directory (one hub owns it): another store opened on it would replay,
//!   and remove, a journal this one still writes.
//! - Locks: the journal map's lock is held only to find or drop an entry. An entry's state lock is
//!   held through an append (its write and sync), but not through a materialization's writes,
//!   which hold the entry's materializing lock instead (one at a time; records leave the state
//!   only once their files are written, so an append still finds their ids taken and a read that
//!   materialized first finds them), nor through a checkpoint's sync of what it found
//!   materialized, which holds the entry's checkpoint lock; so a session's next turn appends
//!   while its last turn's tidy writes and syncs files. What the appends journaled in the
//!   meantime is materialized and synced under both locks at the end (a turn's few files), so a
//!   busy session's journal still empties. Order: checkpoint, materializing, state; all before
//!   the deferred, reserved and index locks, never after them.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::checkpoint::{Unsynced, empty_journal, remove_empty_journal};
use super::fsutil::read_into;
use super::journal_replay::parse_journal;
use super::jsonl::Appender;
use super::layout::{EVENTS_FILE, JOURNAL_FILE};
use super::materialize::{EventsFile, MessagesDir, PendingMessage, encode_batch};
use super::{FileBackend, sync_pool::Pass};
use crate::store::records::SessionMessage;
use crate::store::store_error::SessionError;

/// A journal with this many batches is checkpointed at the next flush.
pub(super) const CHECKPOINT_LINES: usize = 512;
/// A journal this old is checkpointed at the next flush: by then the kernel has written most of
/// what was materialized, so the syncs are cheap.
pub(super) const CHECKPOINT_AGE: Duration = Duration::from_secs(30);
/// Messages held unmaterialized before an append materializes them itself: only when tidies
/// fall behind (each turn's tidy materializes what the turn journaled, but none runs while the
/// session's tidy is in a checkpoint on a slow disk), and what bounds the memory they hold then.
pub(super) const PENDING_MAX: usize = 64;
/// At most this many paths are synced under the entry's lock (holding up the session's appends)
/// at the end of a checkpoint: about what one turn materializes.
const LOCKED_SYNC_MAX: usize = 16;
/// Syncs without the entry's lock one checkpoint makes at most before it leaves the rest to the
/// next one.
const CHECKPOINT_ROUNDS: usize = 4;
/// At most this many messages are written under the entry's lock (holding up the session's
/// appends) at the end of [`FileBackend::materialize_all`]: about a tool turn's.
const LOCKED_MATERIALIZE_MAX: usize = 4;
/// Rounds of writing without the entry's lock [`FileBackend::materialize_all`] makes at most
/// before it writes the rest under it (appends that outrun the disk are then held up).
const MATERIALIZE_ROUNDS: usize = 4;
/// Files and directories materialized since the last checkpoint past which the next tidy
/// checkpoints (about 250 text turns, 130 tool turns): a busy session would otherwise gather 30 s
/// of them, held in memory (8 bytes a message file) and synced in one checkpoint. Each checkpoint
/// costs its turns some time on the disk whatever its size, so fewer, larger ones leave fewer
/// turns slower.
const CHECKPOINT_UNSYNCED: usize = 512;

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
    /// The journaled events not yet materialized, as `events.jsonl` lines.
    events: Vec<u8>,
    /// Shared with a materialization writing them, which removes them once their files exist
    /// (until then an append still finds their ids taken here).
    messages: Vec<Arc<PendingMessage>>,
    /// Files and directories materialized since the last checkpoint, to sync at the next one.
    unsynced: Unsynced,
    /// `journal.jsonl`, held open between appends (dropped after a failed one, and before the
    /// file is removed).
    file: Option<Appender>,
    /// The agents' messages directories, held open (see [`FileBackend::messages_dir_for`]).
    agents: HashMap<String, Arc<MessagesDir>>,
}

impl SessionJournal {
    fn is_clean(&self) -> bool {
        self.lines == 0 && self.events.is_empty() && self.messages.is_empty()
    }
}

/// A session's journal state, and the locks that let one materialization and one checkpoint at a
/// time run without it.
pub(super) struct JournalEntry {
    state: Mutex<SessionJournal>,
    /// Held through a materialization, which writes files without `state` (so appends go on):
    /// a read that materializes first finds every record journaled before it in its file. It
    /// holds the session's `events.jsonl` open.
    materializing: Mutex<EventsFile>,
    /// Held by a checkpoint through its sync (without `state`, so appends go on): a second
    /// checkpoint must not empty the journal while the first still syncs what it covers.
    checkpointing: Mutex<()>,
}

fn lock_materializing(entry: &JournalEntry) -> MutexGuard<'_, EventsFile> {
    // Guards only an open file, dropped after a failed append: a poisoned lock is as good as a
    // free one.
    entry
        .materializing
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

pub(super) fn lock_entry(entry: &JournalEntry) -> MutexGuard<'_, SessionJournal> {
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
            materializing: Mutex::new(EventsFile::default()),
            checkpointing: Mutex::new(()),
        });
        journals.insert(session_id.to_owned(), Arc::clone(&entry));
        entry
    }

    fn existing_entry(&self, session_id: &str) -> Option<Arc<JournalEntry>> {
        self.lock_journals().get(session_id).cloned()
    }

    /// The agent's messages directory held open by the session's journal entry (whether it is
    /// still the one at its path is the caller's to check).
    pub(super) fn held_messages_dir(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Option<Arc<MessagesDir>> {
        let entry = self.existing_entry(session_id)?;
        let journal = lock_entry(&entry);
        journal.agents.get(agent_id).cloned()
    }

    /// Journals `events` and `messages` (of `agent_id`, in `messages_dir`) durably; they are
    /// materialized later. `MessageExists` (nothing written) if an id is taken.
    pub(super) fn journal_batch(
        &self,
        session_id: &str,
        session_dir: &Path,
        messages_dir: Option<(&str, &Arc<MessagesDir>)>,
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
        let agent_id = match messages_dir {
            Some((agent_id, dir)) => {
                for (n, message) in messages.iter().enumerate() {
                    let id = message.message_id;
                    let taken = messages[..n].iter().any(|m| m.message_id == id)
                        || journal
                            .messages
                            .iter()
                            .any(|p| p.id == id && p.dir.path() == dir.path())
                        || self.is_reserved(session_id, agent_id, id)
                        || dir.holds(id);
                    if taken {
                        return Err(SessionError::MessageExists {
                            session_id: session_id.to_owned(),
                            agent_id: agent_id.to_owned(),
                            message_id: id,
                        });
                    }
                }
                agent_id
            }
            None => "",
        };
        let messages = if messages_dir.is_some() {
            messages
        } else {
            &[]
        };
        let batch = encode_batch(journal.events_len, agent_id, events, messages)?;
        let file = match &mut journal.file {
            Some(file) => file,
            None => journal
                .file
                .insert(Appender::open(session_dir, JOURNAL_FILE)?),
        };
        if let Err(err) = file.append(&batch.line, self.durability) {
            // Where the file ends is not known now: opened again at the next append.
            journal.file = None;
            return Err(err);
        }
        journal.lines += 1;
        journal.began.get_or_insert_with(Instant::now);
        journal.events.extend_from_slice(&batch.event_lines);
        if let Some((agent_id, dir)) = messages_dir {
            journal
                .messages
                .extend(batch.messages.into_iter().map(|(id, bytes)| {
                    Arc::new(PendingMessage {
                        dir: Arc::clone(dir),
                        id,
                        bytes,
                    })
                }));
            let held = journal.agents.get(agent_id);
            if !held.is_some_and(|held| Arc::ptr_eq(held, dir)) {
                journal.agents.insert(agent_id.to_owned(), Arc::clone(dir));
            }
        }
        let behind = journal.messages.len() > PENDING_MAX;
        drop(journal);
        if behind {
            self.materialize_entry(&entry, session_dir)?;
        }
        Ok(())
    }

    /// Whether the session's journal holds records (journaled, or materialized and not yet
    /// checkpointed); yes, without waiting, while another call holds its entry.
    pub(super) fn journal_pending(&self, session_id: &str) -> bool {
        let Some(entry) = self.existing_entry(session_id) else {
            return false;
        };
        match entry.state.try_lock() {
            Ok(journal) => !journal.is_clean(),
            Err(TryLockError::Poisoned(poisoned)) => !poisoned.into_inner().is_clean(),
            Err(TryLockError::WouldBlock) => true,
        }
    }

    /// Writes the session's journaled records to their files (not synced), so a read finds them.
    pub(super) fn materialize(&self, session_id: &str) -> Result<(), SessionError> {
        let Some(entry) = self.existing_entry(session_id) else {
            return Ok(());
        };
        self.materialize_entry(&entry, &self.root.join(session_id))
    }

    /// [`FileBackend::materialize`] of `entry`: its files are written without its state's lock,
    /// so the session's appends need not wait for them.
    fn materialize_entry(
        &self,
        entry: &JournalEntry,
        session_dir: &Path,
    ) -> Result<(), SessionError> {
        let mut materializing = lock_materializing(entry);
        self.materialize_held(entry, session_dir, &mut materializing)
    }

    /// Every record journaled so far materialized: what the entry's state shows once both
    /// returned guards are dropped covers every line it counts. The files are written without
    /// the state's lock, in rounds while appends add more (on a disk busy with a checkpoint's
    /// syncs one round of 30 files took 20 ms), until about a turn's is left; only that rest is
    /// written under it.
    fn materialize_all<'a>(
        &self,
        entry: &'a JournalEntry,
        session_dir: &Path,
    ) -> Result<(MutexGuard<'a, EventsFile>, MutexGuard<'a, SessionJournal>), SessionError> {
        let mut materializing = lock_materializing(entry);
        let mut rounds = 0;
        loop {
            self.materialize_held(entry, session_dir, &mut materializing)?;
            rounds += 1;
            let mut journal = lock_entry(entry);
            if journal.messages.len() <= LOCKED_MATERIALIZE_MAX || rounds >= MATERIALIZE_ROUNDS {
                materialize_locked(session_dir, &mut journal, &mut materializing)?;
                return Ok((materializing, journal));
            }
        }
    }

    /// [`FileBackend::materialize_entry`] with its `materializing` lock held by the caller.
    fn materialize_held(
        &self,
        entry: &JournalEntry,
        session_dir: &Path,
        events_file: &mut EventsFile,
    ) -> Result<(), SessionError> {
        // Only materializations, one at a time, take records out; appends add them at the end.
        let (events, messages) = {
            let mut journal = lock_entry(entry);
            (
                std::mem::take(&mut journal.events),
                journal.messages.clone(),
            )
        };
        let mut result = Ok(());
        let events_written = events.is_empty()
            || match events_file.append(session_dir, &events) {
                Ok(()) => true,
                Err(err) => {
                    result = Err(err);
                    false
                }
            };
        let mut written = 0;
        if events_written {
            for next in &messages {
                if let Err(err) = next.write() {
                    result = Err(err);
                    break;
                }
                written += 1;
            }
        }
        let mut journal = lock_entry(entry);
        if !events.is_empty() {
            if events_written {
                note_events(session_dir, &mut journal.unsynced);
            } else {
                let later = std::mem::replace(&mut journal.events, events);
                journal.events.extend_from_slice(&later);
            }
        }
        let done: Vec<Arc<PendingMessage>> = journal.messages.drain(..written).collect();
        for next in done {
            journal.unsynced.add_message(&next.dir, next.id);
        }
        result
    }

    /// Materializes, then (when `force`, or the journal is large or old) syncs what was
    /// materialized and empties the journal. Without `force`, a checkpoint already running for
    /// the session leaves this one to materialize only.
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
        let _checkpointing = match entry.checkpointing.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) if !force => {
                return self.materialize_entry(&entry, &session_dir);
            }
            Err(TryLockError::WouldBlock) => entry
                .checkpointing
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        };
        let (mut lines, mut unsynced) = {
            let (_materializing, mut journal) = self.materialize_all(&entry, &session_dir)?;
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
        let mut rounds = 1;
        let (_materializing, mut journal) = loop {
            // Synced without the entry's locks, so the session's appends need not wait for it.
            if let Err(err) = unsynced.sync(&self.syncer, self.durability, Pass::Background) {
                lock_entry(&entry).unsynced.extend(unsynced);
                return Err(err);
            }
            let journal = lock_entry(&entry);
            if journal.inherited {
                return Ok(());
            }
            if journal.lines == lines {
                break (None, journal);
            }
            drop(journal);
            // Batches journaled during the sync: their records are materialized, and synced
            // under the lock when they are few, so the journal empties even while turns go on;
            // when many (a slow disk), in another round without it, and after the last round
            // the next checkpoint goes on from there.
            let (materializing, mut journal) = self.materialize_all(&entry, &session_dir)?;
            if force || journal.unsynced.len() <= LOCKED_SYNC_MAX {
                let rest = std::mem::take(&mut journal.unsynced);
                if let Err(err) = rest.sync(&self.syncer, self.durability, Pass::Waited) {
                    journal.unsynced.extend(rest);
                    return Err(err);
                }
                break (Some(materializing), journal);
            }
            if rounds == CHECKPOINT_ROUNDS {
                return Ok(());
            }
            rounds += 1;
            lines = journal.lines;
            unsynced = std::mem::take(&mut journal.unsynced);
        };
        match &mut journal.file {
            Some(file) if !remove => {
                if let Err(err) = file.truncate() {
                    journal.file = None;
                    return Err(err);
                }
            }
            // Never held past its removal: an append would go to a file no longer there.
            _ => {
                journal.file = None;
                empty_journal(&session_dir, remove, self.durability)?;
            }
        }
        journal.lines = 0;
        journal.began = None;
        journal.events_len = None;
        Ok(())
    }

    /// Checkpoints the session's journal and forgets its entry when nobody else holds it.
    pub(super) fn close_journal(&self, session_id: &str) -> Result<(), SessionError> {
        if self.existing_entry(session_id).is_none() {
            // Nothing appended by this process: at most the empty journal a creation left.
            return remove_empty_journal(&self.root.join(session_id), self.durability);
        }
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

/// Writes the records the entry's state (locked, as is its `materializing`) still holds: a
/// checkpoint's last few.
fn materialize_locked(
    session_dir: &Path,
    journal: &mut SessionJournal,
    events_file: &mut EventsFile,
) -> Result<(), SessionError> {
    if !journal.events.is_empty() {
        events_file.append(session_dir, &journal.events)?;
        journal.events.clear();
        note_events(session_dir, &mut journal.unsynced);
    }
    let pending = std::mem::take(&mut journal.messages);
    let mut rest = pending.into_iter();
    while let Some(next) = rest.next() {
        if let Err(err) = next.write() {
            journal.messages.push(next);
            journal.messages.extend(rest);
            return Err(err);
        }
        journal.unsynced.add_message(&next.dir, next.id);
    }
    Ok(())
}

/// `events.jsonl` and its directory written, to sync at the next checkpoint.
fn note_events(session_dir: &Path, unsynced: &mut Unsynced) {
    if !unsynced.holds(session_dir) {
        unsynced.add_path(session_dir.to_path_buf());
        unsynced.add_path(session_dir.join(EVENTS_FILE));
    }
}

/// Message ids a journal set aside still holds, by session and agent (see
/// `journal_ids::kept_ids`).
pub(super) type ReservedIds = HashMap<String, HashMap<String, BTreeSet<u64>>>;
