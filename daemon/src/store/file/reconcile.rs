//! The file backend's reconciliation after a crash: the stale temporary files a killed write left
//! are removed, and a `session.json` (and listing index entry) that stayed behind the session's
//! message files is brought in line with them. Each session is reconciled once per process, when
//! it is first read, listed or written; the first listing of a process reconciles every session
//! unless the last process stopped cleanly (`clean_stop`), and cleans the directories of
//! creations a crash interrupted.
//!
//! Invariants:
//! - The message files are the truth: a session's message count is the number of canonical message
//!   file names (`NNNNNN.json`) over all its agents' `messages/` directories.
//! - Only names of the store's own temporary pattern are removed: `.<record>.<8 lowercase hex>.tmp`
//!   where `<record>` is a record name that belongs in that directory (the index in the sessions
//!   directory, `session.json` and
//!   `meta.json` in a session directory, `agent.json` in an agent directory, a canonical message
//!   name in `messages/`), and only regular files. Nothing else is ever deleted.
//! - Nothing here follows a symbolic link: agent directories that are links are skipped (the walks
//!   of the store refuse them when used).
//! - A session is reconciled while the store's `reconciled` lock is held (taken before the index
//!   lock, never after), before this process's first write to it; a session this process creates
//!   is marked reconciled before its directory exists. So no write of this process is under way in
//!   a session being reconciled, and every temporary file found is stale (one process, the hub,
//!   writes the store).
//! - A reconciliation that fails is logged and not retried by the same process, so a repair never
//!   makes a session unreadable and never runs beside a write of this process.
//! - A count is corrected as an append writes: index line first, then `session.json`; its
//!   `updated_at` moves to the newest message's creation time if that is later.
//! - The session's journal is replayed before its files are counted, and the journals set aside
//!   beside it (`journal.jsonl.damaged-…`, found by the same directory scan) are read for the
//!   message ids they hold, which stay taken in this process (see `journal`); so are a journal's
//!   when its replay fails and it stays for the next process.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{MutexGuard, PoisonError};

use crate::store::file::fsutil::{existing_dir, replace};
use crate::store::file::index::IndexEntry;
use crate::store::file::{journal_ids, journal_replay};
use crate::store::id::validate_id;
use crate::store::records::SessionInfo;
use crate::store::store_error::{IdKind, SessionError};

use super::{
    AGENT_FILE, AGENTS_DIR, FileBackend, MESSAGES_DIR, META_FILE, SESSION_FILE, SessionFile,
    index_entry, message_file_name, parse_message_file_name, to_json,
};

/// Length of the random part of a temporary file name.
const TEMP_RANDOM_LEN: usize = 8;

/// The record name a temporary file name stands for, if `name` has the store's temporary pattern.
pub(crate) fn temp_record_name(name: &str) -> Option<&str> {
    let inner = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (record, random) = inner.rsplit_once('.')?;
    let random_ok = random.len() == TEMP_RANDOM_LEN
        && random
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (random_ok && !record.is_empty()).then_some(record)
}

/// Removes the stale temporary files of `dir` whose record name satisfies `belongs`; returns how
/// many were removed. A missing directory has none.
pub(crate) fn remove_temps(
    dir: &Path,
    belongs: &dyn Fn(&str) -> bool,
) -> Result<usize, SessionError> {
    remove_temps_noting(dir, belongs, &mut |_| {})
}

/// `remove_temps`, handing every other name of `dir` to `note`.
fn remove_temps_noting(
    dir: &Path,
    belongs: &dyn Fn(&str) -> bool,
    note: &mut dyn FnMut(&fs::DirEntry),
) -> Result<usize, SessionError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(0),
        Err(err) => return Err(SessionError::io(dir, err)),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|err| SessionError::io(dir, err))?;
        let name = entry.file_name();
        let Some(record) = name.to_str().and_then(temp_record_name) else {
            note(&entry);
            continue;
        };
        if !belongs(record) {
            continue;
        }
        if remove_temp(&entry)? {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Removes one temporary file if it is a regular file; whether it was removed.
fn remove_temp(entry: &fs::DirEntry) -> Result<bool, SessionError> {
    let file_type = entry
        .file_type()
        .map_err(|err| SessionError::io(entry.path(), err))?;
    if !file_type.is_file() {
        return Ok(false);
    }
    match fs::remove_file(entry.path()) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(false),
        Err(err) => Err(SessionError::io(entry.path(), err)),
    }
}

