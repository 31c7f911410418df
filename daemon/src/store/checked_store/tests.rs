//! The checks of `CheckedStore` against a spy backend: ids before any I/O, versions stamped on
//! every write, newer records refused where the backend keeps them.

use std::sync::Mutex;

use serde_json::json;

use super::*;
use crate::message::Message;
use crate::store::backend::Rewrite;
use crate::store::context_mode::ContextMode;

/// A backend that keeps the version of every record it is given and hands out records of
/// version `served`.
struct Spy {
    seen: Mutex<Vec<String>>,
    served: u32,
}

impl Spy {
    fn new(served: u32) -> CheckedStore<Self> {
        CheckedStore::new(Self {
            seen: Mutex::new(Vec::new()),
            served,
        })
    }

    fn saw(&self, what: &str, v: u32) -> Result<(), SessionError> {
        self.seen.lock().unwrap().push(format!("{what} v{v}"));
        Ok(())
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn session(&self) -> Session {
        let mut session = Session::new("s", now_utc());
        session.v = self.served;
        session
    }

    fn agent(&self) -> SessionAgent {
        let mut agent = SessionAgent::new("a", ContextMode::Sliding, now_utc());
        agent.v = self.served;
        agent
    }

    fn message(&self, id: u64) -> SessionMessage {
        let mut message = SessionMessage::new(id, Message::user_text("hi"), now_utc());
        message.v = self.served;
        message
    }
}

impl StoreBackend for Spy {
    fn backend_name(&self) -> &'static str {
        "spy"
    }
    fn record_location(&self, record: RecordKey<'_>) -> String {
        format!("spy {record:?}")
    }
    fn create_session(&self, session: &Session) -> Result<(), SessionError> {
        self.saw("session", session.v)
    }
    fn read_session(&self, _: &str) -> Result<Option<Session>, SessionError> {
        Ok(Some(self.session()))
    }
    fn create_agent(&self, _: &str, agent: &SessionAgent) -> Result<(), SessionError> {
        self.saw("agent", agent.v)
    }
    fn read_agent(&self, _: &str, _: &str) -> Result<Option<SessionAgent>, SessionError> {
        Ok(Some(self.agent()))
    }
    fn update_agent(
        &self,
        _: &str,
        _: &str,
        rewrite: Rewrite<'_, SessionAgent>,
    ) -> Result<(), SessionError> {
        let record = rewrite(self.agent())?;
        self.saw("updated agent", record.v)
    }
    fn create_message(
        &self,
        _: &str,
        _: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        self.saw("message", message.v)
    }
    fn read_message(
        &self,
        _: &str,
        _: &str,
        id: u64,
    ) -> Result<Option<SessionMessage>, SessionError> {
        Ok(Some(self.message(id)))
    }
    fn update_message(
        &self,
        _: &str,
        _: &str,
        id: u64,
        rewrite: Rewrite<'_, SessionMessage>,
    ) -> Result<(), SessionError> {
        let record = rewrite(self.message(id))?;
        self.saw("redacted message", record.v)
    }
    fn list_messages(
        &self,
        _: &str,
        _: &str,
        _: Option<usize>,
        _: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        Ok(vec![self.message(0), self.message(1)])
    }
    fn list_messages_before(
        &self,
        _: &str,
        _: &str,
        _: Option<u64>,
        _: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        Ok(vec![self.message(4), self.message(5)])
    }
    fn list_sessions(&self) -> Result<Vec<SessionInfo>, SessionError> {
        Ok(Vec::new())
    }
    fn session_info(&self, _: &str) -> Result<Option<SessionInfo>, SessionError> {
        Ok(None)
    }
    fn append_event(&self, _: &str, record: &Value) -> Result<(), SessionError> {
        let v = record["v"].as_u64().and_then(|v| u32::try_from(v).ok());
        self.saw("event", v.unwrap_or(0))
    }
    fn read_events(&self, _: &str) -> Result<Vec<Value>, SessionError> {
        Ok(Vec::new())
    }
    fn append_batch(
        &self,
        session_id: &str,
        _: &str,
        events: &[Value],
        messages: &[SessionMessage],
    ) -> Result<(), SessionError> {
        for event in events {
            self.append_event(session_id, event)?;
        }
        for message in messages {
            self.saw("batched message", message.v)?;
        }
        Ok(())
    }
    fn write_meta(&self, _: &str, meta: &SessionMeta) -> Result<(), SessionError> {
        self.saw("meta", meta.v)
    }
    fn read_meta(&self, _: &str) -> Result<Option<SessionMeta>, SessionError> {
        Ok(Some(SessionMeta {
            v: self.served,
            ..SessionMeta::default()
        }))
    }
    fn create_complete_session(&self, new: &NewSession) -> Result<(), SessionError> {
        self.saw("whole session", new.session.v)?;
        self.saw("whole agent", new.agent.v)?;
        self.saw("whole meta", new.meta.v)?;
        for message in &new.messages {
            self.saw("whole message", message.v)?;
        }
        Ok(())
    }
}

