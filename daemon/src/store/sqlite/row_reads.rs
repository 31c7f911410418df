//! The sqlite backend's reads, each run on a connection of the read pool (never the write
//! connection, so never behind a commit).
//!
//! Invariant: a read that checks a record exists and then reads rows does both in one read
//! transaction, so both see the same commit.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::store::backend::RecordKey;
use crate::store::meta::SessionMeta;
use crate::store::records::{Session, SessionAgent, SessionInfo, SessionMessage};
use crate::store::store_error::SessionError;

use super::rows::{from_json, listing_row, read_message_row, require_agent, require_session};
use super::rows::{row_location, to_i64};

pub(super) fn read_session(
    conn: &Connection,
    session_id: &str,
) -> Result<Option<Session>, SessionError> {
    let row: Option<(String, String)> = conn
        .prepare_cached("SELECT record, updated_at FROM sessions WHERE session_id = ?1")?
        .query_row([session_id], |row| Ok((row.get(0)?, row.get(1)?)))
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

pub(super) fn read_agent(
    conn: &Connection,
    session_id: &str,
    agent_id: &str,
) -> Result<Option<SessionAgent>, SessionError> {
    let text: Option<String> = conn
        .prepare_cached("SELECT record FROM agents WHERE session_id = ?1 AND agent_id = ?2")?
        .query_row([session_id, agent_id], |row| row.get(0))
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

pub(super) fn read_message(
    conn: &Connection,
    session_id: &str,
    agent_id: &str,
    message_id: u64,
) -> Result<Option<SessionMessage>, SessionError> {
    read_message_row(conn, session_id, agent_id, message_id)
}

/// Rows of `(id, record)` parsed as `T`, named `"{kind} {id} of session {session_id}"`.
fn parse_rows<T: DeserializeOwned>(
    rows: impl Iterator<Item = rusqlite::Result<(i64, String)>>,
    kind: &str,
    session_id: &str,
) -> Result<Vec<T>, SessionError> {
    let mut parsed = Vec::new();
    for row in rows {
        let (id, text) = row?;
        parsed.push(from_json(
            &text,
            format_args!("{kind} {id} of session {session_id}"),
        )?);
    }
    Ok(parsed)
}

pub(super) fn list_messages(
    conn: &mut Connection,
    session_id: &str,
    agent_id: &str,
    limit: Option<usize>,
    offset: usize,
) -> Result<Vec<SessionMessage>, SessionError> {
    let limit = limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    require_agent(&tx, session_id, agent_id)?;
    let mut stmt = tx.prepare_cached(
        "SELECT message_id, record FROM messages WHERE session_id = ?1 AND agent_id = ?2
         ORDER BY message_id LIMIT ?3 OFFSET ?4",
    )?;
    let rows = stmt.query_map(params![session_id, agent_id, limit, offset], |row| {
        Ok((row.get(0)?, row.get(1)?))
    })?;
    parse_rows(rows, "message", session_id)
}

/// The page walked backwards on the primary key, then put in id order.
pub(super) fn list_messages_before(
    conn: &mut Connection,
    session_id: &str,
    agent_id: &str,
    before: Option<u64>,
    limit: usize,
) -> Result<Vec<SessionMessage>, SessionError> {
    let before = match before {
        Some(id) => to_i64(id).unwrap_or(i64::MAX),
        None => i64::MAX,
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    require_agent(&tx, session_id, agent_id)?;
    let mut stmt = tx.prepare_cached(
        "SELECT message_id, record FROM messages
         WHERE session_id = ?1 AND agent_id = ?2 AND message_id < ?3
         ORDER BY message_id DESC LIMIT ?4",
    )?;
    let rows = stmt.query_map(params![session_id, agent_id, before, limit], |row| {
        Ok((row.get(0)?, row.get(1)?))
    })?;
    let mut messages: Vec<SessionMessage> = parse_rows(rows, "message", session_id)?;
    messages.reverse();
    Ok(messages)
}

pub(super) fn session_info(
    conn: &Connection,
    session_id: &str,
) -> Result<Option<SessionInfo>, SessionError> {
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
/// unreadable `session.json`: one damaged session never hides the others (nor stops the hub's
/// start-up scan).
pub(super) fn list_sessions(conn: &Connection) -> Result<Vec<SessionInfo>, SessionError> {
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

pub(super) fn read_events(
    conn: &mut Connection,
    session_id: &str,
) -> Result<Vec<Value>, SessionError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    require_session(&tx, session_id)?;
    let mut stmt =
        tx.prepare_cached("SELECT seq, event FROM events WHERE session_id = ?1 ORDER BY seq")?;
    let rows = stmt.query_map([session_id], |row| Ok((row.get(0)?, row.get(1)?)))?;
    parse_rows(rows, "event", session_id)
}

pub(super) fn read_meta(
    conn: &mut Connection,
    session_id: &str,
) -> Result<Option<SessionMeta>, SessionError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    require_session(&tx, session_id)?;
    let text: Option<String> = tx
        .prepare_cached("SELECT record FROM meta WHERE session_id = ?1")?
        .query_row([session_id], |row| row.get(0))
        .optional()?;
    text.map(|text| from_json(&text, row_location(RecordKey::Meta { session_id })))
        .transpose()
}