/// The real (not symlinked) agent directories of a session, by agent id.
fn agent_dirs(session_dir: &Path) -> Result<Vec<(String, PathBuf)>, SessionError> {
    let Some(agents) = existing_dir(session_dir, &[AGENTS_DIR])? else {
        return Ok(Vec::new());
    };
    let mut dirs = Vec::new();
    for entry in fs::read_dir(&agents).map_err(|err| SessionError::io(&agents, err))? {
        let entry = entry.map_err(|err| SessionError::io(&agents, err))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if validate_id(IdKind::Agent, &name).is_err() {
            continue;
        }
        let file_type = entry
            .file_type()
            .map_err(|err| SessionError::io(entry.path(), err))?;
        if file_type.is_dir() {
            dirs.push((name, entry.path()));
        }
    }
    Ok(dirs)
}

/// The message files of one agent: how many, and the highest id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentMessages {
    pub agent_id: String,
    pub messages_dir: PathBuf,
    pub count: u64,
    pub last_id: Option<u64>,
}

/// One pass over a session's directories: the stale temporary files removed from it, its agents'
/// directories and their `messages/` directories, each agent's message files counted, and the
/// journals set aside beside them.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub removed: usize,
    pub agents: Vec<AgentMessages>,
    pub set_aside: Vec<PathBuf>,
}

impl Scan {
    pub(crate) fn total(&self) -> u64 {
        self.agents.iter().map(|agent| agent.count).sum()
    }
}

/// Scans a session directory (see [`Scan`]).
pub(crate) fn scan_session(session_dir: &Path) -> Result<Scan, SessionError> {
    let mut set_aside = Vec::new();
    let removed = remove_temps_noting(
        session_dir,
        &|record| record == SESSION_FILE || record == META_FILE,
        &mut |entry| {
            if entry
                .file_name()
                .to_str()
                .is_some_and(journal_replay::is_set_aside)
            {
                set_aside.push(entry.path());
            }
        },
    )?;
    let mut scan = Scan {
        removed,
        agents: Vec::new(),
        set_aside,
    };
    for (agent_id, agent_dir) in agent_dirs(session_dir)? {
        scan.removed += remove_temps(&agent_dir, &|record| record == AGENT_FILE)?;
        let Some(messages_dir) = existing_dir(&agent_dir, &[MESSAGES_DIR])? else {
            continue;
        };
        let mut count = 0u64;
        let mut last_id = None;
        for entry in
            fs::read_dir(&messages_dir).map_err(|err| SessionError::io(&messages_dir, err))?
        {
            let entry = entry.map_err(|err| SessionError::io(&messages_dir, err))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(id) = parse_message_file_name(name) {
                count += 1;
                last_id = last_id.max(Some(id));
            } else if temp_record_name(name).is_some_and(|r| parse_message_file_name(r).is_some())
                && remove_temp(&entry)?
            {
                scan.removed += 1;
            }
        }
        scan.agents.push(AgentMessages {
            agent_id,
            messages_dir,
            count,
            last_id,
        });
    }
    Ok(scan)
}

/// What a session's files say before a reconciliation writes anything.
struct Survey {
    /// `session.json`, with the count and time the message files give when they differ.
    file: Option<SessionFile>,
    /// The count `session.json` had, when it differed.
    stale: Option<u64>,
}

/// Runs `work` over `items` on up to four threads (a first listing surveys every session, and small
/// directory reads are syscall-bound).
fn parallel_map<T: Sync, R: Send>(items: &[T], work: &(dyn Fn(&T) -> R + Sync)) -> Vec<R> {
    const PER_THREAD_MIN: usize = 256;
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(4)
        .min(items.len() / PER_THREAD_MIN)
        .max(1);
    if threads == 1 {
        return items.iter().map(work).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|run| scope.spawn(move || run.iter().map(work).collect::<Vec<R>>()))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for (handle, run) in handles.into_iter().zip(items.chunks(chunk)) {
            match handle.join() {
                Ok(results) => out.extend(results),
                // A panicking survey is redone here, where its panic reaches the caller as usual.
                Err(_) => out.extend(run.iter().map(work)),
            }
        }
        out
    })
}

