//! [`StoreBackend`], what a session backend (`file`, `sqlite`) implements: the storage half of the
//! [`SessionStore`](crate::store::SessionStore) contract, trusting its inputs. The checking half
//! (ids, format versions, the rules of an update) is written once, in `checked_store`, which
//! wraps every built-in backend; see ARCHITECTURE.md (store).
//!
//! Invariants a backend may rely on (the wrapper guarantees them): every id it is given passed
//! [`validate_id`](crate::store::validate_id); every record it is given to write carries
//! `v == FORMAT_VERSION`, and every event is a JSON object with a `"v"`; a `NewSession` is in
//! message order. What a backend must still do: keep the existence rules (`*Exists`,
//! `*NotFound`), make each write durable and whole, and check the format version of any record of
//! its own bookkeeping it rewrites without handing it out (the file backend's `session.json`
//! counter, its listing index). Records it returns are version-checked by the wrapper, which
//! names them with [`StoreBackend::record_location`].

use serde_json::Value;

use crate::store::contract::NewSession;
use crate::store::meta::SessionMeta;
use crate::store::records::{Session, SessionAgent, SessionInfo, SessionMessage};
use crate::store::store_error::SessionError;

/// A stored record, as named in an error about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKey<'a> {
    Session {
        session_id: &'a str,
    },
    Agent {
        session_id: &'a str,
        agent_id: &'a str,
    },
    Message {
        session_id: &'a str,
        agent_id: &'a str,
        message_id: u64,
    },
    Meta {
        session_id: &'a str,
    },
}

/// The rewrite of a stored record an update asks for: given the stored record, the one to store.
pub type Rewrite<'a, T> = &'a dyn Fn(T) -> Result<T, SessionError>;

/// One storage engine under the session-store contract. Same methods and errors as
/// [`SessionStore`](crate::store::SessionStore), minus the checks listed in the module
/// documentation; the two updates take the rewrite to apply to the stored record, so the rules
/// of an update live in the wrapper while the read and the write stay one step of the backend.
pub trait StoreBackend: Send + Sync {
    /// The backend name (`file`, `sqlite`).
    fn backend_name(&self) -> &'static str;
    /// Where `record` is kept, for an error about it (a file path, a row).
    fn record_location(&self, record: RecordKey<'_>) -> String;

    fn create_session(&self, session: &Session) -> Result<(), SessionError>;
    fn read_session(&self, session_id: &str) -> Result<Option<Session>, SessionError>;

    fn create_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError>;
    fn read_agent(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Result<Option<SessionAgent>, SessionError>;
    /// Stores what `rewrite` makes of the stored agent record; `SessionNotFound` /
    /// `AgentNotFound` when there is none.
    fn update_agent(
        &self,
        session_id: &str,
        agent_id: &str,
        rewrite: Rewrite<'_, SessionAgent>,
    ) -> Result<(), SessionError>;

    fn create_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError>;
    fn read_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
    ) -> Result<Option<SessionMessage>, SessionError>;
    /// Replaces the stored message `message_id` with what `rewrite` makes of it;
    /// `SessionNotFound` / `AgentNotFound` / `MessageNotFound` when there is none.
    fn update_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
        rewrite: Rewrite<'_, SessionMessage>,
    ) -> Result<(), SessionError>;
    fn list_messages(
        &self,
        session_id: &str,
        agent_id: &str,
        limit: Option<usize>,
        offset: usize,
    ) -> Result<Vec<SessionMessage>, SessionError>;

    /// Messages with an id below `before` (every one when `None`), the newest `limit` of them, in
    /// id order; reads only those.
    fn list_messages_before(
        &self,
        session_id: &str,
        agent_id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<SessionMessage>, SessionError>;

    /// The lowest id a new message of the agent may take, whatever is listed (see
    /// [`SessionStore::message_id_floor`](crate::store::SessionStore::message_id_floor)); 0
    /// unless the backend keeps ids it does not list.
    fn message_id_floor(&self, session_id: &str, agent_id: &str) -> Result<u64, SessionError> {
        let _ = (session_id, agent_id);
        Ok(0)
    }

    fn list_sessions(&self) -> Result<Vec<SessionInfo>, SessionError>;
    /// The session's listing entry, from what the backend keeps beside it (never its messages).
    fn session_info(&self, session_id: &str) -> Result<Option<SessionInfo>, SessionError>;

    /// Writes what the backend deferred about the session durably (see
    /// [`SessionStore::flush_session`](crate::store::SessionStore::flush_session)).
    fn flush_session(&self, session_id: &str) -> Result<(), SessionError> {
        let _ = session_id;
        Ok(())
    }

    /// Does what the backend left for later about the session (see
    /// [`SessionStore::tidy_session`](crate::store::SessionStore::tidy_session)).
    fn tidy_session(&self, session_id: &str) -> Result<(), SessionError> {
        let _ = session_id;
        Ok(())
    }

    /// Whether `tidy_session` has anything to do (see
    /// [`SessionStore::tidy_pending`](crate::store::SessionStore::tidy_pending)); never blocks on
    /// the disk.
    fn tidy_pending(&self, session_id: &str) -> bool {
        let _ = session_id;
        false
    }

    /// `flush_session` for a closing session (see
    /// [`SessionStore::close_session`](crate::store::SessionStore::close_session)).
    fn close_session(&self, session_id: &str) -> Result<(), SessionError> {
        self.flush_session(session_id)
    }

    /// Appends `record`, an event object that already carries its `"v"`.
    fn append_event(&self, session_id: &str, record: &Value) -> Result<(), SessionError>;
    fn read_events(&self, session_id: &str) -> Result<Vec<Value>, SessionError>;
    /// Stores `events` (objects with their `"v"`), then `messages`, as one durable write (see
    /// [`SessionStore::append_batch`](crate::store::SessionStore::append_batch)).
    fn append_batch(
        &self,
        session_id: &str,
        agent_id: &str,
        events: &[Value],
        messages: &[SessionMessage],
    ) -> Result<(), SessionError>;

    fn write_meta(&self, session_id: &str, meta: &SessionMeta) -> Result<(), SessionError>;
    fn read_meta(&self, session_id: &str) -> Result<Option<SessionMeta>, SessionError>;

    /// Creates the whole session so that a reader sees it complete or not at all.
    fn create_complete_session(&self, new: &NewSession) -> Result<(), SessionError>;
}
