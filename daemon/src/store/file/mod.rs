//! The `file` session backend: one directory per session under the sessions directory, in the seed's
//! layout, plus one listing index beside the sessions:
//!
//! ```text
//! <sessions_dir>/<id>/session.json                      session record (+ message_count); updated_at orders listings
//! <sessions_dir>/<id>/meta.json                         channel, profile, title, role, context, compaction links
//! <sessions_dir>/<id>/events.jsonl                      one agent event per line, append-only (see `jsonl`)
//! <sessions_dir>/<id>/agents/tau/agent.json             agent record
//! <sessions_dir>/<id>/agents/tau/messages/000000.json   one file per message, in order
//! <sessions_dir>/<id>/journal.jsonl                     records durable, files to follow (see `journal`)
//! <sessions_dir>/<id>/journal.jsonl.damaged-<time>      a journal set aside: damaged, or not replayable
//! <sessions_dir>/.sessions-index.jsonl                  listing index, derived and self-repairing (see `index`)
//! ```
//!
//! [`FileBackend`] is the storage engine (a `StoreBackend`: ids and record versions are checked by
//! `checked_store` before it is called); what callers open is [`FileSessionStore`], the engine
//! under those checks. See ARCHITECTURE.md (store).
//!
//! Invariants: the disk rules of [`fsutil`] (0700/0600, no symlink followed, records visible only
//! complete, fsync with `Durability::Full`; a journaled message's file is written by `materialize`
//! to the same rules); nothing is deleted but the store's own stale temporary files and emptied
//! journals (a damaged one set aside); a message file is created once and only
//! replaced to add its redaction (or, by a journal's replay, when a crash left it torn). The
//! message files, with the journal replayed, are the truth: an append journals the message
//! durably and keeps the session's new `updated_at` (the message's time) and `message_count` in
//! memory, where every read of this store sees them; `flush_session` (after turns, at most once a second) writes the index
//! line, then `session.json`. So a crash leaves `session.json` behind its message files (and the
//! index no further behind than it), by as many messages as the turn had stored. Each session is
//! reconciled once per process before it is read, listed or written (see [`reconcile`]): its
//! journal is replayed (a damaged record losing only itself), its stale temporary files are
//! removed, the message ids its set-aside journals hold are kept taken, and a
//! `message_count` that differs from its message files is set to their number (with `updated_at`
//! moved to the newest message) in the index and `session.json`. One process writes a session at
//! a time (the hub runs one agent per session, and one hub owns the data directory), and this
//! process reconciles a session before its first write to it, so no temporary file removed is in
//! use; within this process index appends and reconciliation's `session.json` updates are
//! serialized by one lock (taken after the reconciliation lock when both are held), and a
//! session's deferred record by its `flushing` mark. A session created whole
//! (`create_complete_session`, a compaction) gets every other file before its `session.json`, so
//! it is seen complete or not at all; its journal is among them, empty (removed at its close).

mod batch;
mod checkpoint;
mod clean_stop;
mod deferred_record;
mod fsutil;
mod index;
mod journal;
mod journal_ids;
mod journal_replay;
mod jsonl;
mod layout;
mod materialize;
mod read;
mod reconcile;
mod sync_pool;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::store::backend::{RecordKey, Rewrite, StoreBackend};
use crate::store::checked_store::CheckedStore;
use crate::store::contract::{Durability, NewSession};
use crate::store::meta::SessionMeta;
use crate::store::records::{Session, SessionAgent, SessionInfo, SessionMessage, check_version};
use crate::store::store_error::SessionError;

use deferred_record::{Deferred, index_entry};
use fsutil::{
    TempFile, create_new, existing_dir, make_dir, make_root, read_json, replace, sync_dir,
};
use index::{INDEX_FILE, ListingIndex, sort_sessions};
use layout::{
    AGENT_FILE, AGENTS_DIR, EVENTS_FILE, JOURNAL_FILE, MESSAGES_DIR, META_FILE, SESSION_FILE,
    SessionFile, check_message_id, message_file_name, parse_message_file_name,
};
use read::{message_ids, read_messages};

fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, SessionError> {
    serde_json::to_vec_pretty(value).map_err(|err| SessionError::corrupt("record", err))
}

/// Sessions as directories of JSON files, under the contract's checks.
pub type FileSessionStore = CheckedStore<FileBackend>;

/// The file storage engine; reached only through [`FileSessionStore`].
pub struct FileBackend {
    root: PathBuf,
    durability: Durability,
    /// The listing index; its lock also serializes read-modify-write of `session.json`.
    index: Mutex<ListingIndex>,
    /// `session.json` of the sessions with messages appended since their last flush, as it will
    /// be written. Never held while another of the store's locks is taken.
    deferred: Mutex<HashMap<String, Deferred>>,
    /// The sessions reconciled with their files by this process (or created by it); its lock is
    /// held through a reconciliation, so one runs once and before any write of this process.
    reconciled: Mutex<HashSet<String>>,
    /// The (session, agent) pairs whose message files a listing of this process found all below
    /// the session's message count. An append keeps that true (the count passes every id
    /// appended), so their pages are read by id, without a listing. At most `PAGED_BY_ID_MAX`
    /// marks (`read.rs`). Never held while another of the store's locks is taken.
    paged_by_id: Mutex<HashSet<(String, String)>>,
    /// The journals of the sessions written by this process (see [`journal`]); an entry leaves
    /// when its session closes with its journal emptied.
    journals: Mutex<HashMap<String, Arc<journal::JournalEntry>>>,
    /// Message ids that journals set aside still hold, found by reconciliations: never given to
    /// a new message. Taken last: no other lock of the store is taken while it is held.
    reserved: Mutex<journal::ReservedIds>,
    /// The last process closed the store cleanly ([`clean_stop`]): the first listing trusts the
    /// index instead of surveying every session.
    stopped_cleanly: bool,
    /// The threads of its passes of syncs, started once.
    syncer: sync_pool::SyncPool,
}

impl CheckedStore<FileBackend> {
    /// Opens (creating if missing, 0700) the sessions directory `root`.
    pub fn open(root: impl Into<PathBuf>, durability: Durability) -> Result<Self, SessionError> {
        FileBackend::open(root.into(), durability).map(CheckedStore::new)
    }

    /// The sessions directory.
    pub fn root(&self) -> &Path {
        &self.backend().root
    }
}

impl FileBackend {
    fn open(root: PathBuf, durability: Durability) -> Result<Self, SessionError> {
        make_root(&root)?;
        let removed = reconcile::remove_temps(&root, &|record| {
            record == INDEX_FILE || record == clean_stop::CLEAN_STOP_FILE
        })?;
        if removed > 0 {
            tracing::info!(root = %root.display(), removed, "removed stale temporary files of the session index");
        }
        let stopped_cleanly = clean_stop::take_clean_stop(&root, durability)?;
        Ok(Self {
            index: Mutex::new(ListingIndex::new(&root, durability)),
            deferred: Mutex::new(HashMap::new()),
            reconciled: Mutex::new(HashSet::new()),
            paged_by_id: Mutex::new(HashSet::new()),
            journals: Mutex::new(HashMap::new()),
            reserved: Mutex::new(HashMap::new()),
            stopped_cleanly,
            syncer: sync_pool::SyncPool::default(),
            root,
            durability,
        })
    }

    fn lock_index(&self) -> MutexGuard<'_, ListingIndex> {
        // A panic elsewhere leaves the index file as consistent as a crash would.
        self.index.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn session_dir(&self, session_id: &str) -> Result<Option<PathBuf>, SessionError> {
        let Some(dir) = existing_dir(&self.root, &[session_id])? else {
            return Ok(None);
        };
        // A directory without session.json is a creation that never finished.
        Ok(fsutil::open_read(&dir.join(SESSION_FILE))?.map(|_| dir))
    }