impl FileBackend {
    pub(super) fn lock_reconciled(&self) -> MutexGuard<'_, HashSet<String>> {
        // A panic during a reconciliation leaves the session unmarked: the next access redoes it.
        self.reconciled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Reconciles the session in `dir` with its files unless this process did already. A
    /// reconciliation that fails (a full disk, an unreadable directory) is logged and not retried
    /// in this process: the session is read and written as stored, as before the repair existed.
    pub(super) fn ensure_reconciled(&self, session_id: &str, dir: &Path) {
        let mut reconciled = self.lock_reconciled();
        if reconciled.contains(session_id) {
            return;
        }
        if let Err(err) = self.reconcile(session_id, dir) {
            tracing::warn!(session_id, %err, "cannot reconcile a session with its files");
        }
        reconciled.insert(session_id.to_owned());
    }

    /// Removes the session's stale temporary files and sets its message count to the number of
    /// its message files where `session.json` says otherwise. Returns the session's listing
    /// values as now stored and whether they were rewritten; `None` if the session has no
    /// `session.json`. The caller holds the reconciliation lock.
    fn reconcile(
        &self,
        session_id: &str,
        dir: &Path,
    ) -> Result<Option<(IndexEntry, bool)>, SessionError> {
        let survey = self.survey(session_id, dir)?;
        self.settle(session_id, dir, survey)
    }

    /// Scans the session and reads its `session.json` (no lock needed: no write of this process
    /// touches a session not yet reconciled), with the values its message files give.
    fn survey(&self, session_id: &str, dir: &Path) -> Result<Survey, SessionError> {
        let replayed = match journal_replay::replay(session_id, dir, &self.syncer, self.durability)
        {
            Ok(replayed) => replayed,
            Err(err) => {
                // The journal stays for the next process to replay; until then no id it holds
                // (nor one a journal set aside holds) is given to a new message.
                let set_aside = journal_replay::set_aside_journals(dir);
                self.reserve_ids(session_id, journal_ids::kept_ids(dir, &set_aside, true));
                return Err(err);
            }
        };
        if replayed > 0 {
            tracing::info!(
                session_id,
                replayed,
                "wrote again the records of a session's journal an interrupted write left behind"
            );
        }
        let scan = scan_session(dir)?;
        self.reserve_ids(
            session_id,
            journal_ids::kept_ids(dir, &scan.set_aside, false),
        );
        if scan.removed > 0 {
            tracing::info!(
                session_id,
                removed = scan.removed,
                "removed stale temporary files of a session"
            );
        }
        let Some(mut file) = self.read_session_file(dir)? else {
            return Ok(Survey {
                file: None,
                stale: None,
            });
        };
        let total = scan.total();
        if file.message_count == total {
            return Ok(Survey {
                file: Some(file),
                stale: None,
            });
        }
        for agent in &scan.agents {
            let Some(last) = agent.last_id else { continue };
            let path = agent.messages_dir.join(message_file_name(last));
            match self.read_message_file(&path, last) {
                Ok(Some(message)) => {
                    file.session.updated_at = file.session.updated_at.max(message.created_at);
                }
                Ok(None) => {}
                // The count is still right; the listing order keeps the older time.
                Err(err) => {
                    tracing::warn!(session_id, agent_id = %agent.agent_id, %err, "cannot read the newest message")
                }
            }
        }
        let stale = Some(file.message_count);
        file.message_count = total;
        Ok(Survey {
            file: Some(file),
            stale,
        })
    }

    /// Writes what a survey found stale: the index line first, then `session.json` (the order of
    /// an append).
    fn settle(
        &self,
        session_id: &str,
        dir: &Path,
        survey: Survey,
    ) -> Result<Option<(IndexEntry, bool)>, SessionError> {
        let Some(file) = survey.file else {
            return Ok(None);
        };
        let entry = index_entry(&file);
        let Some(stored) = survey.stale else {
            return Ok(Some((entry, false)));
        };
        let mut index = self.lock_index();
        index.record(&entry)?;
        replace(dir, SESSION_FILE, &to_json(&file)?, self.durability)?;
        drop(index);
        tracing::info!(
            session_id,
            stored,
            files = file.message_count,
            "set the message count to the message files after an interrupted write"
        );
        Ok(Some((entry, true)))
    }

