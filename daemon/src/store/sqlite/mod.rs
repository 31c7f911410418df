//! The `sqlite` session backend: every session in one database (`<TAU_DATA_DIR>/sessions.db`), same
//! contract as the file backend.
//!
//! Invariants:
//! - WAL journal with `synchronous=FULL`: in WAL mode FULL fsyncs the log on every commit, so a
//!   message is on disk when `create_message` returns, for about one fsync. (NORMAL would skip that
//!   fsync and could lose the last commits on a power cut; a stored message must survive one.)
//!   `Durability::NoSync` sets `synchronous=OFF` for tests and benchmark set-up.
//! - One connection behind a std `Mutex`; methods are synchronous and never hold the lock across an
//!   await (there is none). Each write is one transaction (IMMEDIATE when it reads before writing),
//!   so a crash leaves every record whole or absent.
//! - The database file is 0600 from the moment it exists: it is created (empty, which sqlite takes
//!   for a new database) with that mode before sqlite opens it, and sqlite gives its `-wal`,
//!   `-shm` and journal files the mode of the database file. A database (or companion file) left
//!   wider by an older version is narrowed to 0600. Its directory is created 0700 if missing, and
//!   a database path that is a symbolic link is refused.
//! - Nothing is deleted; messages are inserted once, and only their `redact_message` is updated.

mod schema;

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::store::contract::{Durability, NewSession, SessionStore, event_record};
use crate::store::id::validate_id;
use crate::store::meta::SessionMeta;
use crate::store::records::{
    FORMAT_VERSION, Session, SessionAgent, SessionInfo, SessionMessage, check_version, now_utc,
    rfc3339,
};
use crate::store::store_error::{IdKind, SessionError};

/// The mode of the database and of every file sqlite makes beside it.
const PRIVATE_FILE_MODE: u32 = 0o600;

/// How long a write waits for another process holding the database lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

fn to_json<T: Serialize>(value: &T) -> Result<String, SessionError> {
    serde_json::to_string(value).map_err(|err| SessionError::corrupt("record", err))
}

fn from_json<T: DeserializeOwned>(
    text: &str,
    location: impl std::fmt::Display,
) -> Result<T, SessionError> {
    serde_json::from_str(text).map_err(|err| SessionError::corrupt(location, err))
}

