//! A turn's end is reported only once its reply is in the store: through the in-process hub core
//! over a file store whose write of the reply is slow, `TurnEnded` reaches the turn's stream after
//! that write returned, and over one that refuses the write, the turn does not end as a normal
//! answer and the reply is not on record. The session's title is not waited for: it follows the
//! turn, reads of the session wait for it, a clean close leaves it stored, and a title whose write
//! was lost comes back from the first user message.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::hooked_store::{Hooked, StoreHooks};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use taud::hub::{CoreOptions, EventKind, HubCore, SharedModelFactory, StartTurn};
use taud::message::Role;
use taud::model::StopReason;
use taud::store::{
    DEFAULT_AGENT_ID, Durability, FileSessionStore, SessionError, SessionMessage, SessionMeta,
    SessionStore, create_fresh_session,
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
    let dir = crate::support::temp::dir();
    let hooks = SlowReplies {
        refuse,
        reply_written: AtomicBool::new(false),
    };
    let (store, core, session_id) = hooked_hub(dir.path(), hooks, 1).await;
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

/// Hooks that hold a title's write until the test opens the gate, or refuse the first one.
#[derive(Default)]
struct TitleGate {
    refuse_first: bool,
    open: Mutex<bool>,
    opened: Condvar,
    /// Title writes that reached the store (held ones once let through).
    written: AtomicUsize,
    refused: AtomicBool,
}

impl TitleGate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl StoreHooks for TitleGate {
    fn write_meta(
        &self,
        inner: &FileSessionStore,
        session_id: &str,
        meta: &SessionMeta,
    ) -> Result<(), SessionError> {
        if meta.title.is_some() {
            if self.refuse_first && !self.refused.swap(true, Ordering::SeqCst) {
                return Err(SessionError::Io {
                    path: "meta.json".into(),
                    source: std::io::Error::other("No space left on device"),
                });
            }
            let open = self.open.lock().unwrap();
            let _open = self.opened.wait_while(open, |open| !*open).unwrap();
            self.written.fetch_add(1, Ordering::SeqCst);
        }
        inner.write_meta(session_id, meta)
    }
}

/// A hub over a file store seen through `hooks`, whose model gives `replies` replies of
/// [`REPLY`], and a session in it (made without metadata, as OpenSession's is untitled).
async fn hooked_hub<H: StoreHooks + 'static>(
    dir: &std::path::Path,
    hooks: H,
    replies: usize,
) -> (Arc<Hooked<H>>, HubCore, String) {
    let files = FileSessionStore::open(dir.join("sessions"), Durability::NoSync).unwrap();
    let session_id = create_fresh_session(&files).unwrap().session_id;
    let store = Arc::new(Hooked {
        inner: files,
        hooks,
    });
    let model = Arc::new(FakeModel::scripted(vec![FakeReply::text(REPLY); replies]));
    let factory = Arc::new(SharedModelFactory(model as _));
    let core = HubCore::new(
        Arc::clone(&store) as Arc<dyn SessionStore>,
        CoreOptions::default(),
        factory,
    )
    .unwrap();
    core.start().await.unwrap();
    (store, core, session_id)
}

/// Runs one turn with `text` to its end (within 10 s each event).
async fn turn_to_end(core: &HubCore, session_id: &str, text: &str) -> taud::agent::TurnEnd {
    let mut turn = core
        .start_turn(StartTurn {
            session_id: session_id.to_owned(),
            text: text.into(),
            channel: "terminal".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), turn.next())
            .await
            .expect("the turn's end does not wait for the title")
            .unwrap()
            .expect("the turn ends");
        if let EventKind::TurnEnded(end) = &event.kind {
            return end.clone();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_title_follows_the_turn_and_is_read_and_stored_once_written() {
    let dir = crate::support::temp::dir();
    let (store, core, id) = hooked_hub(dir.path(), TitleGate::default(), 1).await;
    let end = turn_to_end(&core, &id, "lamp  status").await;
    assert_eq!(end.stop_reason, StopReason::EndTurn, "{end:?}");
    assert_eq!(
        store.written.load(Ordering::SeqCst),
        0,
        "the turn ended while its title's write was held"
    );
    // A read of the session waits for the title's write.
    let reader = {
        let core = core.clone();
        let id = id.clone();
        tokio::spawn(async move { core.get_session(&id, false).await.unwrap().summary.title })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!reader.is_finished(), "the read did not wait for the title");
    store.open();
    assert_eq!(reader.await.unwrap(), "lamp status");
    let listed = core.list_sessions(0, "terminal", None).await.unwrap();
    assert_eq!(listed[0].title, "lamp status");
    core.shutdown().await;
    let stored = store.inner.read_meta(&id).unwrap().unwrap_or_default();
    assert_eq!(stored.title.as_deref(), Some("lamp status"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_title_whose_write_was_lost_comes_back_from_the_first_user_message() {
    let dir = crate::support::temp::dir();
    let gate = TitleGate {
        refuse_first: true,
        ..TitleGate::default()
    };
    gate.open();
    let (store, core, id) = hooked_hub(dir.path(), gate, 2).await;
    turn_to_end(&core, &id, "first words").await;
    let title = core.get_session(&id, false).await.unwrap().summary.title;
    assert_eq!(title, "", "the store refused the title");
    turn_to_end(&core, &id, "something else").await;
    let title = core.get_session(&id, false).await.unwrap().summary.title;
    assert_eq!(title, "first words");
    assert_eq!(store.written.load(Ordering::SeqCst), 1);
    core.shutdown().await;
}
