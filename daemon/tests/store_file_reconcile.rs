//! The file backend after a crash: a session whose `session.json` (and listing) stayed behind its
//! message files is brought in line when it is opened or listed, on disk too, and the temporary
//! files a killed write left are removed; nothing else is.
//!
//! A crash is made exactly: the records a write would leave behind are saved before the write and
//! put back after it, as if the process had died between the message file and the rest.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use taud::store::{
    DEFAULT_AGENT_ID, Durability, FileSessionStore, SessionStore, create_fresh_session,
};

use support::store::{session_with_agent, user_message};

const INDEX: &str = ".sessions-index.jsonl";
const CLEAN_STOP: &str = ".clean-stop";

fn open(dir: &Path) -> FileSessionStore {
    FileSessionStore::open(dir.join("sessions"), Durability::Full).unwrap()
}

/// A session with `stored` messages whose message file `stored` was written but neither its
/// `session.json` nor its index line (a kill right after the message file); returns its id and
/// directory.
fn crashed_after_the_message_file(dir: &Path, stored: u64) -> (String, PathBuf) {
    let store = open(dir);
    let id = session_with_agent(&store);
    for n in 0..stored {
        store
            .create_message(&id, DEFAULT_AGENT_ID, &user_message(n, "before"))
            .unwrap();
    }
    store.flush_session(&id).unwrap();
    let session_dir = dir.join("sessions").join(&id);
    let session_json = fs::read(session_dir.join("session.json")).unwrap();
    let index = fs::read(dir.join("sessions").join(INDEX)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(stored, "the last"))
        .unwrap();
    store.flush_session(&id).unwrap();
    fs::write(session_dir.join("session.json"), session_json).unwrap();
    fs::write(dir.join("sessions").join(INDEX), index).unwrap();
    drop(store);
    crashed(dir);
    (id, session_dir)
}

/// Takes away the clean-stop mark the closing store left: a crash leaves none.
fn crashed(dir: &Path) {
    fs::remove_file(dir.join("sessions").join(CLEAN_STOP)).unwrap();
}

fn stored_count(session_dir: &Path) -> u64 {
    let record: Value =
        serde_json::from_slice(&fs::read(session_dir.join("session.json")).unwrap()).unwrap();
    record["message_count"].as_u64().unwrap()
}

/// The message count of the index's last line for `id`.
fn index_count(dir: &Path, id: &str) -> u64 {
    let text = fs::read_to_string(dir.join("sessions").join(INDEX)).unwrap();
    text.lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["session_id"] == id)
        .unwrap()["message_count"]
        .as_u64()
        .unwrap()
}

fn listed_count(store: &dyn SessionStore, id: &str) -> u64 {
    store
        .list_sessions()
        .unwrap()
        .into_iter()
        .find(|s| s.session_id == id)
        .unwrap()
        .message_count
}

#[test]
fn opening_a_session_sets_its_count_to_the_message_files_on_disk() {
    let dir = crate::support::temp::dir();
    let (id, session_dir) = crashed_after_the_message_file(dir.path(), 2);
    assert_eq!(stored_count(&session_dir), 2, "the crash was not made");
    let before: Value =
        serde_json::from_slice(&fs::read(session_dir.join("session.json")).unwrap()).unwrap();

    let store = open(dir.path());
    let session = store.read_session(&id).unwrap().unwrap();
    assert_eq!(stored_count(&session_dir), 3);
    assert_eq!(index_count(dir.path(), &id), 3);
    assert_eq!(listed_count(&store, &id), 3);
    // The listing order follows the message that was written last.
    let last = store
        .read_message(&id, DEFAULT_AGENT_ID, 2)
        .unwrap()
        .unwrap();
    assert_eq!(session.updated_at, last.created_at);
    assert!(before["updated_at"].as_str().unwrap() < session.updated_at.to_string().as_str());
    // The next append counts from there (on disk once flushed; at once for this store).
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(3, "after"))
        .unwrap();
    assert_eq!(listed_count(&store, &id), 4);
    assert_eq!(stored_count(&session_dir), 3);
    store.flush_session(&id).unwrap();
    assert_eq!(stored_count(&session_dir), 4);
    assert_eq!(listed_count(&open(dir.path()), &id), 4);
}

