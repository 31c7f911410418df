//! [`CheckedStore`], the one implementation of [`SessionStore`] over the built-in backends: it
//! checks what the contract asks of every call and hands the backend ([`StoreBackend`]) only
//! checked input. See ARCHITECTURE.md (store).
//!
//! Invariants: every id is validated before the backend is called, so before any I/O; every
//! record written is stamped `v = FORMAT_VERSION` and every event gets its `"v"`
//! ([`event_record`]); every record read back (or read to be rewritten) is refused if its version
//! is newer than this code's ([`check_version`]), named where the backend keeps it; an update keeps
//! what the contract says it keeps (an agent's `created_at`, a message's original text).

use std::borrow::Cow;

use serde_json::Value;

use crate::store::backend::{RecordKey, StoreBackend};
use crate::store::contract::{NewSession, SessionStore, event_record};
use crate::store::id::validate_id;
use crate::store::meta::SessionMeta;
use crate::store::records::{
    FORMAT_VERSION, Session, SessionAgent, SessionInfo, SessionMessage, check_version, now_utc,
};
use crate::store::store_error::{IdKind, SessionError};

/// A record with a format version.
trait Versioned: Clone {
    fn version(&self) -> u32;
    fn set_version(&mut self, version: u32);
}

macro_rules! versioned {
    ($($record:ty),*) => {$(
        impl Versioned for $record {
            fn version(&self) -> u32 {
                self.v
            }
            fn set_version(&mut self, version: u32) {
                self.v = version;
            }
        }
    )*};
}

versioned!(Session, SessionAgent, SessionMessage, SessionMeta);

/// `record` as written: with `v = FORMAT_VERSION` (copied only when it says otherwise).
fn stamped<T: Versioned>(record: &T) -> Cow<'_, T> {
    if record.version() == FORMAT_VERSION {
        Cow::Borrowed(record)
    } else {
        let mut record = record.clone();
        record.set_version(FORMAT_VERSION);
        Cow::Owned(record)
    }
}

/// A whole new session as written: every record stamped.
fn stamped_session(new: &NewSession) -> Cow<'_, NewSession> {
    let current = |v: u32| v == FORMAT_VERSION;
    if current(new.session.v)
        && current(new.agent.v)
        && current(new.meta.v)
        && new.messages.iter().all(|message| current(message.v))
    {
        return Cow::Borrowed(new);
    }
    let mut new = new.clone();
    new.session.v = FORMAT_VERSION;
    new.agent.v = FORMAT_VERSION;
    new.meta.v = FORMAT_VERSION;
    for message in &mut new.messages {
        message.v = FORMAT_VERSION;
    }
    Cow::Owned(new)
}

fn session_id(id: &str) -> Result<(), SessionError> {
    validate_id(IdKind::Session, id)
}

fn agent_ids(session_id: &str, agent_id: &str) -> Result<(), SessionError> {
    validate_id(IdKind::Session, session_id)?;
    validate_id(IdKind::Agent, agent_id)
}

/// A backend under the contract's checks; what the registry hands out as `Arc<dyn SessionStore>`.
pub struct CheckedStore<B> {
    backend: B,
}

impl<B: StoreBackend> CheckedStore<B> {
    pub(crate) fn new(backend: B) -> Self {
        Self { backend }
    }

    pub(crate) fn backend(&self) -> &B {
        &self.backend
    }

    /// `record` if its version is one this code reads.
    fn readable<T: Versioned>(&self, record: T, key: RecordKey<'_>) -> Result<T, SessionError> {
        if record.version() > FORMAT_VERSION {
            check_version(record.version(), self.backend.record_location(key))?;
        }
        Ok(record)
    }

    /// Refuses a listing holding a message newer than this code reads, naming it.
    fn newer_refused(
        &self,
        session_id: &str,
        agent_id: &str,
        messages: &[SessionMessage],
    ) -> Result<(), SessionError> {
        if let Some(newer) = messages.iter().find(|m| m.v > FORMAT_VERSION) {
            let key = RecordKey::Message {
                session_id,
                agent_id,
                message_id: newer.message_id,
            };
            check_version(newer.v, self.backend.record_location(key))?;
        }
        Ok(())
    }

    fn readable_opt<T: Versioned>(
        &self,
        record: Option<T>,
        key: RecordKey<'_>,
    ) -> Result<Option<T>, SessionError> {
        record.map(|record| self.readable(record, key)).transpose()
    }
}

impl<B: StoreBackend> SessionStore for CheckedStore<B> {
    fn backend_name(&self) -> &str {
        self.backend.backend_name()
    }

    fn create_session(&self, session: &Session) -> Result<(), SessionError> {
        session_id(&session.session_id)?;
        self.backend.create_session(&stamped(session))
    }

    fn read_session(&self, session_id: &str) -> Result<Option<Session>, SessionError> {
        self::session_id(session_id)?;
        let record = self.backend.read_session(session_id)?;
        self.readable_opt(record, RecordKey::Session { session_id })
    }

