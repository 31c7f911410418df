//! The file backend's journal (`<session>/journal.jsonl`): a batch is durable once journaled, its
//! files follow, and a store opened after a crash writes again from the journal what the crash
//! lost: message files missing, empty or torn, and `events.jsonl` lines missing or torn. A closed
//! session keeps the seed's layout (no journal left), a long journal is emptied at a flush; a
//! journal of another version is kept, not replayed, even when new writes follow it. The fixture `tests/fixtures/journal-v1.jsonl` is the format as first written.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support {
    pub mod store;
}

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, Durability, FileSessionStore, SessionAgent, SessionStore,
    now_utc,
};

use support::store::{assistant_message, session_with_agent, user_message};

fn open(dir: &Path) -> FileSessionStore {
    FileSessionStore::open(dir.join("sessions"), Durability::Full).unwrap()
}

/// A session with an agent and two messages, closed (no journal).
fn session(dir: &Path) -> (String, PathBuf) {
    let store = open(dir);
    let id = session_with_agent(&store);
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(0, "first"))
        .unwrap();
    store
        .create_message(&id, DEFAULT_AGENT_ID, &assistant_message(1, "reply"))
        .unwrap();
    store.append_event(&id, &json!({"type": "turn"})).unwrap();
    store.close_session(&id).unwrap();
    let dir = dir.join("sessions").join(&id);
    (id, dir)
}

/// A temporary directory holding [`session`]'s session: the directory, the id, the session's
/// directory.
fn fixture() -> (tempfile::TempDir, String, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (id, session_dir) = session(dir.path());
    (dir, id, session_dir)
}

/// Writes a tool round as the hub does, then "crashes": the store is forgotten, so nothing it
/// held in memory reaches a file.
fn crash_after_a_batch(dir: &Path, id: &str) {
    let store = open(dir);
    store
        .append_batch(
            id,
            DEFAULT_AGENT_ID,
            &[json!({"type": "tool_call", "tool": "current_time"})],
            &[
                user_message(2, "what time is it"),
                assistant_message(3, "noon"),
            ],
        )
        .unwrap();
    std::mem::forget(store);
}

fn texts(store: &dyn SessionStore, id: &str) -> Vec<String> {
    store
        .list_messages(id, DEFAULT_AGENT_ID, None, 0)
        .unwrap()
        .iter()
        .map(|m| m.message.text())
        .collect()
}

fn event_types(store: &dyn SessionStore, id: &str) -> Vec<Value> {
    store
        .read_events(id)
        .unwrap()
        .iter()
        .map(|e| e["type"].clone())
        .collect()
}

fn message_file(session_dir: &Path, id: u64) -> PathBuf {
    session_dir.join(format!("agents/tau/messages/{id:06}.json"))
}

#[test]
fn a_batch_is_journaled_before_its_files_and_replayed_after_a_crash() {
    let (dir, id, session_dir) = fixture();
    crash_after_a_batch(dir.path(), &id);
    assert!(
        !message_file(&session_dir, 2).exists(),
        "the files follow the journal later"
    );
    assert!(session_dir.join("journal.jsonl").exists());

    let store = open(dir.path());
    assert_eq!(
        texts(&store, &id),
        ["first", "reply", "what time is it", "noon"]
    );
    assert_eq!(
        event_types(&store, &id),
        [json!("turn"), json!("tool_call")]
    );
    let info = store.session_info(&id).unwrap().unwrap();
    assert_eq!(info.message_count, 4);
    assert!(
        !session_dir.join("journal.jsonl").exists(),
        "a replayed journal is removed"
    );
}

#[test]
fn files_a_power_loss_left_empty_or_torn_are_written_again() {
    let (dir, id, session_dir) = fixture();
    let store = open(dir.path());
    store
        .append_batch(
            &id,
            DEFAULT_AGENT_ID,
            &[json!({"type": "tool_call"})],
            &[user_message(2, "two"), assistant_message(3, "three")],
        )
        .unwrap();
    // Materialized (a read does it), not yet synced, then the machine loses power.
    assert_eq!(texts(&store, &id).len(), 4);
    std::mem::forget(store);
    fs::write(message_file(&session_dir, 2), b"").unwrap();
    fs::write(message_file(&session_dir, 3), br#"{"v":1,"mess"#).unwrap();
    let events = session_dir.join("events.jsonl");
    let bytes = fs::read(&events).unwrap();
    fs::write(&events, &bytes[..bytes.len() - 5]).unwrap();

    let store = open(dir.path());
    assert_eq!(texts(&store, &id), ["first", "reply", "two", "three"]);
    assert_eq!(
        event_types(&store, &id),
        [json!("turn"), json!("tool_call")]
    );
}

#[test]
fn a_redaction_after_the_files_is_kept_by_a_replay() {
    let (dir, id, _) = fixture();
    let store = open(dir.path());
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "secret"))
        .unwrap();
    let mut redacted = store
        .read_message(&id, DEFAULT_AGENT_ID, 2)
        .unwrap()
        .unwrap();
    redacted.redact_message = Some(taud::message::Message::user_text("[redacted]"));
    store
        .update_message(&id, DEFAULT_AGENT_ID, &redacted)
        .unwrap();
    std::mem::forget(store);

    let store = open(dir.path());
    let read = store
        .read_message(&id, DEFAULT_AGENT_ID, 2)
        .unwrap()
        .unwrap();
    assert_eq!(read.redact_message, redacted.redact_message);
}

