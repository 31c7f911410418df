//! The `sqlite` session backend: every session in one database (`<TAU_DATA_DIR>/sessions.db`), same
//! contract as the file backend. [`SqliteBackend`] is the storage engine (a `StoreBackend`: ids
//! and record versions are checked by `checked_store` before it is called); what callers open is
//! [`SqliteSessionStore`], the engine under those checks. `group_commit` runs the writes on the
//! one write connection, `read_pool` the reads on their own connections, `wal_checkpoint` the WAL's
//! checkpoints at a tidy, off the commit path; `row_writes` and
//! `row_reads` are the statements, `rows` their shared helpers, `private_file` keeps the database
//! file 0600, `schema` migrates it. See ARCHITECTURE.md (store).
//!
//! Invariants:
//! - WAL journal with `synchronous=FULL`: in WAL mode FULL fsyncs the log on every commit, so a
//!   message is on disk when `create_message` returns. (NORMAL would skip that fsync and could
//!   lose the last commits on a power cut; a stored message must survive one.) Writes of different
//!   threads that arrive together share one commit (group commit), so ten busy sessions cost about
//!   one fsync per round, not ten; each write still returns only once its own commit is durable.
//!   `Durability::NoSync` sets `synchronous=OFF` for tests and benchmark set-up.
//! - Each write is one savepoint inside an IMMEDIATE transaction, so it reads what it writes over
//!   unchanged, fails alone, and a crash leaves every record whole or absent.
//! - Reads never use the write connection: they see only committed writes and never wait for a
//!   commit. Methods are synchronous and hold no lock across an await (there is none).
//! - The database file is 0600 from the moment it exists (see `private_file`): created empty,
//!   which sqlite takes for a new database, before sqlite opens it. Its directory is created 0700
//!   if missing, and a database path that is a symbolic link is refused.
//! - Nothing is deleted; messages are inserted once, and only their `redact_message` is updated.

mod group_commit;
mod private_file;
mod read_pool;
mod row_reads;
mod row_writes;
mod rows;
mod schema;
mod wal_checkpoint;

use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;
use serde_json::Value;

use crate::store::backend::{RecordKey, Rewrite, StoreBackend};
use crate::store::checked_store::CheckedStore;
use crate::store::contract::{Durability, NewSession};
use crate::store::meta::SessionMeta;
use crate::store::records::{Session, SessionAgent, SessionInfo, SessionMessage};
use crate::store::store_error::SessionError;

use group_commit::GroupCommit;
use private_file::create_private_file;
use read_pool::ReadPool;
use rows::{row_location, to_i64, to_json};
use wal_checkpoint::{CHECKPOINT_COMMITS, WAL_BACKSTOP_PAGES, WalCheckpoint};

/// How long a write waits for another process holding the database lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Prepared statements each connection keeps: more than the store uses, so a turn's writes and
/// reads never parse their SQL again.
const STATEMENT_CACHE: usize = 64;

/// Sessions in one sqlite database, under the contract's checks.
pub type SqliteSessionStore = CheckedStore<SqliteBackend>;

/// The sqlite storage engine; reached only through [`SqliteSessionStore`].
pub struct SqliteBackend {
    path: PathBuf,
    // Dropped before the writer, so the write connection is the last to close (and checkpoint).
    readers: ReadPool,
    checkpoint: WalCheckpoint,
    writer: GroupCommit,
}

impl CheckedStore<SqliteBackend> {
    /// Opens (creating and migrating if needed) the database at `path`.
    pub fn open(path: impl Into<PathBuf>, durability: Durability) -> Result<Self, SessionError> {
        SqliteBackend::open(path.into(), durability).map(CheckedStore::new)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.backend().path
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, SessionError> {
        self.backend()
            .readers
            .read(|conn| schema::current_version(conn))
    }
}

impl SqliteBackend {
    fn open(path: PathBuf, durability: Durability) -> Result<Self, SessionError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(parent)
                .map_err(|err| SessionError::io(parent, err))?;
        }
        create_private_file(&path)?;
        let mut conn = Connection::open(&path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(SessionError::corrupt(
                path.display(),
                format!("could not switch to WAL (journal_mode is {mode})"),
            ));
        }
        let synchronous = match durability {
            Durability::Full => "FULL",
            Durability::NoSync => "OFF",
        };
        conn.pragma_update(None, "synchronous", synchronous)?;
        // Checkpoints run at tidies, off the commit path (see `wal_checkpoint`).
        conn.pragma_update(None, "wal_autocheckpoint", WAL_BACKSTOP_PAGES)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        schema::migrate(&mut conn, &path)?;
        let readers = ReadPool::new(&path, BUSY_TIMEOUT, STATEMENT_CACHE);
        let checkpoint = WalCheckpoint::new(path.clone(), synchronous, BUSY_TIMEOUT);
        Ok(Self {
            path,
            readers,
            checkpoint,
            writer: GroupCommit::new(conn),
        })
    }
}

impl StoreBackend for SqliteBackend {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    fn record_location(&self, record: RecordKey<'_>) -> String {
        row_location(record)
    }

