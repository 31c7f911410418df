//! The sqlite backend's writes, each a job run by `group_commit` inside its own savepoint of an
//! IMMEDIATE transaction: what a job reads (an existence check, the record it rewrites) cannot
//! change before it writes, and a job that fails leaves nothing behind.
//!
//! Invariant: a job only runs statements on the connection it is given; it never begins, commits
//! or rolls back (its savepoint and the batch's commit are `group_commit`'s).

use rusqlite::{Connection, OptionalExtension, params};

use crate::store::backend::{RecordKey, Rewrite};
use crate::store::contract::NewSession;
use crate::store::meta::SessionMeta;
use crate::store::records::{Session, SessionAgent, SessionMessage, now_utc, rfc3339};
use crate::store::store_error::SessionError;

use super::rows::{
    from_json, read_message_row, require_agent, require_session, row_location, to_i64, to_json,
};
use super::schema;

pub(super) fn create_session(conn: &Connection, session: &Session) -> Result<(), SessionError> {
    let (created_at, updated_at, updated_us) = schema::session_times(session);
    let inserted = conn.prepare_cached(
        "INSERT INTO sessions (session_id, created_at, updated_at, record, updated_us, message_count)
         VALUES (?1, ?2, ?3, ?4, ?5, 0) ON CONFLICT (session_id) DO NOTHING",
    )?
    .execute(params![session.session_id, created_at, updated_at, to_json(session)?, updated_us])?;
    if inserted == 0 {
        return Err(SessionError::SessionExists(session.session_id.clone()));
    }
    Ok(())
}

pub(super) fn create_agent(
    conn: &Connection,
    session_id: &str,
    agent: &SessionAgent,
) -> Result<(), SessionError> {
    require_session(conn, session_id)?;
    let inserted = conn
        .prepare_cached(
            "INSERT INTO agents (session_id, agent_id, record) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id, agent_id) DO NOTHING",
        )?
        .execute(params![session_id, agent.agent_id, to_json(agent)?])?;
    if inserted == 0 {
        return Err(SessionError::AgentExists {
            session_id: session_id.to_owned(),
            agent_id: agent.agent_id.clone(),
        });
    }
    Ok(())
}

pub(super) fn update_agent(
    conn: &Connection,
    session_id: &str,
    agent_id: &str,
    rewrite: Rewrite<'_, SessionAgent>,
) -> Result<(), SessionError> {
    let existing: Option<String> = conn
        .prepare_cached("SELECT record FROM agents WHERE session_id = ?1 AND agent_id = ?2")?
        .query_row([session_id, agent_id], |row| row.get(0))
        .optional()?;
    let Some(existing) = existing else {
        require_agent(conn, session_id, agent_id)?;
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
    conn.prepare_cached("UPDATE agents SET record = ?3 WHERE session_id = ?1 AND agent_id = ?2")?
        .execute(params![session_id, agent_id, to_json(&record)?])?;
    Ok(())
}

/// Inserts `messages` (id, JSON) of one agent and moves the session's count and time once for
/// all of them: the agent is checked once, and the session row is rewritten once per batch.
pub(super) fn create_messages(
    conn: &Connection,
    session_id: &str,
    agent_id: &str,
    messages: &[(i64, String)],
) -> Result<(), SessionError> {
    if messages.is_empty() {
        return Ok(());
    }
    require_agent(conn, session_id, agent_id)?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO messages (session_id, agent_id, message_id, record) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (session_id, agent_id, message_id) DO NOTHING",
    )?;
    for (message_id, text) in messages {
        if insert.execute(params![session_id, agent_id, message_id, text])? == 0 {
            return Err(SessionError::MessageExists {
                session_id: session_id.to_owned(),
                agent_id: agent_id.to_owned(),
                message_id: u64::try_from(*message_id).unwrap_or(0),
            });
        }
    }
    let previous_us: i64 = conn
        .prepare_cached("SELECT updated_us FROM sessions WHERE session_id = ?1")?
        .query_row([session_id], |row| row.get(0))?;
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
    let added = i64::try_from(messages.len()).unwrap_or(i64::MAX);
    conn.prepare_cached(
        "UPDATE sessions SET updated_at = ?2, updated_us = ?3, message_count = message_count + ?4
         WHERE session_id = ?1",
    )?
    .execute(params![session_id, updated_at, updated_us, added])?;
    Ok(())
}

