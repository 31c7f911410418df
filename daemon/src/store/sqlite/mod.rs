//! The `sqlite` session backend: every session in one database (`<TAU_DATA_DIR>/sessions.db`), same
//! contract as the file backend. [`SqliteBackend`] is the storage engine (a `StoreBackend`: ids
//! and record versions are checked by `checked_store` before it is called); what callers open is
//! [`SqliteSessionStore`], the engine under those checks. `rows` reads and writes rows,
//! `private_file` keeps the database file 0600, `schema` migrates it. See ARCHITECTURE.md (store).
//!
//! Invariants:
//! - WAL journal with `synchronous=FULL`: in WAL mode FULL fsyncs the log on every commit, so a
//!   message is on disk when `create_message` returns, for about one fsync. (NORMAL would skip that
//!   fsync and could lose the last commits on a power cut; a stored message must survive one.)
//!   `Durability::NoSync` sets `synchronous=OFF` for tests and benchmark set-up.
//! - One connection behind a std `Mutex`; methods are synchronous and never hold the lock across an
//!   await (there is none). Each write is one transaction (IMMEDIATE when it reads before writing),
//!   so a crash leaves every record whole or absent.
//! - The database file is 0600 from the moment it exists (see `private_file`): created empty,
//!   which sqlite takes for a new database, before sqlite opens it. Its directory is created 0700
//!   if missing, and a database path that is a symbolic link is refused.
//! - Nothing is deleted; messages are inserted once, and only their `redact_message` is updated.

mod private_file;
mod rows;
mod schema;

use std::fs::DirBuilder;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use crate::store::backend::{RecordKey, Rewrite, StoreBackend};
use crate::store::checked_store::CheckedStore;
use crate::store::contract::{Durability, NewSession};
use crate::store::meta::SessionMeta;
use crate::store::records::{Session, SessionAgent, SessionInfo, SessionMessage, now_utc, rfc3339};
use crate::store::store_error::SessionError;

use private_file::create_private_file;
use rows::{
    from_json, listing_row, read_message_row, require_agent, require_session, row_location, to_i64,
    to_json,
};

/// How long a write waits for another process holding the database lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Sessions in one sqlite database, under the contract's checks.
pub type SqliteSessionStore = CheckedStore<SqliteBackend>;

