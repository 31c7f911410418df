//! The file backend's checkpoints and tidies (`journal.rs`, `checkpoint.rs`): when a journal is
//! emptied, that its emptying needs no sync of its own (a crash that lost it replays to the same
//! records), that tidies write files beside appends and reads without losing or hiding a record,
//! and that a session created whole carries its empty journal until it closes.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::fs;

use serde_json::json;
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, FileSessionStore, SessionAgent, SessionError, SessionStore,
    now_utc,
};

use support::store::{
    assistant_message, closed_file_fixture, open_file_store, stored_event_types, stored_texts,
    user_message,
};

/// A flush checkpoints a journal whose materialized files pass 512 (`CHECKPOINT_UNSYNCED`), long
/// before 512 batches or 30 s: the paths to sync are what a session holds in memory meanwhile.
#[test]
fn a_journal_with_many_files_to_sync_is_emptied_at_a_flush() {
    let (dir, id, session_dir) = closed_file_fixture();
    let journal = session_dir.join("journal.jsonl");
    let store = open_file_store(dir.path());
    let mut emptied_after = None;
    // Four messages a batch, as a tool turn stores them.
    for batch in 0..300u64 {
        let first = 2 + batch * 4;
        let messages: Vec<_> = (first..first + 4)
            .map(|n| user_message(n, "hello"))
            .collect();
        store
            .append_batch(&id, DEFAULT_AGENT_ID, &[], &messages)
            .unwrap();
        store.flush_session(&id).unwrap();
        if fs::metadata(&journal).unwrap().len() == 0 {
            emptied_after = Some(batch + 1);
            break;
        }
    }
    let batches = emptied_after.expect("the journal was emptied");
    assert!(
        (126..=129).contains(&batches),
        "emptied after {batches} batches"
    );
    assert_eq!(stored_texts(&store, &id).len() as u64, batches * 4 + 2);
}

/// A checkpoint empties its journal without a sync of its own: a crash before the session's next
/// append may find the journal whole again, and its replay changes nothing (every record it holds
/// is in a synced file already).
#[test]
fn a_journal_whose_emptying_a_crash_lost_replays_without_a_change() {
    let (dir, id, session_dir) = closed_file_fixture();
    let journal = session_dir.join("journal.jsonl");
    let store = open_file_store(dir.path());
    for n in 2..6 {
        store
            .append_batch(
                &id,
                DEFAULT_AGENT_ID,
                &[json!({"type": "turn", "n": n})],
                &[user_message(n, "hello")],
            )
            .unwrap();
    }
    for n in 0..508 {
        store
            .append_event(&id, &json!({"type": "tick", "n": n}))
            .unwrap();
    }
    let kept = fs::read(&journal).unwrap();
    store.flush_session(&id).unwrap();
    assert_eq!(
        fs::metadata(&journal).unwrap().len(),
        0,
        "512 batches: emptied"
    );
    let texts_before = stored_texts(&store, &id);
    let events_before = fs::read(session_dir.join("events.jsonl")).unwrap();
    assert_eq!(texts_before.len(), 6);
    std::mem::forget(store);

    // The emptying lost: the journal as it was before the checkpoint.
    fs::write(&journal, &kept).unwrap();
    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id), texts_before);
    assert_eq!(
        fs::read(session_dir.join("events.jsonl")).unwrap(),
        events_before,
        "no event twice, none lost"
    );
    assert!(!journal.exists(), "replayed and removed");
    assert!(
        fs::read_dir(&session_dir).unwrap().all(|entry| !entry
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("damaged")),
        "nothing set aside"
    );
}

/// Tidies write files without the lock appends take, beside the appends: every read still finds
/// every message journaled before it, and an id being written is still taken.
#[test]
fn appends_and_reads_beside_tidies_see_every_message() {
    let (dir, id, _) = closed_file_fixture();
    let store = open_file_store(dir.path());
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                store.tidy_session(&id).unwrap();
            }
        });
        for turn in 1..=150u64 {
            let first = turn * 2;
            store
                .append_batch(
                    &id,
                    DEFAULT_AGENT_ID,
                    &[json!({"type": "turn", "n": turn})],
                    &[
                        user_message(first, "question"),
                        assistant_message(first + 1, "answer"),
                    ],
                )
                .unwrap();
            let retaken =
                store.create_message(&id, DEFAULT_AGENT_ID, &user_message(first, "again"));
            assert!(
                matches!(retaken, Err(SessionError::MessageExists { .. })),
                "{retaken:?}"
            );
            if turn % 10 == 0 {
                assert_eq!(
                    stored_texts(&store, &id).len() as u64,
                    first + 2,
                    "turn {turn}"
                );
                assert_eq!(stored_event_types(&store, &id).len() as u64, turn + 1);
            }
        }
        done.store(true, std::sync::atomic::Ordering::Release);
    });
    store.close_session(&id).unwrap();
    drop(store);
    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id).len(), 302);
    assert_eq!(stored_event_types(&store, &id).len(), 151);
}

/// A session created whole gets its journal, empty, with its other files (its first append then
/// syncs no directory); closing it removes the journal, with or without a turn, and a journal
/// that holds records is never removed by a close that did not checkpoint it.
#[test]
fn a_session_created_whole_has_its_journal_until_it_closes() {
    let dir = crate::support::temp::dir();
    let store = open_file_store(dir.path());
    let new_session = |store: &FileSessionStore| {
        taud::store::create_fresh_complete_session(
            store,
            SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now_utc()),
            Vec::new(),
            taud::store::SessionMeta::default(),
        )
        .unwrap()
    };
    let idle = new_session(&store);
    let idle_journal = dir
        .path()
        .join("sessions")
        .join(&idle)
        .join("journal.jsonl");
    assert_eq!(
        fs::metadata(&idle_journal).unwrap().len(),
        0,
        "created empty"
    );
    store.close_session(&idle).unwrap();
    assert!(!idle_journal.exists(), "removed at close");

    let busy = new_session(&store);
    let journal = dir
        .path()
        .join("sessions")
        .join(&busy)
        .join("journal.jsonl");
    store
        .create_message(&busy, DEFAULT_AGENT_ID, &user_message(0, "hello"))
        .unwrap();
    assert!(fs::metadata(&journal).unwrap().len() > 0, "appended to");
    std::mem::forget(store);

    // A close in another process, which appended nothing: a crash's journal is kept for its
    // replay, which the next read makes.
    let store = open_file_store(dir.path());
    store.close_session(&busy).unwrap();
    assert!(fs::metadata(&journal).unwrap().len() > 0, "kept");
    assert_eq!(stored_texts(&store, &busy), ["hello"]);
    assert!(!journal.exists(), "replayed and removed");
}
