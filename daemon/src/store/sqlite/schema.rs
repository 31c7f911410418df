//! The sqlite backend's schema and its numbered migrations, tracked in `PRAGMA user_version`.
//!
//! Invariants: a migration is never edited once released (a database of every earlier version must
//! open; `daemon/tests/store_sqlite_schema.rs` keeps a copy of version 1 to prove it); each
//! migration runs in its own IMMEDIATE transaction together with the `user_version` bump, so a crash
//! leaves the database at one version or the next; a database newer than [`LATEST_VERSION`] is
//! refused untouched.
//!
//! Records are stored as their JSON (with `"v"`, unknown keys kept); columns beside them hold what
//! is looked up or sorted.

use std::path::Path;

use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::store::records::{Session, rfc3339};
use crate::store::store_error::SessionError;

/// Version 1: one table per record kind.
pub(crate) const SCHEMA_V1: &str = "
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE agents (
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    agent_id TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (session_id, agent_id)
);
CREATE TABLE messages (
    session_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    message_id INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (session_id, agent_id, message_id),
    FOREIGN KEY (session_id, agent_id) REFERENCES agents(session_id, agent_id)
);
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE meta (
    session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions(session_id),
    record TEXT NOT NULL
);
";

/// Version 2: listing columns (an integer sort key and a message counter), filled from the data.
const SCHEMA_V2: &str = "
ALTER TABLE sessions ADD COLUMN updated_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET message_count =
    (SELECT count(*) FROM messages WHERE messages.session_id = sessions.session_id);
CREATE INDEX sessions_by_update ON sessions (updated_us DESC, session_id DESC);
";

/// The newest schema this code knows.
pub(crate) const LATEST_VERSION: i64 = 2;

fn migrate_v1(tx: &Transaction<'_>) -> Result<(), SessionError> {
    tx.execute_batch(SCHEMA_V1)?;
    Ok(())
}

fn migrate_v2(tx: &Transaction<'_>) -> Result<(), SessionError> {
    tx.execute_batch(SCHEMA_V2)?;
    // The sort key from the stored text, parsed in Rust so every RFC 3339 form counts.
    let rows: Vec<(String, String)> = {
        let mut stmt = tx.prepare("SELECT session_id, updated_at FROM sessions")?;
        stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<_, _>>()?
    };
    let mut update = tx.prepare("UPDATE sessions SET updated_us = ?2 WHERE session_id = ?1")?;
    for (id, updated_at) in rows {
        let ts: jiff::Timestamp = updated_at
            .parse()
            .map_err(|err| SessionError::corrupt(format!("sessions.updated_at of {id}"), err))?;
        update.execute(rusqlite::params![id, ts.as_microsecond()])?;
    }
    Ok(())
}

type Migration = fn(&Transaction<'_>) -> Result<(), SessionError>;

/// Migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: [Migration; LATEST_VERSION as usize] = [migrate_v1, migrate_v2];

/// The schema version recorded in the database.
pub(crate) fn current_version(conn: &Connection) -> Result<i64, SessionError> {
    Ok(conn.query_row("PRAGMA user_version", [], |row| row.get(0))?)
}

/// Brings the database to [`LATEST_VERSION`].
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), SessionError> {
    let found = current_version(conn)?;
    if found > LATEST_VERSION {
        return Err(SessionError::SchemaTooNew {
            path: path.to_path_buf(),
            found,
            supported: LATEST_VERSION,
        });
    }
    for (index, migration) in MIGRATIONS.iter().enumerate() {
        let version = index as i64 + 1;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Another process may have migrated while we waited for the lock.
        if current_version(&tx)? >= version {
            continue;
        }
        migration(&tx)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        tracing::debug!(path = %path.display(), version, "migrated the session database");
    }
    Ok(())
}

/// The text form of a session's timestamps in the columns (fixed-width RFC 3339).
pub(crate) fn session_times(session: &Session) -> (String, String, i64) {
    (
        rfc3339::format(&session.created_at),
        rfc3339::format(&session.updated_at),
        session.updated_at.as_microsecond(),
    )
}
