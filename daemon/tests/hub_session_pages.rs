//! `GetSession` by the page on both session backends: a session's summary comes from the store's
//! count without reading its messages, and pages walk the messages from the newest end with a
//! cursor, a default size and a cap. Also: the file store's session record follows a turn's end
//! (a burst of turns shares one write) and the store shows the turn's messages before that.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::hub::*;
use taud::hub::{DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MessageSelection, SessionDetail};
use taud::message::Message;
use taud::store::{
    DEFAULT_AGENT_ID, Durability, SessionBackends, SessionMessage, SessionStore,
    SessionStoreConfig, now_utc, open_session_store,
};
use taud::testing::FakeReply;

/// A second store on the fixture's data, to write what a long life of turns would have.
fn store_of(f: &Fixture) -> std::sync::Arc<dyn SessionStore> {
    let config = SessionStoreConfig {
        sessions_dir: f.dir.join("sessions"),
        sqlite_path: f.dir.join("sessions.db"),
        durability: Durability::NoSync,
    };
    open_session_store(&SessionBackends::builtin(), f.backend, &config).unwrap()
}

async fn session_of(f: &Fixture, messages: u64) -> String {
    let id = f.new_session().await;
    let store = store_of(f);
    if store.read_agent(&id, DEFAULT_AGENT_ID).unwrap().is_none() {
        let agent = taud::store::SessionAgent::new(
            DEFAULT_AGENT_ID,
            taud::store::ContextMode::Sliding,
            now_utc(),
        );
        store.create_agent(&id, &agent).unwrap();
    }
    for n in 0..messages {
        let text = format!("m{n}");
        let message = if n % 2 == 0 {
            Message::user_text(&text)
        } else {
            Message::assistant_text(&text)
        };
        store
            .create_message(
                &id,
                DEFAULT_AGENT_ID,
                &SessionMessage::new(n, message, now_utc()),
            )
            .unwrap();
    }
    id
}

fn indexes(detail: &SessionDetail) -> Vec<u64> {
    detail.messages.iter().map(|(index, _, _)| *index).collect()
}

async fn page(f: &Fixture, id: &str, size: usize, before: Option<u64>) -> SessionDetail {
    f.core
        .get_session_with(id, MessageSelection::Page { size, before })
        .await
        .unwrap()
}

#[tokio::test]
async fn pages_walk_a_session_from_its_newest_message() {
    for backend in BACKENDS {
        let f = fixture(backend, vec![]).await;
        let id = session_of(&f, 25).await;
        let first = page(&f, &id, 10, None).await;
        assert_eq!(first.summary.message_count, 25, "{backend}");
        assert_eq!(
            indexes(&first),
            (15..25).rev().collect::<Vec<_>>(),
            "{backend}"
        );
        assert_eq!(first.messages[0].1.text(), "m24");
        assert_eq!(first.next_before, Some(15));
        let second = page(&f, &id, 10, first.next_before).await;
        assert_eq!(indexes(&second), (5..15).rev().collect::<Vec<_>>());
        let last = page(&f, &id, 10, second.next_before).await;
        assert_eq!(indexes(&last), [4, 3, 2, 1, 0]);
        assert_eq!(last.next_before, None, "{backend}: the last page says so");
        // A page ending exactly at the first message is the last one too.
        let exact = page(&f, &id, 5, Some(5)).await;
        assert_eq!((indexes(&exact).len(), exact.next_before), (5, None));
        // Whole reads are unchanged: every message, oldest first, no cursor.
        let all = f.core.get_session(&id, true).await.unwrap();
        assert_eq!(indexes(&all), (0..25).collect::<Vec<_>>());
        assert_eq!(all.next_before, None);
        let none = f.core.get_session(&id, false).await.unwrap();
        assert!(none.messages.is_empty());
        assert_eq!(none.summary.message_count, 25);
    }
}

