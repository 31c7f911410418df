//! Helpers of the hub core tests: a core on a temporary store with a scripted fake model, and
//! readers of turn and event streams with deadlines.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tau_api::config::RoleConfig;
use taud::hub::{
    CoreOptions, CoreSetup, EventKind, EventStream, HubCore, OpenTarget, SessionEvent,
    SharedModelFactory, StartTurn, TurnStream,
};
use taud::store::{Durability, SessionBackends, SessionStoreConfig};
use taud::testing::{FakeModel, FakeReply};

pub const DEADLINE: Duration = Duration::from_secs(10);
pub const BACKENDS: [&str; 2] = ["file", "sqlite"];

pub struct Fixture {
    pub dir: std::path::PathBuf,
    pub model: Arc<FakeModel>,
    pub core: HubCore,
    pub backend: &'static str,
    /// Declared last, so dropped last: what writes into it is gone first.
    pub _dir: crate::support::temp::TestDir,
}

pub fn options() -> CoreOptions {
    let mut options = CoreOptions::default();
    for role in ["brain", "fast"] {
        options.roles.insert(
            role.to_owned(),
            RoleConfig {
                provider: "fake".into(),
                model_id: format!("{role}-model"),
                max_tokens: 100,
                cache: None,
                fallback: None,
                tuning: Default::default(),
            },
        );
    }
    options
}

pub fn setup(
    dir: &std::path::Path,
    backend: &str,
    model: &Arc<FakeModel>,
    options: CoreOptions,
) -> CoreSetup {
    CoreSetup {
        options,
        backend: backend.to_owned(),
        store: SessionStoreConfig {
            sessions_dir: dir.join("sessions"),
            sqlite_path: dir.join("sessions.db"),
            durability: Durability::NoSync,
        },
        backends: SessionBackends::builtin(),
        factory: Arc::new(SharedModelFactory(Arc::clone(model) as _)),
    }
}

pub async fn fixture_with(
    backend: &'static str,
    replies: Vec<FakeReply>,
    options: CoreOptions,
) -> Fixture {
    fixture_in(crate::support::temp::dir(), backend, replies, options).await
}

/// A fixture whose store lives in `dir`, which the fixture owns from then on (files the caller
/// put there for `options`, such as a routines file, live as long as the core).
pub async fn fixture_in(
    dir: crate::support::temp::TestDir,
    backend: &'static str,
    replies: Vec<FakeReply>,
    options: CoreOptions,
) -> Fixture {
    let model = Arc::new(FakeModel::scripted(replies));
    let core = setup(dir.path(), backend, &model, options)
        .start()
        .await
        .unwrap();
    Fixture {
        dir: dir.path().to_path_buf(),
        model,
        core,
        backend,
        _dir: dir,
    }
}

pub async fn fixture(backend: &'static str, replies: Vec<FakeReply>) -> Fixture {
    fixture_with(backend, replies, options()).await
}

impl Fixture {
    pub async fn new_session(&self) -> String {
        self.core
            .open_session(OpenTarget::New, None, "terminal", None)
            .await
            .unwrap()
            .session
            .session_id
    }

    pub async fn turn(&self, session_id: &str, text: &str, channel: &str) -> TurnStream {
        self.core
            .start_turn(StartTurn {
                session_id: session_id.to_owned(),
                text: text.to_owned(),
                channel: channel.to_owned(),
                idempotency_key: String::new(),
            })
            .await
            .unwrap()
    }
}

pub async fn next_turn_event(stream: &mut TurnStream) -> Option<Arc<SessionEvent>> {
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("a turn event in time")
        .expect("not lagged")
}

pub async fn drain(stream: &mut TurnStream) -> Vec<Arc<SessionEvent>> {
    let mut events = Vec::new();
    while let Some(event) = next_turn_event(stream).await {
        events.push(event);
    }
    events
}

pub async fn next_event(stream: &mut EventStream) -> Arc<SessionEvent> {
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("an event in time")
        .expect("not lagged")
        .expect("the stream goes on")
}

pub fn names(events: &[Arc<SessionEvent>]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

pub fn ended_text(events: &[Arc<SessionEvent>]) -> String {
    match &events.last().unwrap().kind {
        EventKind::TurnEnded(end) => end.text.clone(),
        other => panic!("the last event is {other:?}"),
    }
}

/// Reads turn events up to the approval question and returns its id.
pub async fn until_approval(stream: &mut TurnStream) -> String {
    loop {
        let event = next_turn_event(stream)
            .await
            .expect("an approval before the end");
        if let EventKind::ApprovalRequested(info) = &event.kind {
            return info.request.approval_id.clone();
        }
    }
}

pub fn lamp() -> FakeReply {
    FakeReply::tool_call(
        "demo_physical_action",
        json!({"action": "turn on the lamp"}),
    )
}
