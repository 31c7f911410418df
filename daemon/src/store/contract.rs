//! The `SessionStore` contract: the nine Strands `SessionRepository` operations plus
//! `list_sessions`, events and metadata. The built-in backends get its checks from one layer,
//! `checked_store` (see ARCHITECTURE.md, store).
//!
//! Contract (checked by the shared suite in `daemon/tests/store_contract.rs`):
//! - Methods are synchronous and may block on disk I/O; async callers use `spawn_blocking`.
//! - Every id is validated ([`crate::store::validate_id`]) before any I/O: a bad id is
//!   `SessionError::InvalidId`.
//! - `read_*` return `Ok(None)` when the record (or its session) does not exist; `create_*` fail with
//!   `*Exists` when it does and `*NotFound` when its parent does not; `update_*` fail with
//!   `*NotFound`.
//! - Nothing is ever deleted, and a message is never overwritten: `update_message` only records a
//!   redaction (`redact_message`) beside the original.
//! - `create_message` moves the session's `updated_at` to now (the file backend: to the message's
//!   `created_at`, which the hub sets to now; never backwards) and counts the message; a stored
//!   message is durable when the call returns (with `Durability::Full`). The session's own record
//!   may follow at `flush_session` (the file backend), but every read of the same store sees it
//!   at once, and another store on the same data sees it recomputed from the messages.
//! - `list_messages` is ordered by numeric id; `list_sessions` by `updated_at`, newest first
//!   (ties: larger id first). `list_messages_before` is the newest end of `list_messages` below an
//!   id, in the same order; `session_info` is the session's `list_sessions` entry.
//! - Events are JSON objects, returned in append order; a record without `"v"` gets `"v": 1`.

use serde_json::Value;

use crate::store::id::new_session_id;
use crate::store::meta::SessionMeta;
use crate::store::records::{
    DEFAULT_AGENT_ID, FORMAT_VERSION, Session, SessionAgent, SessionInfo, SessionMessage, now_utc,
};
use crate::store::store_error::SessionError;

/// Whether writes wait for the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// fsync before a write returns (files and their directories; sqlite `synchronous=FULL`).
    #[default]
    Full,
    /// No fsync. Only for tests and benchmark set-up: a power loss may lose recent writes (a
    /// process crash does not).
    NoSync,
}

/// Where a session is kept. Object-safe and shared between threads as `Arc<dyn SessionStore>`.
pub trait SessionStore: Send + Sync {
    /// The backend name (`file`, `sqlite`, …), for `/session` and `tau doctor`.
    fn backend_name(&self) -> &str;

    /// Creates a session record; `SessionExists` if the id is taken.
    fn create_session(&self, session: &Session) -> Result<(), SessionError>;
    /// The session record, or `None`.
    fn read_session(&self, session_id: &str) -> Result<Option<Session>, SessionError>;

    /// Creates an agent record in an existing session.
    fn create_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError>;
    /// The agent record, or `None`.
    fn read_agent(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Result<Option<SessionAgent>, SessionError>;
    /// Replaces an agent record; its original `created_at` is kept and `updated_at` set to now.
    fn update_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError>;

    /// Stores a new message; `MessageExists` if its id is taken (never overwritten).
    fn create_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError>;
    /// One message, or `None`.
    fn read_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
    ) -> Result<Option<SessionMessage>, SessionError>;
    /// Records `message.redact_message` on the stored message with the same id; the original text
    /// stays. `NotARedaction` if `redact_message` is `None`.
    fn update_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError>;
    /// Messages ordered by id, skipping `offset`, at most `limit`. `SessionNotFound` /
    /// `AgentNotFound` if the agent does not exist.
    fn list_messages(
        &self,
        session_id: &str,
        agent_id: &str,
        limit: Option<usize>,
        offset: usize,
    ) -> Result<Vec<SessionMessage>, SessionError>;

    /// Every session, newest `updated_at` first.
    fn list_sessions(&self) -> Result<Vec<SessionInfo>, SessionError>;

    /// One session's listing facts (times, message count) without reading its messages, or
    /// `None`. The built-in backends keep the count beside the session; this default, for other
    /// backends, counts the default agent's messages.
    fn session_info(&self, session_id: &str) -> Result<Option<SessionInfo>, SessionError> {
        let Some(session) = self.read_session(session_id)? else {
            return Ok(None);
        };
        let message_count = match self.list_messages(session_id, DEFAULT_AGENT_ID, None, 0) {
            Ok(messages) => u64::try_from(messages.len()).unwrap_or(u64::MAX),
            Err(SessionError::AgentNotFound { .. }) => 0,
            Err(error) => return Err(error),
        };
        Ok(Some(SessionInfo {
            session_id: session.session_id,
            created_at: session.created_at,
            updated_at: session.updated_at,
            message_count,
        }))
    }

