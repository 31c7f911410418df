//! The file backend's pages of the newest messages: read by id from the session's message count
//! once a listing showed the agent's files all below it, and by a listing again whenever the files
//! say otherwise (a file removed or added behind the store's back, ids that are not positions).

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use taud::store::{
    ContextMode, Durability, FileSessionStore, SessionAgent, SessionMessage, SessionStore,
    create_fresh_session, now_utc,
};

use support::store::user_message;

fn store(dir: &Path) -> FileSessionStore {
    FileSessionStore::open(dir.join("sessions"), Durability::NoSync).unwrap()
}

/// A session whose agent `tau` has a message for each of `ids`, flushed; and its messages
/// directory.
fn session_with(store: &FileSessionStore, dir: &Path, ids: &[u64]) -> (String, PathBuf) {
    let id = create_fresh_session(store).unwrap().session_id;
    store
        .create_agent(
            &id,
            &SessionAgent::new("tau", ContextMode::Sliding, now_utc()),
        )
        .unwrap();
    for &n in ids {
        store
            .create_message(&id, "tau", &user_message(n, &format!("m{n}")))
            .unwrap();
    }
    store.flush_session(&id).unwrap();
    let messages = dir.join("sessions").join(&id).join("agents/tau/messages");
    (id, messages)
}

fn page(store: &dyn SessionStore, id: &str, before: Option<u64>, limit: usize) -> Vec<u64> {
    let page: Vec<SessionMessage> = store
        .list_messages_before(id, "tau", before, limit)
        .unwrap();
    for message in &page {
        assert_eq!(
            message.message.text(),
            format!("m{}", message.message_id),
            "each record is the one its id names"
        );
    }
    page.iter().map(|m| m.message_id).collect()
}

#[test]
fn a_file_removed_behind_the_store_makes_the_page_list_the_directory() {
    let dir = crate::support::temp::dir();
    let store = store(dir.path());
    let (id, messages) = session_with(&store, dir.path(), &(0..10).collect::<Vec<_>>());
    // The first page lists the directory; the next ones are read by id: the same answers.
    for _ in 0..2 {
        assert_eq!(page(&store, &id, None, 3), [7, 8, 9]);
        assert_eq!(page(&store, &id, Some(2), 3), [0, 1]);
        assert_eq!(page(&store, &id, Some(40), 2), [8, 9]);
        assert!(page(&store, &id, None, 0).is_empty());
    }
    // A gap: the page by id misses a file it expects and lists instead.
    fs::remove_file(messages.join("000008.json")).unwrap();
    assert_eq!(page(&store, &id, None, 3), [6, 7, 9]);
    assert_eq!(page(&store, &id, Some(9), 2), [6, 7]);
    assert_eq!(
        page(&store, &id, None, 1),
        [9],
        "a page that misses no file"
    );
    // Appends after the gap are paged right as well.
    store
        .create_message(&id, "tau", &user_message(10, "m10"))
        .unwrap();
    assert_eq!(page(&store, &id, None, 3), [7, 9, 10]);
    assert_eq!(
        page(&store, &id, None, 100),
        [0, 1, 2, 3, 4, 5, 6, 7, 9, 10]
    );
}

#[test]
fn a_file_past_the_count_makes_the_page_list_the_directory() {
    let dir = crate::support::temp::dir();
    let store = store(dir.path());
    let (id, messages) = session_with(&store, dir.path(), &[0, 1, 2, 3]);
    assert_eq!(page(&store, &id, None, 2), [2, 3]);
    // Someone writes message 4 behind the store's back: the count (4) is behind its files.
    let mut record: Value =
        serde_json::from_slice(&fs::read(messages.join("000003.json")).unwrap()).unwrap();
    record["message_id"] = 4.into();
    record["message"]["content"][0]["text"] = "m4".into();
    fs::write(
        messages.join("000004.json"),
        serde_json::to_vec(&record).unwrap(),
    )
    .unwrap();
    assert_eq!(page(&store, &id, None, 2), [3, 4]);
    assert_eq!(page(&store, &id, None, 2), [3, 4], "and keeps listing");
    assert_eq!(page(&store, &id, Some(4), 2), [2, 3]);
}

#[test]
fn ids_that_are_not_positions_are_paged_from_a_listing_after_a_reopen() {
    let dir = crate::support::temp::dir();
    let (id, _) = session_with(&store(dir.path()), dir.path(), &[1, 2, 3, 5]);
    // Reopened, the count is the number of files (4): every id from 2 to 3 has its file, but
    // the newest is 5.
    let store = store(dir.path());
    assert_eq!(store.session_info(&id).unwrap().unwrap().message_count, 4);
    for _ in 0..2 {
        assert_eq!(page(&store, &id, None, 2), [3, 5]);
        assert_eq!(page(&store, &id, Some(5), 2), [2, 3]);
        assert_eq!(page(&store, &id, Some(4), 9), [1, 2, 3]);
    }
}