/// A turn's messages are durable at once and its session's record follows at the flush: a
/// crash before the flush (the store never closed) leaves a session the next open counts whole,
/// with the values the running store showed.
#[test]
fn a_crash_before_the_turn_flush_loses_no_count() {
    let dir = crate::support::temp::dir();
    let (id, session_dir) = crashed_after_the_message_file(dir.path(), 2);
    let store = open(dir.path());
    store.read_session(&id).unwrap();
    for n in 3..7 {
        store
            .create_message(&id, DEFAULT_AGENT_ID, &user_message(n, "unflushed"))
            .unwrap();
    }
    let shown = store.read_session(&id).unwrap().unwrap();
    let shown_info = store.session_info(&id).unwrap().unwrap();
    assert_eq!(shown_info.message_count, 7);
    assert_eq!(listed_count(&store, &id), 7);
    assert_eq!(stored_count(&session_dir), 3, "nothing flushed yet");
    // Killed: no flush, no close.
    std::mem::forget(store);
    let reopened = open(dir.path());
    assert_eq!(reopened.read_session(&id).unwrap(), Some(shown));
    assert_eq!(reopened.session_info(&id).unwrap(), Some(shown_info));
    assert_eq!(stored_count(&session_dir), 7);
    assert_eq!(index_count(dir.path(), &id), 7);
    assert_eq!(listed_count(&reopened, &id), 7);
}

/// The flush's index line is not fsynced: a power cut may lose it while `session.json` stays.
/// The next process's first listing finds the index behind and records the session again.
#[test]
fn an_index_line_lost_after_the_flush_is_recorded_again() {
    let dir = crate::support::temp::dir();
    let (id, session_dir) = crashed_after_the_message_file(dir.path(), 1);
    let store = open(dir.path());
    store.read_session(&id).unwrap();
    let index = fs::read(dir.path().join("sessions").join(INDEX)).unwrap();
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "flushed"))
        .unwrap();
    store.flush_session(&id).unwrap();
    assert_eq!(stored_count(&session_dir), 3);
    std::mem::forget(store);
    fs::write(dir.path().join("sessions").join(INDEX), index).unwrap();
    assert_eq!(index_count(dir.path(), &id), 2, "the line was not lost");
    let reopened = open(dir.path());
    assert_eq!(listed_count(&reopened, &id), 3);
    assert_eq!(index_count(dir.path(), &id), 3);
}

/// A store that closes between turns writes what it deferred.
#[test]
fn closing_the_store_writes_the_deferred_record() {
    let dir = crate::support::temp::dir();
    let (id, session_dir) = crashed_after_the_message_file(dir.path(), 1);
    let store = open(dir.path());
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "unflushed"))
        .unwrap();
    assert_eq!(stored_count(&session_dir), 2);
    drop(store);
    assert_eq!(stored_count(&session_dir), 3);
    assert_eq!(index_count(dir.path(), &id), 3);
}

#[test]
fn listing_first_sets_the_count_to_the_message_files_on_disk() {
    let dir = crate::support::temp::dir();
    let (id, session_dir) = crashed_after_the_message_file(dir.path(), 1);
    let store = open(dir.path());
    assert_eq!(listed_count(&store, &id), 2);
    assert_eq!(stored_count(&session_dir), 2);
    assert_eq!(index_count(dir.path(), &id), 2);
    // A later process finds everything in line and rewrites nothing.
    let written = fs::read(session_dir.join("session.json")).unwrap();
    let index = fs::read(dir.path().join("sessions").join(INDEX)).unwrap();
    let again = open(dir.path());
    assert_eq!(listed_count(&again, &id), 2);
    again.read_session(&id).unwrap().unwrap();
    assert_eq!(fs::read(session_dir.join("session.json")).unwrap(), written);
    assert_eq!(
        fs::read(dir.path().join("sessions").join(INDEX)).unwrap(),
        index
    );
}