    /// The directory of an existing session, reconciled.
    fn require_session_dir(&self, session_id: &str) -> Result<PathBuf, SessionError> {
        let dir = self
            .session_dir(session_id)?
            .ok_or_else(|| SessionError::SessionNotFound(session_id.to_owned()))?;
        self.ensure_reconciled(session_id, &dir);
        Ok(dir)
    }

    /// Where the agent `agent_id` of `session_id` is kept, whether it exists or not.
    fn agent_dir(&self, session_id: &str, agent_id: &str) -> PathBuf {
        self.root.join(session_id).join(AGENTS_DIR).join(agent_id)
    }

    /// The messages directory of an existing agent, or the precise `NotFound` error.
    fn require_messages_dir(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Result<PathBuf, SessionError> {
        if let Some(dir) = existing_dir(
            &self.root,
            &[session_id, AGENTS_DIR, agent_id, MESSAGES_DIR],
        )? {
            self.ensure_reconciled(session_id, &self.root.join(session_id));
            return Ok(dir);
        }
        self.require_session_dir(session_id)?;
        Err(SessionError::AgentNotFound {
            session_id: session_id.to_owned(),
            agent_id: agent_id.to_owned(),
        })
    }

    fn read_session_file(&self, dir: &Path) -> Result<Option<SessionFile>, SessionError> {
        let path = dir.join(SESSION_FILE);
        let Some(file) = fsutil::read_json_replaced::<SessionFile>(&path)? else {
            return Ok(None);
        };
        check_version(file.session.v, path.display())?;
        Ok(Some(file))
    }

    /// Creates the directory and `session.json` of a new, empty session and records it in the index.
    fn write_new_session(&self, session: &Session) -> Result<(), SessionError> {
        let id = session.session_id.as_str();
        if make_dir(&self.root, id)? {
            sync_dir(&self.root, self.durability)?;
        }
        let dir = self.root.join(id);
        let file = SessionFile {
            session: session.clone(),
            message_count: 0,
        };
        if !create_new(&dir, SESSION_FILE, &to_json(&file)?, self.durability)? {
            return Err(SessionError::SessionExists(id.to_owned()));
        }
        self.lock_index().record(&index_entry(&file))
    }

    fn read_message_file(
        &self,
        path: &Path,
        message_id: u64,
    ) -> Result<Option<SessionMessage>, SessionError> {
        let Some(record) = read_json::<SessionMessage>(path)? else {
            return Ok(None);
        };
        check_message_id(path, &record, message_id)?;
        Ok(Some(record))
    }
}

impl StoreBackend for FileBackend {
    fn backend_name(&self) -> &'static str {
        "file"
    }

    fn record_location(&self, record: RecordKey<'_>) -> String {
        let path = match record {
            RecordKey::Session { session_id } => self.root.join(session_id).join(SESSION_FILE),
            RecordKey::Agent {
                session_id,
                agent_id,
            } => self.agent_dir(session_id, agent_id).join(AGENT_FILE),
            RecordKey::Message {
                session_id,
                agent_id,
                message_id,
            } => self
                .agent_dir(session_id, agent_id)
                .join(MESSAGES_DIR)
                .join(message_file_name(message_id)),
            RecordKey::Meta { session_id } => self.root.join(session_id).join(META_FILE),
        };
        path.display().to_string()
    }

    fn create_session(&self, session: &Session) -> Result<(), SessionError> {
        let id = session.session_id.as_str();
        // A session created here has nothing to reconcile; marking it first keeps a listing from
        // touching its files while they are written.
        let fresh = self.lock_reconciled().insert(id.to_owned());
        let created = self.write_new_session(session);
        if fresh && matches!(created, Err(SessionError::SessionExists(_))) {
            self.lock_reconciled().remove(id);
        }
        created
    }