    fn create_session(&self, session: &Session) -> Result<(), SessionError> {
        self.writer
            .write(|conn| row_writes::create_session(conn, session))
    }

    fn read_session(&self, session_id: &str) -> Result<Option<Session>, SessionError> {
        self.readers
            .read(|conn| row_reads::read_session(conn, session_id))
    }

    fn create_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        self.writer
            .write(|conn| row_writes::create_agent(conn, session_id, agent))
    }

    fn read_agent(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Result<Option<SessionAgent>, SessionError> {
        self.readers
            .read(|conn| row_reads::read_agent(conn, session_id, agent_id))
    }

    fn update_agent(
        &self,
        session_id: &str,
        agent_id: &str,
        rewrite: Rewrite<'_, SessionAgent>,
    ) -> Result<(), SessionError> {
        self.writer
            .write(|conn| row_writes::update_agent(conn, session_id, agent_id, rewrite))
    }

    fn create_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        // Serialized before the write connection is taken: the batch waits for no JSON.
        let text = to_json(message)?;
        let message_id = to_i64(message.message_id)?;
        self.writer.write(|conn| {
            row_writes::create_messages(conn, session_id, agent_id, &[(message_id, text)])
        })
    }

    fn read_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
    ) -> Result<Option<SessionMessage>, SessionError> {
        self.readers
            .read(|conn| row_reads::read_message(conn, session_id, agent_id, message_id))
    }

    fn update_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
        rewrite: Rewrite<'_, SessionMessage>,
    ) -> Result<(), SessionError> {
        self.writer.write(|conn| {
            row_writes::update_message(conn, session_id, agent_id, message_id, rewrite)
        })
    }

    fn list_messages(
        &self,
        session_id: &str,
        agent_id: &str,
        limit: Option<usize>,
        offset: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        self.readers
            .read(|conn| row_reads::list_messages(conn, session_id, agent_id, limit, offset))
    }

    fn list_messages_before(
        &self,
        session_id: &str,
        agent_id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        self.readers
            .read(|conn| row_reads::list_messages_before(conn, session_id, agent_id, before, limit))
    }

    fn session_info(&self, session_id: &str) -> Result<Option<SessionInfo>, SessionError> {
        self.readers
            .read(|conn| row_reads::session_info(conn, session_id))
    }

    fn list_sessions(&self) -> Result<Vec<SessionInfo>, SessionError> {
        self.readers.read(|conn| row_reads::list_sessions(conn))
    }

    /// A WAL checkpoint once [`CHECKPOINT_COMMITS`] commits gathered (the whole database's,
    /// whichever session's tidy finds it due).
    fn tidy_session(&self, _session_id: &str) -> Result<(), SessionError> {
        let commits = self.writer.uncheckpointed();
        if commits < CHECKPOINT_COMMITS {
            return Ok(());
        }
        if let Some(done) = self.checkpoint.run()? {
            tracing::debug!(
                commits,
                log = done.log,
                copied = done.copied,
                "checkpointed the session database's WAL"
            );
            if done.copied >= done.log {
                self.writer.checkpointed(commits);
            }
        }
        Ok(())
    }

    fn tidy_pending(&self, _session_id: &str) -> bool {
        self.writer.uncheckpointed() >= CHECKPOINT_COMMITS
    }

    fn append_event(&self, session_id: &str, record: &Value) -> Result<(), SessionError> {
        let events = [to_json(record)?];
        self.writer
            .write(|conn| row_writes::append_events(conn, session_id, &events))
    }

    /// One savepoint, so one commit: the events and messages are stored together or not at all.
    fn append_batch(
        &self,
        session_id: &str,
        agent_id: &str,
        events: &[Value],
        messages: &[SessionMessage],
    ) -> Result<(), SessionError> {
        // Serialized before the write connection is taken, as in `create_message`.
        let events = events.iter().map(to_json).collect::<Result<Vec<_>, _>>()?;
        let messages = messages
            .iter()
            .map(|m| Ok((to_i64(m.message_id)?, to_json(m)?)))
            .collect::<Result<Vec<_>, SessionError>>()?;
        self.writer.write(|conn| {
            row_writes::append_events(conn, session_id, &events)?;
            row_writes::create_messages(conn, session_id, agent_id, &messages)
        })
    }

    fn read_events(&self, session_id: &str) -> Result<Vec<Value>, SessionError> {
        self.readers
            .read(|conn| row_reads::read_events(conn, session_id))
    }

    fn write_meta(&self, session_id: &str, meta: &SessionMeta) -> Result<(), SessionError> {
        self.writer
            .write(|conn| row_writes::write_meta(conn, session_id, meta))
    }

    fn read_meta(&self, session_id: &str) -> Result<Option<SessionMeta>, SessionError> {
        self.readers
            .read(|conn| row_reads::read_meta(conn, session_id))
    }

    /// One savepoint: the session appears with its agent, messages and metadata, or not at all.
    fn create_complete_session(&self, new: &NewSession) -> Result<(), SessionError> {
        self.writer
            .write(|conn| row_writes::create_complete_session(conn, new))
    }
}

#[cfg(test)]
mod tests;