#[test]
fn a_listing_behind_a_right_session_json_is_brought_in_line() {
    let dir = crate::support::temp::dir();
    let store = open(dir.path());
    let id = session_with_agent(&store);
    let index_path = dir.path().join("sessions").join(INDEX);
    let index = fs::read(&index_path).unwrap();
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(0, "one"))
        .unwrap();
    // session.json has the message, the index not (as an older version could leave it).
    fs::write(&index_path, index).unwrap();
    assert_eq!(index_count(dir.path(), &id), 0);

    let reopened = open(dir.path());
    assert_eq!(listed_count(&reopened, &id), 1);
    assert_eq!(index_count(dir.path(), &id), 1);
}

#[test]
fn temporary_files_of_killed_writes_are_removed_and_nothing_else() {
    let dir = crate::support::temp::dir();
    let (id, session_dir) = crashed_after_the_message_file(dir.path(), 1);
    let messages = session_dir.join("agents/tau/messages");
    let stale = [
        session_dir.join(".session.json.0a1b2c3d.tmp"),
        session_dir.join(".meta.json.00ff00ff.tmp"),
        session_dir.join("agents/tau/.agent.json.12345678.tmp"),
        messages.join(".000002.json.deadbeef.tmp"),
        messages.join(".000001.json.abcdef01.tmp"),
        dir.path()
            .join("sessions/..sessions-index.jsonl.89abcdef.tmp"),
    ];
    let kept = [
        session_dir.join("notes.txt"),
        session_dir.join(".session.json.0A1B2C3D.tmp"),
        session_dir.join(".events.jsonl.0a1b2c3d.tmp"),
        messages.join(".000002.json.deadbeef.tmp.bak"),
        dir.path()
            .join("sessions/.sessions-index.jsonl.89abcdef.tmp"),
    ];
    for path in stale.iter().chain(&kept) {
        fs::write(path, b"{\"half\":").unwrap();
    }
    let store = open(dir.path());
    store.read_session(&id).unwrap().unwrap();
    for path in &stale {
        assert!(!path.exists(), "{} was left", path.display());
    }
    for path in &kept {
        assert!(path.exists(), "{} was removed", path.display());
    }
    let messages_read = store.list_messages(&id, DEFAULT_AGENT_ID, None, 0).unwrap();
    assert_eq!(messages_read.len(), 2);
}

#[test]
fn listing_removes_the_temporary_files_of_every_session() {
    let dir = crate::support::temp::dir();
    let (_id, session_dir) = crashed_after_the_message_file(dir.path(), 1);
    let temp = session_dir.join("agents/tau/messages/.000002.json.0a1b2c3d.tmp");
    fs::write(&temp, b"{").unwrap();
    let store = open(dir.path());
    store.list_sessions().unwrap();
    assert!(!temp.exists());
}

#[test]
fn listing_cleans_a_creation_interrupted_before_its_session_json() {
    let dir = crate::support::temp::dir();
    let store = open(dir.path());
    let unfinished = dir.path().join("sessions/20261201-120000-abcd");
    fs::create_dir_all(unfinished.join("agents/tau/messages")).unwrap();
    let temps = [
        unfinished.join(".session.json.0a1b2c3d.tmp"),
        unfinished.join("agents/tau/messages/.000000.json.0a1b2c3e.tmp"),
    ];
    let kept = unfinished.join("agents/tau/messages/000000.json");
    for path in temps.iter().chain([&kept]) {
        fs::write(path, b"{").unwrap();
    }
    assert!(store.list_sessions().unwrap().is_empty());
    for path in &temps {
        assert!(!path.exists(), "{} was left", path.display());
    }
    assert!(kept.exists());
}

