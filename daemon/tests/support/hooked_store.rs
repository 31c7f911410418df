//! [`Hooked`]: a file store with a test's [`StoreHooks`] on the few calls a test watches or
//! breaks (listing sessions, writing a message, an event or the metadata, reading events). Every
//! other required call goes to the file store as is; the calls the store contract gives defaults
//! for keep those defaults, so a batch is written record by record through the hooks.
#![allow(dead_code)]

use std::ops::Deref;

use serde_json::Value;
use taud::store::{
    FileSessionStore, Session, SessionAgent, SessionError, SessionInfo, SessionMessage,
    SessionMeta, SessionStore,
};

/// What a test puts between the hub and the file store; each hook defaults to the file store.
pub trait StoreHooks: Send + Sync {
    fn list_sessions(&self, inner: &FileSessionStore) -> Result<Vec<SessionInfo>, SessionError> {
        inner.list_sessions()
    }
    fn create_message(
        &self,
        inner: &FileSessionStore,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        inner.create_message(session_id, agent_id, message)
    }
    fn append_event(
        &self,
        inner: &FileSessionStore,
        session_id: &str,
        event: &Value,
    ) -> Result<(), SessionError> {
        inner.append_event(session_id, event)
    }
    fn read_events(
        &self,
        inner: &FileSessionStore,
        session_id: &str,
    ) -> Result<Vec<Value>, SessionError> {
        inner.read_events(session_id)
    }
    fn write_meta(
        &self,
        inner: &FileSessionStore,
        session_id: &str,
        meta: &SessionMeta,
    ) -> Result<(), SessionError> {
        inner.write_meta(session_id, meta)
    }
}

/// A file store seen through `hooks` (which it derefs to, so a test reads its counters directly).
pub struct Hooked<H> {
    pub inner: FileSessionStore,
    pub hooks: H,
}

impl<H> Deref for Hooked<H> {
    type Target = H;
    fn deref(&self) -> &H {
        &self.hooks
    }
}

impl<H: StoreHooks> SessionStore for Hooked<H> {
    fn backend_name(&self) -> &str {
        self.inner.backend_name()
    }
    fn create_session(&self, session: &Session) -> Result<(), SessionError> {
        self.inner.create_session(session)
    }
    fn read_session(&self, session_id: &str) -> Result<Option<Session>, SessionError> {
        self.inner.read_session(session_id)
    }
    fn create_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        self.inner.create_agent(session_id, agent)
    }
    fn read_agent(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Result<Option<SessionAgent>, SessionError> {
        self.inner.read_agent(session_id, agent_id)
    }
    fn update_agent(&self, session_id: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        self.inner.update_agent(session_id, agent)
    }
    fn create_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        self.hooks
            .create_message(&self.inner, session_id, agent_id, message)
    }
    fn read_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message_id: u64,
    ) -> Result<Option<SessionMessage>, SessionError> {
        self.inner.read_message(session_id, agent_id, message_id)
    }
    fn update_message(
        &self,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        self.inner.update_message(session_id, agent_id, message)
    }
    fn list_messages(
        &self,
        session_id: &str,
        agent_id: &str,
        limit: Option<usize>,
        offset: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        self.inner
            .list_messages(session_id, agent_id, limit, offset)
    }
    fn list_sessions(&self) -> Result<Vec<SessionInfo>, SessionError> {
        self.hooks.list_sessions(&self.inner)
    }
    fn append_event(&self, session_id: &str, event: &Value) -> Result<(), SessionError> {
        self.hooks.append_event(&self.inner, session_id, event)
    }
    fn read_events(&self, session_id: &str) -> Result<Vec<Value>, SessionError> {
        self.hooks.read_events(&self.inner, session_id)
    }
    fn write_meta(&self, session_id: &str, meta: &SessionMeta) -> Result<(), SessionError> {
        self.hooks.write_meta(&self.inner, session_id, meta)
    }
    fn read_meta(&self, session_id: &str) -> Result<Option<SessionMeta>, SessionError> {
        self.inner.read_meta(session_id)
    }
}