pub(super) fn update_message(
    conn: &Connection,
    session_id: &str,
    agent_id: &str,
    message_id: u64,
    rewrite: Rewrite<'_, SessionMessage>,
) -> Result<(), SessionError> {
    require_agent(conn, session_id, agent_id)?;
    let Some(stored) = read_message_row(conn, session_id, agent_id, message_id)? else {
        return Err(SessionError::MessageNotFound {
            session_id: session_id.to_owned(),
            agent_id: agent_id.to_owned(),
            message_id,
        });
    };
    let record = rewrite(stored)?;
    conn.execute(
        "UPDATE messages SET record = ?4 WHERE session_id = ?1 AND agent_id = ?2 AND message_id = ?3",
        params![session_id, agent_id, to_i64(message_id)?, to_json(&record)?],
    )?;
    Ok(())
}

/// Appends `events` (JSON) to the session's events, numbered on from its last one; the session
/// is checked and its last number read once for all of them.
pub(super) fn append_events(
    conn: &Connection,
    session_id: &str,
    events: &[String],
) -> Result<(), SessionError> {
    if events.is_empty() {
        return Ok(());
    }
    require_session(conn, session_id)?;
    let next: i64 = conn
        .prepare_cached("SELECT COALESCE(MAX(seq), -1) + 1 FROM events WHERE session_id = ?1")?
        .query_row([session_id], |row| row.get(0))?;
    let mut insert =
        conn.prepare_cached("INSERT INTO events (session_id, seq, event) VALUES (?1, ?2, ?3)")?;
    for (seq, text) in (next..).zip(events) {
        insert.execute(params![session_id, seq, text])?;
    }
    Ok(())
}

pub(super) fn write_meta(
    conn: &Connection,
    session_id: &str,
    meta: &SessionMeta,
) -> Result<(), SessionError> {
    require_session(conn, session_id)?;
    conn.prepare_cached(
        "INSERT INTO meta (session_id, record) VALUES (?1, ?2)
         ON CONFLICT (session_id) DO UPDATE SET record = excluded.record",
    )?
    .execute(params![session_id, to_json(meta)?])?;
    Ok(())
}

/// The session appears with its agent, messages and metadata, or not at all (one savepoint).
pub(super) fn create_complete_session(
    conn: &Connection,
    new: &NewSession,
) -> Result<(), SessionError> {
    let id = new.session.session_id.as_str();
    let agent_id = new.agent.agent_id.as_str();
    let (created_at, updated_at, updated_us) = schema::session_times(&new.session);
    let count = to_i64(u64::try_from(new.messages.len()).unwrap_or(u64::MAX))?;
    let inserted = conn.execute(
        "INSERT INTO sessions (session_id, created_at, updated_at, record, updated_us, message_count)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (session_id) DO NOTHING",
        params![id, created_at, updated_at, to_json(&new.session)?, updated_us, count],
    )?;
    if inserted == 0 {
        return Err(SessionError::SessionExists(id.to_owned()));
    }
    conn.execute(
        "INSERT INTO agents (session_id, agent_id, record) VALUES (?1, ?2, ?3)",
        params![id, agent_id, to_json(&new.agent)?],
    )?;
    let mut insert = conn.prepare_cached(
        "INSERT INTO messages (session_id, agent_id, message_id, record) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for message in &new.messages {
        insert.execute(params![
            id,
            agent_id,
            to_i64(message.message_id)?,
            to_json(message)?
        ])?;
    }
    conn.execute(
        "INSERT INTO meta (session_id, record) VALUES (?1, ?2)",
        params![id, to_json(&new.meta)?],
    )?;
    Ok(())
}