#[test]
fn a_reconciliation_that_fails_leaves_the_session_readable() {
    let dir = crate::support::temp::dir();
    let store = open(dir.path());
    let id = create_fresh_session(&store).unwrap().session_id;
    // `agents` is a file where a directory belongs: the message files cannot be counted.
    let session_dir = dir.path().join("sessions").join(&id);
    fs::write(session_dir.join("agents"), b"").unwrap();
    let reopened = open(dir.path());
    assert!(reopened.read_session(&id).unwrap().is_some());
    assert_eq!(listed_count(&reopened, &id), 0);
    assert_eq!(listed_count(&open(dir.path()), &id), 0);
}

/// The first listing of a process surveys many sessions on several threads: every stale one is
/// found and fixed, every temporary file removed.
#[test]
fn a_first_listing_of_many_sessions_reconciles_each() {
    let dir = crate::support::temp::dir();
    let fast = FileSessionStore::open(dir.path().join("sessions"), Durability::NoSync).unwrap();
    let mut ids = Vec::new();
    for _ in 0..600 {
        let id = session_with_agent(&fast);
        fast.create_message(&id, DEFAULT_AGENT_ID, &user_message(0, "one"))
            .unwrap();
        ids.push(id);
    }
    drop(fast);
    crashed(dir.path());
    // Every seventh session forgets its message, as a kill before session.json would leave it.
    for id in ids.iter().step_by(7) {
        let session_dir = dir.path().join("sessions").join(id);
        let path = session_dir.join("session.json");
        let mut record: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        record["message_count"] = 0.into();
        fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
        fs::write(session_dir.join(".meta.json.0a1b2c3d.tmp"), b"{").unwrap();
    }
    fs::remove_file(dir.path().join("sessions").join(INDEX)).unwrap();
    let store = open(dir.path());
    let listed = store.list_sessions().unwrap();
    assert_eq!(listed.len(), ids.len());
    assert!(listed.iter().all(|s| s.message_count == 1));
    for id in ids.iter().step_by(7) {
        let session_dir = dir.path().join("sessions").join(id);
        assert_eq!(stored_count(&session_dir), 1, "{id}");
        assert!(!session_dir.join(".meta.json.0a1b2c3d.tmp").exists());
    }
}

/// After a clean stop the first listing trusts the index and surveys no session (what a crash
/// needs, 1-2 s for 10,000 sessions); the mark is gone once read, so a crash of this process is
/// surveyed again; a session used is still reconciled with its files.
#[test]
fn a_clean_stop_spares_the_next_listing_its_survey_and_only_that_one() {
    let dir = crate::support::temp::dir();
    let store = open(dir.path());
    let id = session_with_agent(&store);
    for n in 0..2 {
        store
            .create_message(&id, DEFAULT_AGENT_ID, &user_message(n, "kept"))
            .unwrap();
    }
    drop(store);
    let mark = dir.path().join("sessions").join(CLEAN_STOP);
    let written: Value = serde_json::from_slice(&fs::read(&mark).unwrap()).unwrap();
    assert_eq!(written["v"], 1, "{written}");
    // A change no clean stop would leave, to see whether the listing looks at the files.
    let session_dir = dir.path().join("sessions").join(&id);
    fs::remove_file(session_dir.join("agents/tau/messages/000001.json")).unwrap();

    let trusting = open(dir.path());
    assert!(!mark.exists(), "the mark is taken at open");
    assert_eq!(listed_count(&trusting, &id), 2, "the index is trusted");
    assert_eq!(
        trusting.session_info(&id).unwrap().unwrap().message_count,
        1
    );
    assert_eq!(
        listed_count(&trusting, &id),
        1,
        "a session used is reconciled"
    );
    std::mem::forget(trusting);

    // That process crashed: no mark, so the next listing surveys again.
    fs::remove_file(session_dir.join("agents/tau/messages/000000.json")).unwrap();
    assert!(!mark.exists());
    let surveying = open(dir.path());
    assert_eq!(listed_count(&surveying, &id), 0);
}