    /// A page of messages read from the newest end: the newest `limit` messages whose id is below
    /// `before` (all messages when `None`), in id order. Only the page is read by the built-in
    /// backends; this default, for other backends, reads every message and keeps the page.
    fn list_messages_before(
        &self,
        session_id: &str,
        agent_id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        let mut messages = self.list_messages(session_id, agent_id, None, 0)?;
        messages.retain(|m| before.is_none_or(|before| m.message_id < before));
        let skip = messages.len().saturating_sub(limit);
        messages.drain(..skip);
        Ok(messages)
    }

    /// The lowest id a new message of the agent may take, whatever `list_messages` shows: the
    /// next id is the larger of this and one past the last message listed. The file backend
    /// keeps it past every id a journal it had to set aside still holds (a journal it could not
    /// replay, or one with a damaged line), so no id is given twice. This default, for other
    /// backends, is 0.
    fn message_id_floor(&self, session_id: &str, agent_id: &str) -> Result<u64, SessionError> {
        let _ = (session_id, agent_id);
        Ok(0)
    }

    /// Writes durably what the backend keeps about a session beside its messages and defers
    /// while a turn runs: the file backend's `session.json` (message count, `updated_at`) and its
    /// listing index line. The hub calls it after turns (at most once per its
    /// `session_record_interval`, and when the session closes); other backends write it with each
    /// message, and this default does nothing. Until it runs, this store shows the current values,
    /// and a crash loses only what the next open recomputes from the message files.
    fn flush_session(&self, session_id: &str) -> Result<(), SessionError> {
        let _ = session_id;
        Ok(())
    }

    /// Does, off a turn's path, what the backend left for later about the session and no reader
    /// waits for: the file backend writes its journaled records to their files and checkpoints
    /// the journal when one is due; sqlite checkpoints its WAL once enough commits gathered (the
    /// whole database's, whichever session's tidy finds it due). The hub calls it after a turn
    /// when `tidy_pending` says so, without waiting for it; nothing about durability depends on
    /// it (a write that returned is durable already). This default does nothing.
    fn tidy_session(&self, session_id: &str) -> Result<(), SessionError> {
        let _ = session_id;
        Ok(())
    }

    /// Whether `tidy_session` has anything to do for the session now, answered from memory
    /// without waiting on the disk: the hub starts a tidy only when it does. The file backend
    /// says yes while the session's journal holds records (or another call is busy with it);
    /// sqlite once its WAL is due a checkpoint (every few hundred commits); this default, for
    /// backends that leave nothing for later, always no.
    fn tidy_pending(&self, session_id: &str) -> bool {
        let _ = session_id;
        false
    }

    /// `flush_session` for a session the hub closes: the file backend also syncs and empties the
    /// session's journal, so nothing of it waits for the next open. This default flushes.
    fn close_session(&self, session_id: &str) -> Result<(), SessionError> {
        self.flush_session(session_id)
    }

    /// Appends one agent event (a JSON object) to the session's event log.
    fn append_event(&self, session_id: &str, event: &Value) -> Result<(), SessionError>;

    /// Stores `events`, then `messages`, as one durable write: what a step of a turn produces
    /// together (a tool round's `tool_call` records with the message holding their results). Each
    /// record follows the rules of `append_event` and `create_message`, and all are durable when
    /// the call returns. The built-in backends pay for one write: sqlite one transaction (all or
    /// nothing), the file backend one synced line of its session journal (all or nothing too;
    /// the files follow). This default, for other backends, is the plain sequence of
    /// `append_event` and `create_message`.
    fn append_batch(
        &self,
        session_id: &str,
        agent_id: &str,
        events: &[Value],
        messages: &[SessionMessage],
    ) -> Result<(), SessionError> {
        for event in events {
            self.append_event(session_id, event)?;
        }
        for message in messages {
            self.create_message(session_id, agent_id, message)?;
        }
        Ok(())
    }
    /// The session's events in append order (empty if none).
    fn read_events(&self, session_id: &str) -> Result<Vec<Value>, SessionError>;

    /// Replaces the session's metadata.
    fn write_meta(&self, session_id: &str, meta: &SessionMeta) -> Result<(), SessionError>;
    /// The session's metadata, or `None` if none was written (`SessionNotFound` if no session).
    fn read_meta(&self, session_id: &str) -> Result<Option<SessionMeta>, SessionError>;