    fn create_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        agent_ids(session_id, &agent.agent_id)?;
        self.backend.create_agent(session_id, &stamped(agent))
    }

    fn read_agent(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Result<Option<SessionAgent>, SessionError> {
        agent_ids(session_id, agent_id)?;
        let record = self.backend.read_agent(session_id, agent_id)?;
        self.readable_opt(
            record,
            RecordKey::Agent {
                session_id,
                agent_id,
            },
        )
    }

    fn update_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        let agent_id = agent.agent_id.as_str();
        agent_ids(session_id, agent_id)?;
        let key = RecordKey::Agent {
            session_id,
            agent_id,
        };
        let rewrite = |stored: SessionAgent| {
            let stored = self.readable(stored, key)?;
            let mut record = agent.clone();
            record.v = FORMAT_VERSION;
            record.created_at = stored.created_at;
            record.updated_at = now_utc();
            Ok(record)
        };
        self.backend.update_agent(session_id, agent_id, &rewrite)
    }

    fn create_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        agent_ids(session_id, agent_id)?;
        self.backend
            .create_message(session_id, agent_id, &stamped(message))
    }

    fn read_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
    ) -> Result<Option<SessionMessage>, SessionError> {
        agent_ids(session_id, agent_id)?;
        let record = self
            .backend
            .read_message(session_id, agent_id, message_id)?;
        self.readable_opt(
            record,
            RecordKey::Message {
                session_id,
                agent_id,
                message_id,
            },
        )
    }

    fn update_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        agent_ids(session_id, agent_id)?;
        let message_id = message.message_id;
        let Some(redaction) = &message.redact_message else {
            return Err(SessionError::NotARedaction {
                session_id: session_id.to_owned(),
                message_id,
            });
        };
        let key = RecordKey::Message {
            session_id,
            agent_id,
            message_id,
        };
        // Only the redaction is taken from `message`: the stored text is never overwritten.
        let rewrite = |stored: SessionMessage| {
            let mut record = self.readable(stored, key)?;
            record.v = FORMAT_VERSION;
            record.redact_message = Some(redaction.clone());
            record.updated_at = now_utc();
            Ok(record)
        };
        self.backend
            .update_message(session_id, agent_id, message_id, &rewrite)
    }

    fn list_messages(
        &self,
        session_id: &str,
        agent_id: &str,
        limit: Option<usize>,
        offset: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        agent_ids(session_id, agent_id)?;
        let messages = self
            .backend
            .list_messages(session_id, agent_id, limit, offset)?;
        self.newer_refused(session_id, agent_id, &messages)?;
        Ok(messages)
    }

    fn list_messages_before(
        &self,
        session_id: &str,
        agent_id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        agent_ids(session_id, agent_id)?;
        let messages = self
            .backend
            .list_messages_before(session_id, agent_id, before, limit)?;
        self.newer_refused(session_id, agent_id, &messages)?;
        Ok(messages)
    }

    fn message_id_floor(&self, session_id: &str, agent_id: &str) -> Result<u64, SessionError> {
        agent_ids(session_id, agent_id)?;
        self.backend.message_id_floor(session_id, agent_id)
    }

    fn list_sessions(&self) -> Result<Vec<SessionInfo>, SessionError> {
        self.backend.list_sessions()
    }

    fn session_info(&self, session_id: &str) -> Result<Option<SessionInfo>, SessionError> {
        self::session_id(session_id)?;
        self.backend.session_info(session_id)
    }

    fn flush_session(&self, session_id: &str) -> Result<(), SessionError> {
        self::session_id(session_id)?;
        self.backend.flush_session(session_id)
    }

    fn tidy_session(&self, session_id: &str) -> Result<(), SessionError> {
        self::session_id(session_id)?;
        self.backend.tidy_session(session_id)
    }

    fn tidy_pending(&self, session_id: &str) -> bool {
        self::session_id(session_id).is_ok() && self.backend.tidy_pending(session_id)
    }

    fn close_session(&self, session_id: &str) -> Result<(), SessionError> {
        self::session_id(session_id)?;
        self.backend.close_session(session_id)
    }

    fn append_event(&self, session_id: &str, event: &Value) -> Result<(), SessionError> {
        self::session_id(session_id)?;
        self.backend.append_event(session_id, &event_record(event)?)
    }

    fn read_events(&self, session_id: &str) -> Result<Vec<Value>, SessionError> {
        self::session_id(session_id)?;
        self.backend.read_events(session_id)
    }

    fn append_batch(
        &self,
        session_id: &str,
        agent_id: &str,
        events: &[Value],
        messages: &[SessionMessage],
    ) -> Result<(), SessionError> {
        agent_ids(session_id, agent_id)?;
        let events = events
            .iter()
            .map(event_record)
            .collect::<Result<Vec<_>, _>>()?;
        // Copied only when one needs its version stamped (the hub's are current).
        if messages.iter().all(|m| m.version() == FORMAT_VERSION) {
            return self
                .backend
                .append_batch(session_id, agent_id, &events, messages);
        }
        let messages: Vec<SessionMessage> =
            messages.iter().map(|m| stamped(m).into_owned()).collect();
        self.backend
            .append_batch(session_id, agent_id, &events, &messages)
    }

    fn write_meta(&self, session_id: &str, meta: &SessionMeta) -> Result<(), SessionError> {
        self::session_id(session_id)?;
        self.backend.write_meta(session_id, &stamped(meta))
    }

    fn read_meta(&self, session_id: &str) -> Result<Option<SessionMeta>, SessionError> {
        self::session_id(session_id)?;
        let record = self.backend.read_meta(session_id)?;
        self.readable_opt(record, RecordKey::Meta { session_id })
    }

    fn create_complete_session(&self, new: &NewSession) -> Result<(), SessionError> {
        new.check_order()?;
        agent_ids(&new.session.session_id, &new.agent.agent_id)?;
        self.backend.create_complete_session(&stamped_session(new))
    }
}

#[cfg(test)]
mod tests;