#[test]
fn a_bad_id_never_reaches_the_backend() {
    let store = Spy::new(FORMAT_VERSION);
    let spy = store.backend();
    let message = spy.message(0);
    let bad = ["", "..", "a/b", ".hidden", "é"];
    for id in bad {
        let mut session = spy.session();
        session.session_id = id.to_owned();
        let mut agent = spy.agent();
        agent.agent_id = id.to_owned();
        let results = [
            store.create_session(&session),
            store.read_session(id).map(drop),
            store.create_agent(id, &spy.agent()),
            store.create_agent("s", &agent),
            store.read_agent("s", id).map(drop),
            store.update_agent(id, &spy.agent()),
            store.update_agent("s", &agent),
            store.create_message(id, "a", &message),
            store.create_message("s", id, &message),
            store.read_message(id, "a", 0).map(drop),
            store.update_message("s", id, &message),
            store.list_messages(id, "a", None, 0).map(drop),
            store.list_messages_before(id, "a", None, 9).map(drop),
            store.list_messages_before("s", id, Some(3), 9).map(drop),
            store.session_info(id).map(drop),
            store.append_event(id, &json!({})),
            store.read_events(id).map(drop),
            store.write_meta(id, &SessionMeta::default()),
            store.read_meta(id).map(drop),
            store.create_complete_session(&NewSession {
                session: session.clone(),
                agent: spy.agent(),
                messages: Vec::new(),
                meta: SessionMeta::default(),
            }),
        ];
        for (call, result) in results.into_iter().enumerate() {
            assert!(
                matches!(result, Err(SessionError::InvalidId { .. })),
                "call {call} with {id:?}: {result:?}"
            );
        }
    }
    assert!(spy.seen().is_empty(), "{:?}", spy.seen());
}

#[test]
fn every_record_written_is_stamped_with_the_format_version() {
    let store = Spy::new(FORMAT_VERSION);
    let old = Spy::new(0);
    let old = old.backend();
    store.create_session(&old.session()).unwrap();
    store.create_agent("s", &old.agent()).unwrap();
    store.update_agent("s", &old.agent()).unwrap();
    store.create_message("s", "a", &old.message(0)).unwrap();
    let mut redaction = old.message(0);
    redaction.redact_message = Some(Message::user_text("gone"));
    store.update_message("s", "a", &redaction).unwrap();
    store.append_event("s", &json!({"type": "x"})).unwrap();
    store
        .append_batch("s", "a", &[json!({"type": "y"})], &[old.message(1)])
        .unwrap();
    let meta = SessionMeta {
        v: 0,
        ..SessionMeta::default()
    };
    store.write_meta("s", &meta).unwrap();
    store
        .create_complete_session(&NewSession {
            session: old.session(),
            agent: old.agent(),
            messages: vec![old.message(0)],
            meta,
        })
        .unwrap();
    assert_eq!(
        store.backend().seen(),
        [
            "session",
            "agent",
            "updated agent",
            "message",
            "redacted message",
            "event",
            "event",
            "batched message",
            "meta",
            "whole session",
            "whole agent",
            "whole meta",
            "whole message",
        ]
        .map(|what| format!("{what} v{FORMAT_VERSION}"))
    );
}

#[test]
fn a_newer_record_is_refused_where_the_backend_keeps_it() {
    let store = Spy::new(FORMAT_VERSION + 1);
    let newer = |result: Result<(), SessionError>, kept: &str| match result {
        Err(SessionError::UnsupportedFormat { location, .. }) => {
            assert!(location.contains(kept), "{location}")
        }
        other => panic!("{kept}: {other:?}"),
    };
    newer(store.read_session("s").map(drop), "Session");
    newer(store.read_agent("s", "a").map(drop), "Agent");
    newer(store.read_message("s", "a", 3).map(drop), "message_id: 3");
    newer(
        store.list_messages("s", "a", None, 0).map(drop),
        "message_id: 0",
    );
    newer(
        store.list_messages_before("s", "a", None, 2).map(drop),
        "message_id: 4",
    );
    newer(store.read_meta("s").map(drop), "Meta");
    // An update never rewrites a record it cannot read.
    newer(store.update_agent("s", &store.backend().agent()), "Agent");
    let mut redaction = store.backend().message(0);
    redaction.redact_message = Some(Message::user_text("gone"));
    newer(store.update_message("s", "a", &redaction), "Message");
    assert!(store.backend().seen().is_empty());
}
