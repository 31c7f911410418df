//! A turn's end is reported only once its reply is in the store: through the in-process hub core
//! over a file store whose write of the reply is slow, `TurnEnded` reaches the turn's stream after
//! that write returned, and over one that refuses the write, the turn does not end as a normal
//! answer and the reply is not on record.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::hooked_store::{Hooked, StoreHooks};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use taud::hub::{CoreOptions, EventKind, HubCore, SharedModelFactory, StartTurn};
use taud::message::Role;
use taud::model::StopReason;
use taud::store::{
    DEFAULT_AGENT_ID, Durability, FileSessionStore, SessionError, SessionMessage, SessionStore,
    create_fresh_session,
};
use taud::testing::{FakeModel, FakeReply};

/// The reply the model gives, so the store can tell its write apart.
const REPLY: &str = "the reply under test";

/// Hooks under which a file store takes its time over (or refuses) writing the model's reply,
/// and says when that write returned.
struct SlowReplies {
    refuse: bool,
    reply_written: AtomicBool,
}

impl StoreHooks for SlowReplies {
    fn create_message(
        &self,
        inner: &FileSessionStore,
        session_id: &str,
        agent_id: &str,
        message: &SessionMessage,
    ) -> Result<(), SessionError> {
        let is_reply =
            message.message.role == Role::Assistant && message.message.text().contains(REPLY);
        if !is_reply {
            return inner.create_message(session_id, agent_id, message);
        }
        if self.refuse {
            return Err(SessionError::Io {
                path: "journal.jsonl".into(),
                source: std::io::Error::other("No space left on device"),
            });
        }
        // Long enough that a hub reporting the end before this returns is caught.
        std::thread::sleep(Duration::from_millis(300));
        let written = inner.create_message(session_id, agent_id, message);
        self.reply_written.store(written.is_ok(), Ordering::SeqCst);
        written
    }
}

/// Runs one text turn over `SlowReplies`; returns the turn's end, whether the reply's write had
/// returned when the end arrived, and the stored messages' texts.
async fn one_turn(refuse: bool) -> (taud::agent::TurnEnd, bool, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let files = FileSessionStore::open(dir.path().join("sessions"), Durability::NoSync).unwrap();
    let session_id = create_fresh_session(&files).unwrap().session_id;
    let store = Arc::new(Hooked {
        inner: files,
        hooks: SlowReplies {
            refuse,
            reply_written: AtomicBool::new(false),
        },
    });
    let model = Arc::new(FakeModel::scripted([FakeReply::text(REPLY)]));
    let factory = Arc::new(SharedModelFactory(model as _));
    let core = HubCore::new(
        Arc::clone(&store) as Arc<dyn SessionStore>,
        CoreOptions::default(),
        factory,
    )
    .unwrap();
    core.start().await.unwrap();
    let mut turn = core
        .start_turn(StartTurn {
            session_id: session_id.clone(),
            text: "hello".into(),
            channel: "terminal".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap();
    let end = loop {
        let event = tokio::time::timeout(Duration::from_secs(10), turn.next())
            .await
            .unwrap()
            .unwrap()
            .expect("the turn ends");
        if let EventKind::TurnEnded(end) = &event.kind {
            break end.clone();
        }
    };
    let written_at_end = store.reply_written.load(Ordering::SeqCst);
    let stored = store
        .inner
        .list_messages(&session_id, DEFAULT_AGENT_ID, None, 0)
        .unwrap()
        .into_iter()
        .map(|m| m.message.text())
        .collect();
    (end, written_at_end, stored)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_end_is_reported_only_after_its_reply_is_stored() {
    let (end, written_at_end, stored) = one_turn(false).await;
    assert_eq!(end.stop_reason, StopReason::EndTurn, "{end:?}");
    assert!(
        written_at_end,
        "TurnEnded arrived before the store had the reply"
    );
    assert!(stored.iter().any(|t| t.contains(REPLY)), "{stored:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_the_store_refuses_does_not_end_as_a_normal_answer() {
    let (end, _, stored) = one_turn(true).await;
    assert_ne!(
        end.stop_reason,
        StopReason::EndTurn,
        "a reply that is not on record ended as an answer: {end:?}"
    );
    assert!(!stored.iter().any(|t| t.contains(REPLY)), "{stored:?}");
}
