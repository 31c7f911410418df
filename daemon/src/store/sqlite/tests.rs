use super::*;

use std::sync::Arc;
use std::thread;
use std::time::Instant;

use crate::message::Message;
use crate::store::context_mode::ContextMode;
use crate::store::contract::SessionStore;
use crate::store::records::{DEFAULT_AGENT_ID, now_utc};

fn store_in(dir: &Path) -> SqliteSessionStore {
    SqliteSessionStore::open(dir.join("sessions.db"), Durability::Full).unwrap()
}

/// A new session with its default agent.
fn session_with_agent(store: &SqliteSessionStore, id: &str) {
    store.create_session(&Session::new(id, now_utc())).unwrap();
    store
        .create_agent(
            id,
            &SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now_utc()),
        )
        .unwrap();
}

fn message(id: u64) -> SessionMessage {
    SessionMessage::new(id, Message::user_text(format!("message {id}")), now_utc())
}

fn count(store: &SqliteSessionStore, id: &str) -> u64 {
    store.session_info(id).unwrap().unwrap().message_count
}

fn wait_staged(store: &SqliteSessionStore, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.backend().writer.staged() != n {
        assert!(Instant::now() < deadline, "never saw {n} staged writes");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn message_exists_in_a_batch_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(store_in(dir.path()));
    session_with_agent(&store, "one");
    session_with_agent(&store, "two");
    store
        .create_message("two", DEFAULT_AGENT_ID, &message(0))
        .unwrap();
    let held = store.backend().writer.hold_commits();
    let first = {
        let store = Arc::clone(&store);
        thread::spawn(move || store.create_message("one", DEFAULT_AGENT_ID, &message(0)))
    };
    wait_staged(&store, 1);
    let again = store.create_message("two", DEFAULT_AGENT_ID, &message(0));
    assert!(
        matches!(
            again,
            Err(SessionError::MessageExists { message_id: 0, .. })
        ),
        "{again:?}"
    );
    drop(held);
    first.join().unwrap().unwrap();
    assert_eq!(count(&store, "one"), 1);
    assert_eq!(count(&store, "two"), 1);
}

#[test]
fn reads_do_not_wait_for_a_commit_and_see_only_committed_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(store_in(dir.path()));
    session_with_agent(&store, "one");
    let held = store.backend().writer.hold_commits();
    let staged = {
        let store = Arc::clone(&store);
        thread::spawn(move || store.create_message("one", DEFAULT_AGENT_ID, &message(0)))
    };
    wait_staged(&store, 1);
    // The write connection holds an open transaction; the readers go on without it.
    assert_eq!(count(&store, "one"), 0);
    assert!(
        store
            .list_messages("one", DEFAULT_AGENT_ID, None, 0)
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.list_sessions().unwrap().len(), 1);
    assert!(!staged.is_finished(), "a staged write waits for its commit");
    drop(held);
    staged.join().unwrap().unwrap();
    assert_eq!(count(&store, "one"), 1);
}