    fn read_session(&self, session_id: &str) -> Result<Option<Session>, SessionError> {
        if let Some(file) = self.deferred(session_id) {
            return Ok(Some(file.session));
        }
        let Some(dir) = self.session_dir(session_id)? else {
            return Ok(None);
        };
        self.ensure_reconciled(session_id, &dir);
        Ok(self.read_session_file(&dir)?.map(|file| file.session))
    }

    fn create_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        let dir = self.require_session_dir(session_id)?;
        let agent_id = agent.agent_id.as_str();
        if make_dir(&dir, AGENTS_DIR)? {
            sync_dir(&dir, self.durability)?;
        }
        let agents = dir.join(AGENTS_DIR);
        if make_dir(&agents, agent_id)? {
            sync_dir(&agents, self.durability)?;
        }
        let agent_dir = agents.join(agent_id);
        // The messages directory exists before the agent does, so an agent always has one.
        let messages_created = make_dir(&agent_dir, MESSAGES_DIR)?;
        let created = TempFile::write(&agent_dir, AGENT_FILE, &to_json(agent)?, self.durability)?
            .name_new(&agent_dir.join(AGENT_FILE))?;
        if created || messages_created {
            sync_dir(&agent_dir, self.durability)?;
        }
        if created {
            Ok(())
        } else {
            Err(SessionError::AgentExists {
                session_id: session_id.to_owned(),
                agent_id: agent_id.to_owned(),
            })
        }
    }

    fn read_agent(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Result<Option<SessionAgent>, SessionError> {
        let Some(dir) = existing_dir(&self.root, &[session_id, AGENTS_DIR, agent_id])? else {
            return Ok(None);
        };
        read_json::<SessionAgent>(&dir.join(AGENT_FILE))
    }

    fn update_agent(
        &self,
        session_id: &str,
        agent_id: &str,
        rewrite: Rewrite<'_, SessionAgent>,
    ) -> Result<(), SessionError> {
        let Some(existing) = self.read_agent(session_id, agent_id)? else {
            self.require_session_dir(session_id)?;
            return Err(SessionError::AgentNotFound {
                session_id: session_id.to_owned(),
                agent_id: agent_id.to_owned(),
            });
        };
        let session_dir = self.require_session_dir(session_id)?;
        let record = rewrite(existing)?;
        let dir = session_dir.join(AGENTS_DIR).join(agent_id);
        replace(&dir, AGENT_FILE, &to_json(&record)?, self.durability)
    }

    fn create_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        self.write_batch(session_id, agent_id, &[], std::slice::from_ref(message))
    }

    /// Materializes the session's journal (and checkpoints it when due), then writes its record.
    fn flush_session(&self, session_id: &str) -> Result<(), SessionError> {
        self.checkpoint(session_id, false)?;
        self.flush_deferred(session_id)
    }

    /// Materializes the session's journal, and checkpoints it when due.
    fn tidy_session(&self, session_id: &str) -> Result<(), SessionError> {
        self.checkpoint(session_id, false)
    }

    /// While the session's journal holds records (to materialize, or to checkpoint).
    fn tidy_pending(&self, session_id: &str) -> bool {
        self.journal_pending(session_id)
    }

    /// A flush that also empties the session's journal.
    fn close_session(&self, session_id: &str) -> Result<(), SessionError> {
        self.close_journal(session_id)?;
        self.flush_deferred(session_id)
    }

    fn read_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
    ) -> Result<Option<SessionMessage>, SessionError> {
        self.materialize(session_id)?;
        let Some(dir) = existing_dir(
            &self.root,
            &[session_id, AGENTS_DIR, agent_id, MESSAGES_DIR],
        )?
        else {
            return Ok(None);
        };
        // A journal a crash left is replayed before its files are read.
        self.ensure_reconciled(session_id, &self.root.join(session_id));
        self.read_message_file(&dir.join(message_file_name(message_id)), message_id)
    }

    fn update_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
        rewrite: Rewrite<'_, SessionMessage>,
    ) -> Result<(), SessionError> {
        let messages = self.require_messages_dir(session_id, agent_id)?;
        self.materialize(session_id)?;
        let name = message_file_name(message_id);
        let Some(stored) = self.read_message_file(&messages.join(&name), message_id)? else {
            return Err(SessionError::MessageNotFound {
                session_id: session_id.to_owned(),
                agent_id: agent_id.to_owned(),
                message_id,
            });
        };
        let record = rewrite(stored)?;
        replace(&messages, &name, &to_json(&record)?, self.durability)
    }

    fn list_messages(
        &self,
        session_id: &str,
        agent_id: &str,
        limit: Option<usize>,
        offset: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        let dir = self.require_messages_dir(session_id, agent_id)?;
        self.materialize(session_id)?;
        let selected: Vec<u64> = message_ids(&dir, None)?
            .into_iter()
            .skip(offset)
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        read_messages(&dir, &selected)
    }

    fn list_messages_before(
        &self,
        session_id: &str,
        agent_id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        let dir = self.require_messages_dir(session_id, agent_id)?;
        self.materialize(session_id)?;
        self.read_page(&dir, session_id, agent_id, before, limit)
    }

    /// Past every id a journal set aside still holds (see `journal`).
    fn message_id_floor(&self, session_id: &str, agent_id: &str) -> Result<u64, SessionError> {
        // Reconciled first: that is when the journals set aside are read.
        if let Some(dir) = self.session_dir(session_id)? {
            self.ensure_reconciled(session_id, &dir);
        }
        Ok(self.reserved_floor(session_id, agent_id))
    }

    /// Every session, reconciled with its files first where this process has not yet (see
    /// [`reconcile`]).
    fn list_sessions(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let mut sessions = self.listing_with_deferred()?;
        sort_sessions(&mut sessions);
        Ok(sessions)
    }

    /// `session.json`'s record and counter, reconciled with the message files first.
    fn session_info(&self, session_id: &str) -> Result<Option<SessionInfo>, SessionError> {
        if let Some(file) = self.deferred(session_id) {
            return Ok(Some(index_entry(&file).info()));
        }
        let Some(dir) = self.session_dir(session_id)? else {
            return Ok(None);
        };
        self.ensure_reconciled(session_id, &dir);
        Ok(self
            .read_session_file(&dir)?
            .map(|file| index_entry(&file).info()))
    }

    fn append_event(&self, session_id: &str, record: &Value) -> Result<(), SessionError> {
        // Through the journal, as every event of a session (see `journal`).
        self.write_batch(session_id, "", std::slice::from_ref(record), &[])
    }

    fn append_batch(
        &self,
        session_id: &str,
        agent_id: &str,
        events: &[Value],
        messages: &[SessionMessage],
    ) -> Result<(), SessionError> {
        self.write_batch(session_id, agent_id, events, messages)
    }

    fn read_events(&self, session_id: &str) -> Result<Vec<Value>, SessionError> {
        let dir = self.require_session_dir(session_id)?;
        self.materialize(session_id)?;
        let events: Vec<Map<String, Value>> = jsonl::read_lines(&dir.join(EVENTS_FILE))?;
        Ok(events.into_iter().map(Value::Object).collect())
    }

    fn write_meta(&self, session_id: &str, meta: &SessionMeta) -> Result<(), SessionError> {
        let dir = self.require_session_dir(session_id)?;
        replace(&dir, META_FILE, &to_json(meta)?, self.durability)
    }

    /// Writes the agent, its messages and `meta.json` into a new session directory first and
    /// `session.json` last: until then the directory is an unfinished creation nobody sees.
    fn create_complete_session(&self, new: &NewSession) -> Result<(), SessionError> {
        let id = new.session.session_id.as_str();
        let agent_id = new.agent.agent_id.as_str();
        // Only a directory made here: a leftover one may hold another creation's files. Marked
        // reconciled first, so a listing never touches the files being written.
        let fresh = self.lock_reconciled().insert(id.to_owned());
        if !make_dir(&self.root, id)? {
            if fresh {
                self.lock_reconciled().remove(id);
            }
            return Err(SessionError::SessionExists(id.to_owned()));
        }
        // Everything is written unsynced, then synced in one pass (a file system commits such a
        // pass in about one flush, not one per file); the name `session.json`, which makes the
        // session whole, is given only once all of it is durable.
        let dir = self.root.join(id);
        make_dir(&dir, AGENTS_DIR)?;
        let agents = dir.join(AGENTS_DIR);
        make_dir(&agents, agent_id)?;
        let agent_dir = agents.join(agent_id);
        make_dir(&agent_dir, MESSAGES_DIR)?;
        let messages = agent_dir.join(MESSAGES_DIR);
        let mut to_sync = Vec::with_capacity(new.messages.len() + 7);
        for message in &new.messages {
            let name = message_file_name(message.message_id);
            let path = messages.join(&name);
            if !TempFile::write(&messages, &name, &to_json(message)?, Durability::NoSync)?
                .name_new(&path)?
            {
                return Err(SessionError::MessageExists {
                    session_id: id.to_owned(),
                    agent_id: agent_id.to_owned(),
                    message_id: message.message_id,
                });
            }
            to_sync.push(path);
        }
        if !create_new(
            &agent_dir,
            AGENT_FILE,
            &to_json(&new.agent)?,
            Durability::NoSync,
        )? {
            return Err(SessionError::AgentExists {
                session_id: id.to_owned(),
                agent_id: agent_id.to_owned(),
            });
        }
        if !create_new(&dir, META_FILE, &to_json(&new.meta)?, Durability::NoSync)? {
            return Err(SessionError::SessionExists(id.to_owned()));
        }
        // The journal too, empty: the session's first append then needs no directory sync of
        // its own (a new session's first turn follows at once, as `tau ask`'s does).
        if !create_new(&dir, JOURNAL_FILE, b"", Durability::NoSync)? {
            return Err(SessionError::SessionExists(id.to_owned()));
        }
        // `session.json`'s content is synced in the same pass, under a temporary name; only its
        // name, given after the pass, needs a sync of its own (the directory's).
        let file = SessionFile {
            session: new.session.clone(),
            message_count: u64::try_from(new.messages.len()).unwrap_or(u64::MAX),
        };
        let record = TempFile::write(&dir, SESSION_FILE, &to_json(&file)?, Durability::NoSync)?;
        // The messages directory holds names to sync only when messages were written in it; its
        // own name is the agent directory's, synced either way. Without it a session made empty
        // (`tau ask`'s) is eight syncs, one per lane, so the caller's lane waits for only one.
        if !new.messages.is_empty() {
            to_sync.push(messages);
        }
        to_sync.extend([
            agent_dir.join(AGENT_FILE),
            dir.join(META_FILE),
            dir.join(JOURNAL_FILE),
            record.path().to_path_buf(),
            agent_dir,
            agents,
            dir.clone(),
            self.root.clone(),
        ]);
        self.syncer.sync_paths(to_sync.iter(), self.durability)?;
        if !record.name_new(&dir.join(SESSION_FILE))? {
            return Err(SessionError::SessionExists(id.to_owned()));
        }
        sync_dir(&dir, self.durability)?;
        // Unsynced, as a turn's: every listing finds a session directory the index lacks.
        self.record_created(file)
    }

    fn read_meta(&self, session_id: &str) -> Result<Option<SessionMeta>, SessionError> {
        let dir = self.require_session_dir(session_id)?;
        read_json::<SessionMeta>(&dir.join(META_FILE))
    }
}