    /// The index's listing (unsorted), with every session this process has not reconciled yet reconciled
    /// first (the first listing of a process reads every session's files once), and the stale
    /// temporary files of creations a crash interrupted (directories without `session.json`)
    /// removed.
    pub(super) fn reconciled_listing(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let unfinished = RefCell::new(Vec::new());
        let read_session = |id: &str| -> Result<Option<IndexEntry>, SessionError> {
            let file = self.read_session_file(&self.root.join(id))?;
            if file.is_none() {
                unfinished.borrow_mut().push(id.to_owned());
            }
            Ok(file.map(|file| index_entry(&file)))
        };
        let mut reconciled = self.lock_reconciled();
        let mut sessions = self.lock_index().list(&read_session)?;
        // A creation of this process under way is marked reconciled before its directory exists.
        for id in unfinished.into_inner() {
            if reconciled.contains(&id) {
                continue;
            }
            match scan_session(&self.root.join(&id)) {
                Ok(scan) => {
                    if scan.removed > 0 {
                        tracing::info!(session_id = %id, removed = scan.removed, "removed stale temporary files of an interrupted session creation");
                    }
                    reconciled.insert(id);
                }
                Err(err) => {
                    tracing::warn!(session_id = %id, %err, "cannot clean an interrupted session creation");
                    reconciled.insert(id);
                }
            }
        }
        // After a clean stop the index is true: each session is still reconciled when first used.
        let pending: Vec<usize> = (0..sessions.len())
            .filter(|&i| !self.stopped_cleanly && !reconciled.contains(&sessions[i].session_id))
            .collect();
        let surveys = parallel_map(&pending, &|&i: &usize| {
            let id = &sessions[i].session_id;
            self.survey(id, &self.root.join(id))
        });
        for (i, survey) in pending.into_iter().zip(surveys) {
            let info = &mut sessions[i];
            let id = info.session_id.clone();
            match survey.and_then(|survey| self.settle(&id, &self.root.join(&id), survey)) {
                Ok(Some((entry, rewritten))) => {
                    let stored = entry.info();
                    // The index may lag a `session.json` written by an older version (which
                    // wrote the index line last).
                    if !rewritten && stored != *info {
                        self.lock_index().record(&entry)?;
                    }
                    *info = stored;
                    reconciled.insert(id);
                }
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(session_id = %id, %err, "cannot reconcile a session with its files");
                    reconciled.insert(id);
                }
            }
        }
        Ok(sessions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_stores_own_temporary_names_match() {
        assert_eq!(
            temp_record_name(".000001.json.0a1b2c3d.tmp"),
            Some("000001.json")
        );
        assert_eq!(
            temp_record_name(".session.json.ffffffff.tmp"),
            Some("session.json")
        );
        for other in [
            "000001.json",
            ".000001.json.0A1B2C3D.tmp",
            ".000001.json.0a1b2c3.tmp",
            ".000001.json.0a1b2c3d4.tmp",
            ".000001.json.0a1b2c3g.tmp",
            "000001.json.0a1b2c3d.tmp",
            "..0a1b2c3d.tmp",
            ".sessions-index.jsonl",
            ".000001.json.0a1b2c3d.tmp~",
        ] {
            assert_eq!(temp_record_name(other), None, "{other}");
        }
    }

    #[test]
    fn stale_temporary_files_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path();
        let messages = session.join("agents/tau/messages");
        fs::create_dir_all(&messages).unwrap();
        let keep = [
            session.join("session.json"),
            session.join("notes.txt"),
            session.join(".other.json.0a1b2c3d.tmp"),
            session.join("agents/tau/agent.json"),
            messages.join("000000.json"),
            messages.join(".meta.json.0a1b2c3d.tmp"),
        ];
        let stale = [
            session.join(".session.json.0a1b2c3d.tmp"),
            session.join(".meta.json.00000000.tmp"),
            session.join("agents/tau/.agent.json.12345678.tmp"),
            messages.join(".000001.json.abcdef01.tmp"),
            messages.join(".000000.json.abcdef02.tmp"),
        ];
        for path in keep.iter().chain(&stale) {
            fs::write(path, b"{}").unwrap();
        }
        fs::create_dir(messages.join(".000002.json.abcdef03.tmp")).unwrap();
        let scan = scan_session(session).unwrap();
        assert_eq!(scan.removed, stale.len());
        for path in &keep {
            assert!(path.exists(), "{} removed", path.display());
        }
        for path in &stale {
            assert!(!path.exists(), "{} kept", path.display());
        }
        assert!(messages.join(".000002.json.abcdef03.tmp").is_dir());
        assert_eq!(scan.agents.len(), 1);
        assert_eq!((scan.agents[0].count, scan.agents[0].last_id), (1, Some(0)));
    }
}