#[tokio::test]
async fn a_page_has_a_default_size_and_a_cap() {
    for backend in BACKENDS {
        let f = fixture(backend, vec![]).await;
        let count = MAX_PAGE_SIZE as u64 + 10;
        let id = session_of(&f, count).await;
        let default = page(&f, &id, 0, None).await;
        assert_eq!(default.messages.len(), DEFAULT_PAGE_SIZE, "{backend}");
        assert_eq!(default.next_before, Some(count - DEFAULT_PAGE_SIZE as u64));
        let capped = page(&f, &id, usize::MAX, None).await;
        assert_eq!(capped.messages.len(), MAX_PAGE_SIZE, "{backend}");
        assert_eq!(capped.next_before, Some(10));
        let empty = session_of(&f, 0).await;
        let nothing = page(&f, &empty, 5, None).await;
        assert!(nothing.messages.is_empty() && nothing.next_before.is_none());
        assert!(matches!(
            f.core
                .get_session_with(
                    "20990101-000000-dead",
                    MessageSelection::Page {
                        size: 1,
                        before: None
                    }
                )
                .await,
            Err(taud::hub::CoreError::NotFound(_))
        ));
    }
}

/// The file store keeps each message in its own file: one made unreadable shows which reads
/// touch it. The summary and a page above it do not; a whole read does and says so.
#[tokio::test]
async fn the_summary_and_a_newer_page_never_read_older_messages() {
    let f = fixture("file", vec![]).await;
    let id = session_of(&f, 30).await;
    let oldest = f
        .dir
        .join("sessions")
        .join(&id)
        .join("agents/tau/messages/000000.json");
    std::fs::write(&oldest, b"not json").unwrap();
    let summary = f.core.summary(&id).await.unwrap();
    assert_eq!(summary.message_count, 30);
    let newest = page(&f, &id, 10, None).await;
    assert_eq!(indexes(&newest)[0], 29);
    let events = f.core.subscribe(&id, None, "terminal").await.unwrap();
    assert_eq!(events.snapshot().session.message_count, 30);
    drop(events);
    let whole = f.core.get_session(&id, true).await;
    assert!(whole.is_err(), "a whole read reads the damaged file");
}

#[tokio::test]
async fn the_session_record_is_on_disk_once_a_turn_ended() {
    let f = fixture(
        "file",
        vec![FakeReply::text("hi"), FakeReply::text("again")],
    )
    .await;
    let id = f.new_session().await;
    let on_disk = || -> u64 {
        let path = f.dir.join("sessions").join(&id).join("session.json");
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        record["message_count"].as_u64().unwrap()
    };
    for (turn, text) in ["hello", "and again"].into_iter().enumerate() {
        let mut stream = f.turn(&id, text, "terminal").await;
        drain(&mut stream).await;
        let expected = 2 * (turn as u64 + 1);
        assert_eq!(f.core.summary(&id).await.unwrap().message_count, expected);
        // The record follows the turn's end within the record interval (1 s by default).
        let deadline = std::time::Instant::now() + DEADLINE;
        while on_disk() != expected {
            assert!(
                std::time::Instant::now() < deadline,
                "session.json never caught up"
            );
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
}

/// Turns closer together than the record interval share one write of the session's record; the
/// store shows the current count meanwhile, and closing the session writes it at once.
#[tokio::test]
async fn a_burst_of_turns_writes_the_session_record_once_and_closing_writes_the_rest() {
    let options = taud::hub::CoreOptions {
        session_record_interval: std::time::Duration::from_secs(3600),
        ..options()
    };
    let replies = ["one", "two", "three"].map(FakeReply::text).to_vec();
    let f = fixture_with("file", replies, options).await;
    let id = f.new_session().await;
    let path = f.dir.join("sessions").join(&id).join("session.json");
    let on_disk = || -> u64 {
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        record["message_count"].as_u64().unwrap()
    };
    let wait_for = |expected: u64| async move {
        let deadline = std::time::Instant::now() + DEADLINE;
        while on_disk() != expected {
            assert!(
                std::time::Instant::now() < deadline,
                "session.json stayed at {}",
                on_disk()
            );
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    };
    // The first turn's record is written as it ends.
    drain(&mut f.turn(&id, "hello", "terminal").await).await;
    wait_for(2).await;
    // The next ones wait for the interval, while every read shows them.
    for text in ["and", "again"] {
        drain(&mut f.turn(&id, text, "terminal").await).await;
    }
    assert_eq!(f.core.summary(&id).await.unwrap().message_count, 6);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(on_disk(), 2, "a turn within the interval wrote the record");
    // Closing the session writes what waits.
    f.core.shutdown().await;
    wait_for(6).await;
}