/// The sqlite storage engine; reached only through [`SqliteSessionStore`].
pub struct SqliteBackend {
    path: PathBuf,
    conn: Mutex<Connection>,
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
        schema::current_version(&self.backend().lock())
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
        conn.pragma_update(None, "foreign_keys", true)?;
        schema::migrate(&mut conn, &path)?;
        Ok(Self {
            path,
            conn: Mutex::new(conn),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic in another thread rolled its transaction back; the connection is still sound.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
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
        let (created_at, updated_at, updated_us) = schema::session_times(session);
        let conn = self.lock();
        let inserted = conn.execute(
            "INSERT INTO sessions (session_id, created_at, updated_at, record, updated_us, message_count)
             VALUES (?1, ?2, ?3, ?4, ?5, 0) ON CONFLICT (session_id) DO NOTHING",
            params![session.session_id, created_at, updated_at, to_json(session)?, updated_us],
        )?;
        if inserted == 0 {
            return Err(SessionError::SessionExists(session.session_id.clone()));
        }
        Ok(())
    }

    fn read_session(&self, session_id: &str) -> Result<Option<Session>, SessionError> {
        let conn = self.lock();
        let row: Option<(String, String)> = conn
            .query_row(
                "SELECT record, updated_at FROM sessions WHERE session_id = ?1",
                [session_id],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let Some((text, updated_at)) = row else {
            return Ok(None);
        };
        let location = row_location(RecordKey::Session { session_id });
        let mut session: Session = from_json(&text, &location)?;
        session.updated_at = updated_at
            .parse()
            .map_err(|err| SessionError::corrupt(&location, err))?;
        Ok(Some(session))
    }

    fn create_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        require_session(&tx, session_id)?;
        let inserted = tx.execute(
            "INSERT INTO agents (session_id, agent_id, record) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id, agent_id) DO NOTHING",
            params![session_id, agent.agent_id, to_json(agent)?],
        )?;
        if inserted == 0 {
            return Err(SessionError::AgentExists {
                session_id: session_id.to_owned(),
                agent_id: agent.agent_id.clone(),
            });
        }
        tx.commit()?;
        Ok(())
    }

    fn read_agent(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Result<Option<SessionAgent>, SessionError> {
        let conn = self.lock();
        let text: Option<String> = conn
            .query_row(
                "SELECT record FROM agents WHERE session_id = ?1 AND agent_id = ?2",
                [session_id, agent_id],
                |row| row.get(0),
            )
            .optional()?;
        text.map(|text| {
            let location = row_location(RecordKey::Agent {
                session_id,
                agent_id,
            });
            from_json(&text, location)
        })
        .transpose()
    }

    fn update_agent(
        &self,
        session_id: &str,
        agent_id: &str,
        rewrite: Rewrite<'_, SessionAgent>,
    ) -> Result<(), SessionError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existing: Option<String> = tx
            .query_row(
                "SELECT record FROM agents WHERE session_id = ?1 AND agent_id = ?2",
                [session_id, agent_id],
                |row| row.get(0),
            )
            .optional()?;
        let Some(existing) = existing else {
            require_agent(&tx, session_id, agent_id)?;
            return Err(SessionError::AgentNotFound {
                session_id: session_id.to_owned(),
                agent_id: agent_id.to_owned(),
            });
        };
        let location = row_location(RecordKey::Agent {
            session_id,
            agent_id,
        });
        let record = rewrite(from_json(&existing, location)?)?;
        tx.execute(
            "UPDATE agents SET record = ?3 WHERE session_id = ?1 AND agent_id = ?2",
            params![session_id, agent_id, to_json(&record)?],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn create_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        let text = to_json(message)?;
        let message_id = to_i64(message.message_id)?;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        require_agent(&tx, session_id, agent_id)?;
        let inserted = tx.execute(
            "INSERT INTO messages (session_id, agent_id, message_id, record) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (session_id, agent_id, message_id) DO NOTHING",
            params![session_id, agent_id, message_id, text],
        )?;
        if inserted == 0 {
            return Err(SessionError::MessageExists {
                session_id: session_id.to_owned(),
                agent_id: agent_id.to_owned(),
                message_id: message.message_id,
            });
        }
        let previous_us: i64 = tx.query_row(
            "SELECT updated_us FROM sessions WHERE session_id = ?1",
            [session_id],
            |row| row.get(0),
        )?;
        let now = now_utc();
        let now_us = now.as_microsecond();
        // updated_at never goes backwards, even if the clock does.
        let (updated_at, updated_us) = if now_us >= previous_us {
            (rfc3339::format(&now), now_us)
        } else {
            let kept = jiff::Timestamp::from_microsecond(previous_us).map_err(|err| {
                SessionError::corrupt(row_location(RecordKey::Session { session_id }), err)
            })?;
            (rfc3339::format(&kept), previous_us)
        };
        tx.execute(
            "UPDATE sessions SET updated_at = ?2, updated_us = ?3, message_count = message_count + 1
             WHERE session_id = ?1",
            params![session_id, updated_at, updated_us],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn read_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
    ) -> Result<Option<SessionMessage>, SessionError> {
        let conn = self.lock();
        read_message_row(&conn, session_id, agent_id, message_id)
    }

    fn update_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
        rewrite: Rewrite<'_, SessionMessage>,
    ) -> Result<(), SessionError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        require_agent(&tx, session_id, agent_id)?;
        let Some(stored) = read_message_row(&tx, session_id, agent_id, message_id)? else {
            return Err(SessionError::MessageNotFound {
                session_id: session_id.to_owned(),
                agent_id: agent_id.to_owned(),
                message_id,
            });
        };
        let record = rewrite(stored)?;
        tx.execute(
            "UPDATE messages SET record = ?4 WHERE session_id = ?1 AND agent_id = ?2 AND message_id = ?3",
            params![session_id, agent_id, to_i64(message_id)?, to_json(&record)?],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn list_messages(
        &self,
        session_id: &str,
        agent_id: &str,
        limit: Option<usize>,
        offset: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let mut conn = self.lock();
        // One read transaction: the existence check and the rows see the same snapshot.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        require_agent(&tx, session_id, agent_id)?;
        let mut stmt = tx.prepare_cached(
            "SELECT message_id, record FROM messages WHERE session_id = ?1 AND agent_id = ?2
             ORDER BY message_id LIMIT ?3 OFFSET ?4",
        )?;
        let rows = stmt.query_map(params![session_id, agent_id, limit, offset], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })?;
        let mut messages = Vec::new();
        for row in rows {
            let (id, text) = row?;
            messages.push(from_json(
                &text,
                format!("message {id} of session {session_id}"),
            )?);
        }
        Ok(messages)
    }

    /// The page walked backwards on the primary key, then put in id order.
    fn list_messages_before(
        &self,
        session_id: &str,
        agent_id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        let before = before.map_or(i64::MAX, |id| i64::try_from(id).unwrap_or(i64::MAX));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        require_agent(&tx, session_id, agent_id)?;
        let mut stmt = tx.prepare_cached(
            "SELECT message_id, record FROM messages
             WHERE session_id = ?1 AND agent_id = ?2 AND message_id < ?3
             ORDER BY message_id DESC LIMIT ?4",
        )?;
        let rows = stmt.query_map(params![session_id, agent_id, before, limit], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })?;
        let mut messages = Vec::new();
        for row in rows {
            let (id, text) = row?;
            messages.push(from_json::<SessionMessage>(
                &text,
                format!("message {id} of session {session_id}"),
            )?);
        }
        messages.reverse();
        Ok(messages)
    }

    fn session_info(&self, session_id: &str) -> Result<Option<SessionInfo>, SessionError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT created_at, updated_at, message_count FROM sessions WHERE session_id = ?1",
        )?;
        let row = stmt
            .query_row([session_id], |row| {
                Ok((
                    row.get::<_, String>(0),
                    row.get::<_, String>(1),
                    row.get::<_, i64>(2),
                ))
            })
            .optional()?;
        row.map(|(created_at, updated_at, count)| {
            listing_row(session_id, created_at, updated_at, count)
        })
        .transpose()
    }

    /// A row whose values cannot be read is skipped with a warning, as the file backend skips an
    /// unreadable `session.json`: one damaged session never hides the others (nor stops the
    /// hub's start-up scan).
    fn list_sessions(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT session_id, created_at, updated_at, message_count FROM sessions
             ORDER BY updated_us DESC, session_id DESC",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1),
                row.get::<_, String>(2),
                row.get::<_, i64>(3),
            ))
        })?;
        let mut sessions = Vec::new();
        for row in rows {
            let (session_id, created_at, updated_at, count) = row?;
            match listing_row(&session_id, created_at, updated_at, count) {
                Ok(info) => sessions.push(info),
                Err(err) => {
                    tracing::warn!(%session_id, %err, "skipping an unreadable session");
                }
            }
        }
        Ok(sessions)
    }

    fn append_event(&self, session_id: &str, record: &Value) -> Result<(), SessionError> {
        let text = to_json(record)?;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        require_session(&tx, session_id)?;
        tx.execute(
            "INSERT INTO events (session_id, seq, event)
             SELECT ?1, COALESCE(MAX(seq), -1) + 1, ?2 FROM events WHERE session_id = ?1",
            params![session_id, text],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn read_events(&self, session_id: &str) -> Result<Vec<Value>, SessionError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        require_session(&tx, session_id)?;
        let mut stmt =
            tx.prepare_cached("SELECT seq, event FROM events WHERE session_id = ?1 ORDER BY seq")?;
        let rows = stmt.query_map([session_id], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })?;
        let mut events = Vec::new();
        for row in rows {
            let (seq, text) = row?;
            events.push(from_json(
                &text,
                format!("event {seq} of session {session_id}"),
            )?);
        }
        Ok(events)
    }

    fn write_meta(&self, session_id: &str, meta: &SessionMeta) -> Result<(), SessionError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        require_session(&tx, session_id)?;
        tx.execute(
            "INSERT INTO meta (session_id, record) VALUES (?1, ?2)
             ON CONFLICT (session_id) DO UPDATE SET record = excluded.record",
            params![session_id, to_json(meta)?],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn read_meta(&self, session_id: &str) -> Result<Option<SessionMeta>, SessionError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        require_session(&tx, session_id)?;
        let text: Option<String> = tx
            .query_row(
                "SELECT record FROM meta WHERE session_id = ?1",
                [session_id],
                |row| row.get(0),
            )
            .optional()?;
        text.map(|text| from_json(&text, row_location(RecordKey::Meta { session_id })))
            .transpose()
    }

    /// One transaction: the session appears with its agent, messages and metadata, or not at all.
    fn create_complete_session(&self, new: &NewSession) -> Result<(), SessionError> {
        let id = new.session.session_id.as_str();
        let agent_id = new.agent.agent_id.as_str();
        let (created_at, updated_at, updated_us) = schema::session_times(&new.session);
        let count = to_i64(u64::try_from(new.messages.len()).unwrap_or(u64::MAX))?;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let inserted = tx.execute(
            "INSERT INTO sessions (session_id, created_at, updated_at, record, updated_us, message_count)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (session_id) DO NOTHING",
            params![id, created_at, updated_at, to_json(&new.session)?, updated_us, count],
        )?;
        if inserted == 0 {
            return Err(SessionError::SessionExists(id.to_owned()));
        }
        tx.execute(
            "INSERT INTO agents (session_id, agent_id, record) VALUES (?1, ?2, ?3)",
            params![id, agent_id, to_json(&new.agent)?],
        )?;
        for message in &new.messages {
            tx.execute(
                "INSERT INTO messages (session_id, agent_id, message_id, record) VALUES (?1, ?2, ?3, ?4)",
                params![id, agent_id, to_i64(message.message_id)?, to_json(message)?],
            )?;
        }
        tx.execute(
            "INSERT INTO meta (session_id, record) VALUES (?1, ?2)",
            params![id, to_json(&new.meta)?],
        )?;
        tx.commit()?;
        Ok(())
    }
}
