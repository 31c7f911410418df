//! A stored message id at the top of its range (a damaged or hand-made store): opening the
//! session fails cleanly naming it instead of overflowing, and a session whose next id is the
//! last one runs its turn to an end with the store's refusal instead of overflowing the ids of
//! the turn's messages. Nothing panics.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use support::props::{ID, fill, panics};
use taud::hub::{CoreError, OpenTarget, StartTurn};
use taud::store::{DEFAULT_AGENT_ID, Durability, FileSessionStore};
use taud::testing::{FakeModel, FakeReply};

/// A store whose session `ID` ends with a message of id `last`.
fn store_ending_at(dir: &std::path::Path, last: u64) {
    let sessions = dir.join("sessions");
    let store = FileSessionStore::open(&sessions, Durability::NoSync).unwrap();
    fill(&store);
    let messages = sessions
        .join(ID)
        .join("agents")
        .join(DEFAULT_AGENT_ID)
        .join("messages");
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(messages.join("000003.json")).unwrap()).unwrap();
    record["message_id"] = last.into();
    std::fs::write(
        messages.join(format!("{last:06}.json")),
        serde_json::to_vec(&record).unwrap(),
    )
    .unwrap();
}

async fn core(dir: &std::path::Path) -> taud::hub::HubCore {
    let model = Arc::new(FakeModel::scripted(
        (0..3).map(|i| FakeReply::text(format!("reply {i}"))),
    ));
    support::hub::setup(dir, "file", &model, support::hub::options())
        .start()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_last_message_id_at_the_top_of_its_range_fails_the_open_naming_the_session() {
    let before = panics().load(Ordering::SeqCst);
    let tmp = crate::support::temp::dir();
    store_ending_at(tmp.path(), u64::MAX);
    let core = core(tmp.path()).await;
    let err = core
        .open_session(OpenTarget::Id(ID.into()), None, "terminal", None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CoreError::Unavailable(m) if m.contains(ID) && m.contains("18446744073709551615")),
        "{err:?}"
    );
    assert_eq!(
        panics().load(Ordering::SeqCst),
        before,
        "something panicked"
    );
    core.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_message_ids_would_pass_the_top_ends_without_overflowing() {
    let before = panics().load(Ordering::SeqCst);
    let tmp = crate::support::temp::dir();
    store_ending_at(tmp.path(), u64::MAX - 1);
    let core = core(tmp.path()).await;
    core.open_session(OpenTarget::Id(ID.into()), None, "terminal", None)
        .await
        .unwrap();
    let mut stream = core
        .start_turn(StartTurn {
            session_id: ID.into(),
            text: "hello".into(),
            channel: "terminal".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap();
    let events = support::hub::drain(&mut stream).await;
    assert_eq!(
        support::hub::names(&events).last().copied(),
        Some("turn_ended")
    );
    assert_eq!(
        panics().load(Ordering::SeqCst),
        before,
        "something panicked"
    );
    core.shutdown().await;
}
