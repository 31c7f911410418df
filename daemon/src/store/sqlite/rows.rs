//! Reading and writing the sqlite backend's rows: record JSON in and out, the names errors give
//! a row, and the existence checks every write makes inside its transaction.
//!
//! Invariant: a row that does not parse is `Corrupt`, named by its session (never skipped here;
//! only `list_sessions` skips an unreadable session). See ARCHITECTURE.md (store).

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::backend::RecordKey;
use crate::store::records::{SessionInfo, SessionMessage};
use crate::store::store_error::SessionError;

/// How an error names a row.
pub(super) fn row_location(record: RecordKey<'_>) -> String {
    match record {
        RecordKey::Session { session_id } => format!("session {session_id}"),
        RecordKey::Agent {
            session_id,
            agent_id,
        } => format!("agent {agent_id} of session {session_id}"),
        RecordKey::Message {
            session_id,
            message_id,
            ..
        } => format!("message {message_id} of session {session_id}"),
        RecordKey::Meta { session_id } => format!("metadata of session {session_id}"),
    }
}

pub(super) fn to_json<T: Serialize>(value: &T) -> Result<String, SessionError> {
    serde_json::to_string(value).map_err(|err| SessionError::corrupt("record", err))
}

pub(super) fn from_json<T: DeserializeOwned>(
    text: &str,
    location: impl std::fmt::Display,
) -> Result<T, SessionError> {
    serde_json::from_str(text).map_err(|err| SessionError::corrupt(location, err))
}

pub(super) fn to_i64(n: u64) -> Result<i64, SessionError> {
    i64::try_from(n).map_err(|_| SessionError::corrupt("message id", format!("{n} is too large")))
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// One row of `list_sessions` from its column values.
pub(super) fn listing_row(
    session_id: &str,
    created_at: rusqlite::Result<String>,
    updated_at: rusqlite::Result<String>,
    count: rusqlite::Result<i64>,
) -> Result<SessionInfo, SessionError> {
    let location = row_location(RecordKey::Session { session_id });
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

pub(super) fn session_exists(conn: &Connection, session_id: &str) -> Result<bool, SessionError> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sessions WHERE session_id = ?1")?
        .query_row([session_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// `SessionNotFound` unless the session exists.
pub(super) fn require_session(conn: &Connection, session_id: &str) -> Result<(), SessionError> {
    if session_exists(conn, session_id)? {
        Ok(())
    } else {
        Err(SessionError::SessionNotFound(session_id.to_owned()))
    }
}

fn agent_exists(conn: &Connection, session_id: &str, agent_id: &str) -> Result<bool, SessionError> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM agents WHERE session_id = ?1 AND agent_id = ?2")?
        .query_row([session_id, agent_id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// `SessionNotFound` or `AgentNotFound`, whichever is true.
pub(super) fn require_agent(
    conn: &Connection,
    session_id: &str,
    agent_id: &str,
) -> Result<(), SessionError> {
    if agent_exists(conn, session_id, agent_id)? {
        return Ok(());
    }
    require_session(conn, session_id)?;
    Err(SessionError::AgentNotFound {
        session_id: session_id.to_owned(),
        agent_id: agent_id.to_owned(),
    })
}

pub(super) fn read_message_row(
    conn: &Connection,
    session_id: &str,
    agent_id: &str,
    message_id: u64,
) -> Result<Option<SessionMessage>, SessionError> {
    let text: Option<String> = conn
        .prepare_cached(
            "SELECT record FROM messages WHERE session_id = ?1 AND agent_id = ?2 AND message_id = ?3",
        )?
        .query_row(params![session_id, agent_id, to_i64(message_id)?], |row| {
            row.get(0)
        })
        .optional()?;
    text.map(|text| {
        let location = row_location(RecordKey::Message {
            session_id,
            agent_id,
            message_id,
        });
        from_json(&text, location)
    })
    .transpose()
}