fn to_i64(n: u64) -> Result<i64, SessionError> {
    i64::try_from(n).map_err(|_| SessionError::corrupt("message id", format!("{n} is too large")))
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// One row of `list_sessions` from its column values.
fn listing_row(
    session_id: &str,
    created_at: rusqlite::Result<String>,
    updated_at: rusqlite::Result<String>,
    count: rusqlite::Result<i64>,
) -> Result<SessionInfo, SessionError> {
    let location = format!("session {session_id}");
    let time = |value: rusqlite::Result<String>| -> Result<jiff::Timestamp, SessionError> {
        value?
            .parse()
            .map_err(|err| SessionError::corrupt(&location, err))
    };
    Ok(SessionInfo {
        created_at: time(created_at)?,
        updated_at: time(updated_at)?,
        message_count: to_u64(count?),
        session_id: session_id.to_owned(),
    })
}

/// Sessions in one sqlite database.
pub struct SqliteSessionStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl SqliteSessionStore {
    /// Opens (creating and migrating if needed) the database at `path`.
    pub fn open(path: impl Into<PathBuf>, durability: Durability) -> Result<Self, SessionError> {
        let path = path.into();
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

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64, SessionError> {
        schema::current_version(&self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic in another thread rolled its transaction back; the connection is still sound.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The files sqlite keeps beside a database in WAL mode (and the rollback journal of other modes).
const COMPANION_SUFFIXES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Creates the database file 0600 if missing (never through a symbolic link), before sqlite opens
/// it, so it never exists with sqlite's default 0644; narrows an existing database or companion
/// file that is wider than 0600.
fn create_private_file(path: &Path) -> Result<(), SessionError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(PRIVATE_FILE_MODE)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|err| {
            if err.raw_os_error() == Some(Errno::ELOOP as i32) {
                SessionError::Symlink {
                    path: path.to_path_buf(),
                }
            } else {
                SessionError::io(path, err)
            }
        })?;
    let meta = file.metadata().map_err(|err| SessionError::io(path, err))?;
    if !meta.is_file() {
        return Err(SessionError::corrupt(path.display(), "not a regular file"));
    }
    if meta.permissions().mode() & 0o777 != PRIVATE_FILE_MODE {
        file.set_permissions(fs::Permissions::from_mode(PRIVATE_FILE_MODE))
            .map_err(|err| SessionError::io(path, err))?;
    }
    for suffix in COMPANION_SUFFIXES {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let companion = PathBuf::from(name);
        match fs::symlink_metadata(&companion) {
            Ok(meta)
                if meta.is_file() && meta.permissions().mode() & 0o777 != PRIVATE_FILE_MODE =>
            {
                fs::set_permissions(&companion, fs::Permissions::from_mode(PRIVATE_FILE_MODE))
                    .map_err(|err| SessionError::io(&companion, err))?;
            }
            Ok(_) => {}
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            Err(err) => return Err(SessionError::io(companion, err)),
        }
    }
    Ok(())
}

fn session_exists(conn: &Connection, session_id: &str) -> Result<bool, SessionError> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sessions WHERE session_id = ?1",
            [session_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

fn agent_exists(conn: &Connection, session_id: &str, agent_id: &str) -> Result<bool, SessionError> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM agents WHERE session_id = ?1 AND agent_id = ?2",
            [session_id, agent_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// `SessionNotFound` or `AgentNotFound`, whichever is true.
fn require_agent(conn: &Connection, session_id: &str, agent_id: &str) -> Result<(), SessionError> {
    if agent_exists(conn, session_id, agent_id)? {
        return Ok(());
    }
    if !session_exists(conn, session_id)? {
        return Err(SessionError::SessionNotFound(session_id.to_owned()));
    }
    Err(SessionError::AgentNotFound {
        session_id: session_id.to_owned(),
        agent_id: agent_id.to_owned(),
    })
}

fn read_message_row(
    conn: &Connection,
    session_id: &str,
    agent_id: &str,
    message_id: u64,
) -> Result<Option<SessionMessage>, SessionError> {
    let text: Option<String> = conn
        .query_row(
            "SELECT record FROM messages WHERE session_id = ?1 AND agent_id = ?2 AND message_id = ?3",
            params![session_id, agent_id, to_i64(message_id)?],
            |row| row.get(0),
        )
        .optional()?;
    text.map(|text| {
        let location = format!("message {message_id} of session {session_id}");
        let record: SessionMessage = from_json(&text, &location)?;
        check_version(record.v, &location)?;
        Ok(record)
    })
    .transpose()
}

impl SessionStore for SqliteSessionStore {
    fn backend_name(&self) -> &str {
        "sqlite"
    }

    fn create_session(&self, session: &Session) -> Result<(), SessionError> {
        validate_id(IdKind::Session, &session.session_id)?;
        let mut record = session.clone();
        record.v = FORMAT_VERSION;
        let (created_at, updated_at, updated_us) = schema::session_times(&record);
        let conn = self.lock();
        let inserted = conn.execute(
            "INSERT INTO sessions (session_id, created_at, updated_at, record, updated_us, message_count)
             VALUES (?1, ?2, ?3, ?4, ?5, 0) ON CONFLICT (session_id) DO NOTHING",
            params![record.session_id, created_at, updated_at, to_json(&record)?, updated_us],
        )?;
        if inserted == 0 {
            return Err(SessionError::SessionExists(record.session_id));
        }
        Ok(())
    }

    fn read_session(&self, session_id: &str) -> Result<Option<Session>, SessionError> {
        validate_id(IdKind::Session, session_id)?;
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
        let location = format!("session {session_id}");
        let mut session: Session = from_json(&text, &location)?;
        check_version(session.v, &location)?;
        session.updated_at = updated_at
            .parse()
            .map_err(|err| SessionError::corrupt(&location, err))?;
        Ok(Some(session))
    }

    fn create_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        validate_id(IdKind::Session, session_id)?;
        validate_id(IdKind::Agent, &agent.agent_id)?;
        let mut record = agent.clone();
        record.v = FORMAT_VERSION;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !session_exists(&tx, session_id)? {
            return Err(SessionError::SessionNotFound(session_id.to_owned()));
        }
        let inserted = tx.execute(
            "INSERT INTO agents (session_id, agent_id, record) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id, agent_id) DO NOTHING",
            params![session_id, record.agent_id, to_json(&record)?],
        )?;
        if inserted == 0 {
            return Err(SessionError::AgentExists {
                session_id: session_id.to_owned(),
                agent_id: record.agent_id,
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
        validate_id(IdKind::Session, session_id)?;
        validate_id(IdKind::Agent, agent_id)?;
        let conn = self.lock();
        let text: Option<String> = conn
            .query_row(
                "SELECT record FROM agents WHERE session_id = ?1 AND agent_id = ?2",
                [session_id, agent_id],
                |row| row.get(0),
            )
            .optional()?;
        text.map(|text| {
            let location = format!("agent {agent_id} of session {session_id}");
            let record: SessionAgent = from_json(&text, &location)?;
            check_version(record.v, &location)?;
            Ok(record)
        })
        .transpose()
    }

    fn update_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        validate_id(IdKind::Session, session_id)?;
        validate_id(IdKind::Agent, &agent.agent_id)?;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existing: Option<String> = tx
            .query_row(
                "SELECT record FROM agents WHERE session_id = ?1 AND agent_id = ?2",
                [session_id, &agent.agent_id],
                |row| row.get(0),
            )
            .optional()?;
        let Some(existing) = existing else {
            require_agent(&tx, session_id, &agent.agent_id)?;
            return Err(SessionError::AgentNotFound {
                session_id: session_id.to_owned(),
                agent_id: agent.agent_id.clone(),
            });
        };
        let existing: SessionAgent = from_json(
            &existing,
            format!("agent {} of session {session_id}", agent.agent_id),
        )?;
        let mut record = agent.clone();
        record.v = FORMAT_VERSION;
        record.created_at = existing.created_at;
        record.updated_at = now_utc();
        tx.execute(
            "UPDATE agents SET record = ?3 WHERE session_id = ?1 AND agent_id = ?2",
            params![session_id, record.agent_id, to_json(&record)?],
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
        validate_id(IdKind::Session, session_id)?;
        validate_id(IdKind::Agent, agent_id)?;
        let mut record = message.clone();
        record.v = FORMAT_VERSION;
        let text = to_json(&record)?;
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
            let kept = jiff::Timestamp::from_microsecond(previous_us)
                .map_err(|err| SessionError::corrupt(format!("session {session_id}"), err))?;
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
        validate_id(IdKind::Session, session_id)?;
        validate_id(IdKind::Agent, agent_id)?;
        let conn = self.lock();
        read_message_row(&conn, session_id, agent_id, message_id)
    }

    fn update_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        validate_id(IdKind::Session, session_id)?;
        validate_id(IdKind::Agent, agent_id)?;
        let Some(redaction) = message.redact_message.clone() else {
            return Err(SessionError::NotARedaction {
                session_id: session_id.to_owned(),
                message_id: message.message_id,
            });
        };
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        require_agent(&tx, session_id, agent_id)?;
        let Some(mut record) = read_message_row(&tx, session_id, agent_id, message.message_id)?
        else {
            return Err(SessionError::MessageNotFound {
                session_id: session_id.to_owned(),
                agent_id: agent_id.to_owned(),
                message_id: message.message_id,
            });
        };
        record.v = FORMAT_VERSION;
        record.redact_message = Some(redaction);
        record.updated_at = now_utc();
        tx.execute(
            "UPDATE messages SET record = ?4 WHERE session_id = ?1 AND agent_id = ?2 AND message_id = ?3",
            params![session_id, agent_id, to_i64(message.message_id)?, to_json(&record)?],
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
        validate_id(IdKind::Session, session_id)?;
        validate_id(IdKind::Agent, agent_id)?;
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
            let location = format!("message {id} of session {session_id}");
            let record: SessionMessage = from_json(&text, &location)?;
            check_version(record.v, &location)?;
            messages.push(record);
        }
        Ok(messages)
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

    fn append_event(&self, session_id: &str, event: &Value) -> Result<(), SessionError> {
        validate_id(IdKind::Session, session_id)?;
        let text = to_json(&event_record(event)?)?;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !session_exists(&tx, session_id)? {
            return Err(SessionError::SessionNotFound(session_id.to_owned()));
        }
        tx.execute(
            "INSERT INTO events (session_id, seq, event)
             SELECT ?1, COALESCE(MAX(seq), -1) + 1, ?2 FROM events WHERE session_id = ?1",
            params![session_id, text],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn read_events(&self, session_id: &str) -> Result<Vec<Value>, SessionError> {
        validate_id(IdKind::Session, session_id)?;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        if !session_exists(&tx, session_id)? {
            return Err(SessionError::SessionNotFound(session_id.to_owned()));
        }
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
        validate_id(IdKind::Session, session_id)?;
        let mut record = meta.clone();
        record.v = FORMAT_VERSION;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if !session_exists(&tx, session_id)? {
            return Err(SessionError::SessionNotFound(session_id.to_owned()));
        }
        tx.execute(
            "INSERT INTO meta (session_id, record) VALUES (?1, ?2)
             ON CONFLICT (session_id) DO UPDATE SET record = excluded.record",
            params![session_id, to_json(&record)?],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// One transaction: the session appears with its agent, messages and metadata, or not at all.
    fn create_complete_session(&self, new: &NewSession) -> Result<(), SessionError> {
        new.check_order()?;
        validate_id(IdKind::Session, &new.session.session_id)?;
        validate_id(IdKind::Agent, &new.agent.agent_id)?;
        let mut session = new.session.clone();
        session.v = FORMAT_VERSION;
        let mut agent = new.agent.clone();
        agent.v = FORMAT_VERSION;
        let mut meta = new.meta.clone();
        meta.v = FORMAT_VERSION;
        let id = session.session_id.as_str();
        let agent_id = agent.agent_id.as_str();
        let (created_at, updated_at, updated_us) = schema::session_times(&session);
        let count = to_i64(u64::try_from(new.messages.len()).unwrap_or(u64::MAX))?;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let inserted = tx.execute(
            "INSERT INTO sessions (session_id, created_at, updated_at, record, updated_us, message_count)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (session_id) DO NOTHING",
            params![id, created_at, updated_at, to_json(&session)?, updated_us, count],
        )?;
        if inserted == 0 {
            return Err(SessionError::SessionExists(id.to_owned()));
        }
        tx.execute(
            "INSERT INTO agents (session_id, agent_id, record) VALUES (?1, ?2, ?3)",
            params![id, agent_id, to_json(&agent)?],
        )?;
        for message in &new.messages {
            let mut record = message.clone();
            record.v = FORMAT_VERSION;
            tx.execute(
                "INSERT INTO messages (session_id, agent_id, message_id, record) VALUES (?1, ?2, ?3, ?4)",
                params![id, agent_id, to_i64(message.message_id)?, to_json(&record)?],
            )?;
        }
        tx.execute(
            "INSERT INTO meta (session_id, record) VALUES (?1, ?2)",
            params![id, to_json(&meta)?],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn read_meta(&self, session_id: &str) -> Result<Option<SessionMeta>, SessionError> {
        validate_id(IdKind::Session, session_id)?;
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        if !session_exists(&tx, session_id)? {
            return Err(SessionError::SessionNotFound(session_id.to_owned()));
        }
        let text: Option<String> = tx
            .query_row(
                "SELECT record FROM meta WHERE session_id = ?1",
                [session_id],
                |row| row.get(0),
            )
            .optional()?;
        text.map(|text| {
            let location = format!("metadata of session {session_id}");
            let meta: SessionMeta = from_json(&text, &location)?;
            check_version(meta.v, &location)?;
            Ok(meta)
        })
        .transpose()
    }
}