    /// Creates a whole session in one step: the record, one agent with its first messages and
    /// the metadata (what a compaction writes). `SessionExists` if the id is taken; a message
    /// whose id is not its position is `InvalidMessageOrder`.
    ///
    /// The built-in backends make the session visible (`read_session`, `list_sessions`) only
    /// complete: a failure part way leaves nothing a reader sees (the file backend writes
    /// `session.json` last, sqlite uses one transaction). This default, for other backends, is the
    /// plain sequence of `create_session`, `create_agent`, `create_message` and `write_meta`,
    /// which may leave a partial session behind.
    fn create_complete_session(&self, new: &NewSession) -> Result<(), SessionError> {
        new.check_order()?;
        let id = new.session.session_id.as_str();
        self.create_session(&new.session)?;
        self.create_agent(id, &new.agent)?;
        for message in &new.messages {
            self.create_message(id, &new.agent.agent_id, message)?;
        }
        self.write_meta(id, &new.meta)
    }
}

/// A session to create whole with [`SessionStore::create_complete_session`].
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    pub session: Session,
    pub agent: SessionAgent,
    /// The agent's messages; the `message_id`s must be 0, 1, 2 … in order.
    pub messages: Vec<SessionMessage>,
    pub meta: SessionMeta,
}

impl NewSession {
    /// Refuses messages whose ids are not 0, 1, 2 … in order.
    pub fn check_order(&self) -> Result<(), SessionError> {
        for (position, message) in (0u64..).zip(&self.messages) {
            if message.message_id != position {
                return Err(SessionError::InvalidMessageOrder {
                    expected: position,
                    found: message.message_id,
                });
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for dyn SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionStore({})", self.backend_name())
    }
}

/// The event as stored: a JSON object with `"v"` (added as 1 when missing).
pub fn event_record(event: &Value) -> Result<Value, SessionError> {
    let Value::Object(map) = event else {
        return Err(SessionError::InvalidEvent(json_kind(event)));
    };
    if map.contains_key("v") {
        return Ok(event.clone());
    }
    let mut record = serde_json::Map::with_capacity(map.len() + 1);
    record.insert("v".to_owned(), Value::from(FORMAT_VERSION));
    record.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(Value::Object(record))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Creates a whole session (see [`SessionStore::create_complete_session`]) with a fresh id,
/// retrying when the random suffix collides with an existing session; returns its id.
pub fn create_fresh_complete_session(
    store: &dyn SessionStore,
    agent: SessionAgent,
    messages: Vec<SessionMessage>,
    meta: SessionMeta,
) -> Result<String, SessionError> {
    const ATTEMPTS: usize = 16;
    let now = now_utc();
    let mut new = NewSession {
        session: Session::new(new_session_id(now)?, now),
        agent,
        messages,
        meta,
    };
    let mut last = None;
    for _ in 0..ATTEMPTS {
        match store.create_complete_session(&new) {
            Ok(()) => return Ok(new.session.session_id),
            Err(err @ SessionError::SessionExists(_)) => last = Some(err),
            Err(err) => return Err(err),
        }
        let now = now_utc();
        new.session = Session::new(new_session_id(now)?, now);
    }
    Err(last.unwrap_or_else(|| SessionError::SessionExists(String::new())))
}

/// Creates a session with a fresh id (`20260929-153012-3f9a`), retrying when the random suffix
/// collides with an existing session.
pub fn create_fresh_session(store: &dyn SessionStore) -> Result<Session, SessionError> {
    const ATTEMPTS: usize = 16;
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let now = now_utc();
        let session = Session::new(new_session_id(now)?, now);
        match store.create_session(&session) {
            Ok(()) => return Ok(session),
            Err(err @ SessionError::SessionExists(_)) => last = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last.unwrap_or_else(|| SessionError::SessionExists(String::new())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_get_a_version_and_keep_their_keys() {
        let record = event_record(&json!({"type": "tool_call", "tool": "x"})).unwrap();
        assert_eq!(record, json!({"v": 1, "type": "tool_call", "tool": "x"}));
        let own = json!({"v": 7, "type": "x"});
        assert_eq!(event_record(&own).unwrap(), own);
    }

    #[test]
    fn events_must_be_objects() {
        for bad in [json!(null), json!([1]), json!("x"), json!(3)] {
            assert!(matches!(
                event_record(&bad),
                Err(SessionError::InvalidEvent(_))
            ));
        }
    }
}