#[test]
fn many_sessions_writing_at_once_each_see_their_own_messages() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(store_in(dir.path()));
    let sessions: Vec<String> = (0..8).map(|n| format!("s{n}")).collect();
    for id in &sessions {
        session_with_agent(&store, id);
    }
    let threads: Vec<_> = sessions
        .iter()
        .cloned()
        .map(|id| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                for n in 0..20 {
                    store
                        .create_message(&id, DEFAULT_AGENT_ID, &message(n))
                        .unwrap();
                    store
                        .append_event(&id, &serde_json::json!({"n": n}))
                        .unwrap();
                    let seen = store.list_messages(&id, DEFAULT_AGENT_ID, None, 0).unwrap();
                    assert_eq!(seen.len() as u64, n + 1, "{id} after message {n}");
                    assert_eq!(seen.last().map(|m| m.message_id), Some(n));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    for id in &sessions {
        assert_eq!(count(&store, id), 20);
        assert_eq!(store.read_events(id).unwrap().len(), 20);
    }
    assert!(store.backend().readers.open_connections() <= 3);
    // Reopened (as after a restart), everything is there.
    drop(store);
    let store = store_in(dir.path());
    for id in &sessions {
        assert_eq!(
            store
                .list_messages(id, DEFAULT_AGENT_ID, None, 0)
                .unwrap()
                .len(),
            20
        );
    }
}

#[test]
fn a_batch_is_one_commit_and_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    session_with_agent(&store, "one");
    let before = store.backend().writer.commits();
    let event = serde_json::json!({"type": "tool_call"});
    store
        .append_batch(
            "one",
            DEFAULT_AGENT_ID,
            std::slice::from_ref(&event),
            &[message(0), message(1)],
        )
        .unwrap();
    assert_eq!(store.backend().writer.commits(), before + 1);
    assert_eq!(count(&store, "one"), 2);

    // A taken id rolls the whole batch back: neither the event nor the new message stays.
    let refused = store.append_batch("one", DEFAULT_AGENT_ID, &[event], &[message(2), message(1)]);
    assert!(matches!(
        refused,
        Err(SessionError::MessageExists { message_id: 1, .. })
    ));
    assert_eq!(count(&store, "one"), 2);
    assert_eq!(store.read_events("one").unwrap().len(), 1);
    assert!(
        store
            .read_message("one", DEFAULT_AGENT_ID, 2)
            .unwrap()
            .is_none()
    );
}

#[test]
fn batches_number_their_events_on_and_count_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    session_with_agent(&store, "one");
    let event = |n: u32| serde_json::json!({"type": "tool_call", "n": n});
    store
        .append_batch(
            "one",
            DEFAULT_AGENT_ID,
            &[event(0), event(1)],
            &[message(0), message(1), message(2)],
        )
        .unwrap();
    store.append_event("one", &event(2)).unwrap();
    store
        .append_batch("one", DEFAULT_AGENT_ID, &[event(3)], &[message(3)])
        .unwrap();
    let numbers: Vec<u64> = store
        .read_events("one")
        .unwrap()
        .iter()
        .map(|e| e["n"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [0, 1, 2, 3]);
    assert_eq!(count(&store, "one"), 4);
}

/// Commits never checkpoint the WAL on the way (the database file keeps its size while the
/// WAL grows); a tidy does, once enough commits gathered, and only then says it has work.
#[test]
fn the_wal_is_checkpointed_by_a_tidy_not_by_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    session_with_agent(&store, "s1");
    let db = dir.path().join("sessions.db");
    let checkpointed = store.backend().checkpoint.run().unwrap().unwrap();
    assert_eq!(checkpointed.copied, checkpointed.log);
    store.backend().writer.checkpointed(usize::MAX);
    let size = std::fs::metadata(&db).unwrap().len();
    for id in 0..wal_checkpoint::CHECKPOINT_COMMITS as u64 - 1 {
        store
            .append_batch("s1", DEFAULT_AGENT_ID, &[], &[message(id)])
            .unwrap();
    }
    assert!(!store.tidy_pending("s1"), "not due yet");
    store.tidy_session("s1").unwrap();
    assert_eq!(
        std::fs::metadata(&db).unwrap().len(),
        size,
        "nothing copied"
    );
    store
        .append_batch("s1", DEFAULT_AGENT_ID, &[], &[message(999)])
        .unwrap();
    assert_eq!(
        std::fs::metadata(&db).unwrap().len(),
        size,
        "every commit stayed in the WAL"
    );
    assert!(store.tidy_pending("s1"), "due");
    store.tidy_session("s1").unwrap();
    assert!(std::fs::metadata(&db).unwrap().len() > size, "copied in");
    assert!(!store.tidy_pending("s1"), "done");
    let stored = store
        .list_messages("s1", DEFAULT_AGENT_ID, None, 0)
        .unwrap();
    assert_eq!(stored.len(), wal_checkpoint::CHECKPOINT_COMMITS);
}