#[test]
fn a_taken_id_refuses_the_whole_batch() {
    let (dir, id, _) = fixture();
    let store = open(dir.path());
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "kept"))
        .unwrap();
    let err = store
        .append_batch(
            &id,
            DEFAULT_AGENT_ID,
            &[json!({"type": "tool_call"})],
            &[user_message(3, "new"), user_message(2, "taken")],
        )
        .unwrap_err();
    assert!(err.to_string().contains('2'), "{err}");
    drop(store);
    let store = open(dir.path());
    assert_eq!(texts(&store, &id), ["first", "reply", "kept"]);
    assert_eq!(event_types(&store, &id), [json!("turn")]);
}

/// Ids are per agent: a second agent's message 2 is not taken by the first agent's, still only
/// journaled.
#[test]
fn ids_are_taken_per_agent_while_journaled() {
    let (dir, id, _) = fixture();
    let store = open(dir.path());
    store
        .create_agent(
            &id,
            &SessionAgent::new("helper", ContextMode::Sliding, now_utc()),
        )
        .unwrap();
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "to tau"))
        .unwrap();
    store
        .create_message(&id, "helper", &user_message(2, "to the helper"))
        .unwrap();
    let err = store
        .create_message(&id, "helper", &user_message(2, "again"))
        .unwrap_err();
    assert!(err.to_string().contains('2'), "{err}");
    let helper: Vec<String> = store
        .list_messages(&id, "helper", None, 0)
        .unwrap()
        .iter()
        .map(|m| m.message.text())
        .collect();
    assert_eq!(helper, ["to the helper"]);
    assert_eq!(texts(&store, &id), ["first", "reply", "to tau"]);
}

#[test]
fn the_first_journal_format_replays() {
    let (dir, id, session_dir) = fixture();
    let events_len = fs::metadata(session_dir.join("events.jsonl"))
        .unwrap()
        .len();
    let fixture =
        include_str!("fixtures/journal-v1.jsonl").replace("EVENTS_LEN", &events_len.to_string());
    fs::write(session_dir.join("journal.jsonl"), fixture).unwrap();

    let store = open(dir.path());
    assert_eq!(
        texts(&store, &id),
        ["first", "reply", "what time is it", "It is noon."]
    );
    assert_eq!(
        event_types(&store, &id),
        [json!("turn"), json!("approval"), json!("tool_call")]
    );
}

#[test]
fn a_journal_of_another_version_is_kept_unreplayed() {
    let (dir, id, session_dir) = fixture();
    let journal = session_dir.join("journal.jsonl");
    let line = "{\"v\":2,\"events_len\":0}\n";
    fs::write(&journal, line).unwrap();
    let store = open(dir.path());
    assert_eq!(texts(&store, &id), ["first", "reply"]);
    drop(store);
    assert_eq!(fs::read_to_string(&journal).unwrap(), line);
}

/// A flush checkpoints a journal of 512 batches: it is emptied (kept as a file while the session
/// is open) and what it held is in the session's files; closing the session removes it.
#[test]
fn a_long_journal_is_emptied_at_a_flush_and_removed_at_close() {
    let (dir, id, session_dir) = fixture();
    let journal = session_dir.join("journal.jsonl");
    let store = open(dir.path());
    for n in 0..511 {
        store
            .append_event(&id, &json!({"type": "tick", "n": n}))
            .unwrap();
    }
    store.flush_session(&id).unwrap();
    assert!(
        fs::metadata(&journal).unwrap().len() > 0,
        "511 batches, not yet due"
    );
    store
        .append_event(&id, &json!({"type": "tick", "n": 511}))
        .unwrap();
    store.flush_session(&id).unwrap();
    assert_eq!(fs::metadata(&journal).unwrap().len(), 0, "emptied");
    let events = fs::read_to_string(session_dir.join("events.jsonl")).unwrap();
    assert_eq!(events.lines().count(), 513, "the first event and 512 ticks");

    store
        .append_event(&id, &json!({"type": "tick", "n": 512}))
        .unwrap();
    store.close_session(&id).unwrap();
    assert!(!journal.exists(), "a closed session keeps no journal");
    assert_eq!(event_types(&store, &id).len(), 514);
}

/// A flush checkpoints a journal whose materialized files pass 128 (`CHECKPOINT_UNSYNCED`), long
/// before 512 batches or 30 s: the paths to sync are what a session holds in memory meanwhile.
#[test]
fn a_journal_with_many_files_to_sync_is_emptied_at_a_flush() {
    let (dir, id, session_dir) = fixture();
    let journal = session_dir.join("journal.jsonl");
    let store = open(dir.path());
    let mut emptied_after = None;
    for n in 2..300 {
        store
            .create_message(&id, DEFAULT_AGENT_ID, &user_message(n, "hello"))
            .unwrap();
        store.flush_session(&id).unwrap();
        if fs::metadata(&journal).unwrap().len() == 0 {
            emptied_after = Some(n - 1);
            break;
        }
    }
    let messages = emptied_after.expect("the journal was emptied");
    assert!(
        (120..=130).contains(&messages),
        "emptied after {messages} messages"
    );
    assert_eq!(texts(&store, &id).len() as u64, messages + 2);
}

/// A journal this build cannot replay is never emptied by it: new writes are journaled after it
/// and reach their files, and the old records stay for a build that can read them.
#[test]
fn writes_after_a_journal_of_another_version_keep_it() {
    let (dir, id, session_dir) = fixture();
    let journal = session_dir.join("journal.jsonl");
    let line = "{\"v\":2,\"events_len\":0}\n";
    fs::write(&journal, line).unwrap();
    let store = open(dir.path());
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "later"))
        .unwrap();
    store.close_session(&id).unwrap();
    assert!(message_file(&session_dir, 2).exists());
    let kept = fs::read_to_string(&journal).unwrap();
    assert!(kept.starts_with(line), "{kept}");
    drop(store);
    let store = open(dir.path());
    assert_eq!(texts(&store, &id), ["first", "reply", "later"]);
}
