//! The file backend's journal (`<session>/journal.jsonl`): a batch is durable once journaled, its
//! files follow, and a store opened after a crash writes again from the journal what the crash
//! lost: message files missing, empty or torn, and `events.jsonl` lines missing or torn. A closed
//! session keeps the seed's layout (no journal left), a long journal is emptied at a flush. A
//! damaged record loses at most itself: a line whose checksum fails is skipped, the others
//! replay, and the journal is set aside (`journal.jsonl.damaged-…`), never deleted; so is a
//! journal of a newer version, unreplayed, whose message ids stay taken. The fixtures
//! `tests/fixtures/journal-v1.jsonl` (the format as first written, no checksums) and
//! `journal-v2.jsonl` (a checksum per line) both replay.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, SessionAgent, SessionError, SessionStore, now_utc,
};

use support::store::{
    assistant_message, closed_file_fixture, open_file_store, stored_event_types, stored_texts,
    user_message,
};

/// Writes a tool round as the hub does, then "crashes": the store is forgotten, so nothing it
/// held in memory reaches a file.
fn crash_after_a_batch(dir: &Path, id: &str) {
    let store = open_file_store(dir);
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

fn message_file(session_dir: &Path, id: u64) -> PathBuf {
    session_dir.join(format!("agents/tau/messages/{id:06}.json"))
}

#[test]
fn a_batch_is_journaled_before_its_files_and_replayed_after_a_crash() {
    let (dir, id, session_dir) = closed_file_fixture();
    crash_after_a_batch(dir.path(), &id);
    assert!(
        !message_file(&session_dir, 2).exists(),
        "the files follow the journal later"
    );
    assert!(session_dir.join("journal.jsonl").exists());

    let store = open_file_store(dir.path());
    assert_eq!(
        stored_texts(&store, &id),
        ["first", "reply", "what time is it", "noon"]
    );
    assert_eq!(
        stored_event_types(&store, &id),
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
    let (dir, id, session_dir) = closed_file_fixture();
    let store = open_file_store(dir.path());
    store
        .append_batch(
            &id,
            DEFAULT_AGENT_ID,
            &[json!({"type": "tool_call"})],
            &[user_message(2, "two"), assistant_message(3, "three")],
        )
        .unwrap();
    // Materialized (a read does it), not yet synced, then the machine loses power.
    assert_eq!(stored_texts(&store, &id).len(), 4);
    std::mem::forget(store);
    fs::write(message_file(&session_dir, 2), b"").unwrap();
    fs::write(message_file(&session_dir, 3), br#"{"v":1,"mess"#).unwrap();
    let events = session_dir.join("events.jsonl");
    let bytes = fs::read(&events).unwrap();
    fs::write(&events, &bytes[..bytes.len() - 5]).unwrap();

    let store = open_file_store(dir.path());
    assert_eq!(
        stored_texts(&store, &id),
        ["first", "reply", "two", "three"]
    );
    assert_eq!(
        stored_event_types(&store, &id),
        [json!("turn"), json!("tool_call")]
    );
}

#[test]
fn a_redaction_after_the_files_is_kept_by_a_replay() {
    let (dir, id, _) = closed_file_fixture();
    let store = open_file_store(dir.path());
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

    let store = open_file_store(dir.path());
    let read = store
        .read_message(&id, DEFAULT_AGENT_ID, 2)
        .unwrap()
        .unwrap();
    assert_eq!(read.redact_message, redacted.redact_message);
}

#[test]
fn a_taken_id_refuses_the_whole_batch() {
    let (dir, id, _) = closed_file_fixture();
    let store = open_file_store(dir.path());
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
    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id), ["first", "reply", "kept"]);
    assert_eq!(stored_event_types(&store, &id), [json!("turn")]);
}

/// Ids are per agent: a second agent's message 2 is not taken by the first agent's, still only
/// journaled.
#[test]
fn ids_are_taken_per_agent_while_journaled() {
    let (dir, id, _) = closed_file_fixture();
    let store = open_file_store(dir.path());
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
    assert_eq!(stored_texts(&store, &id), ["first", "reply", "to tau"]);
}

#[test]
fn the_first_journal_format_replays() {
    let (dir, id, session_dir) = closed_file_fixture();
    let events_len = fs::metadata(session_dir.join("events.jsonl"))
        .unwrap()
        .len();
    let fixture =
        include_str!("fixtures/journal-v1.jsonl").replace("EVENTS_LEN", &events_len.to_string());
    fs::write(session_dir.join("journal.jsonl"), fixture).unwrap();

    let store = open_file_store(dir.path());
    assert_eq!(
        stored_texts(&store, &id),
        ["first", "reply", "what time is it", "It is noon."]
    );
    assert_eq!(
        stored_event_types(&store, &id),
        [json!("turn"), json!("approval"), json!("tool_call")]
    );
}

/// A flush checkpoints a journal of 512 batches: it is emptied (kept as a file while the session
/// is open) and what it held is in the session's files; closing the session removes it.
#[test]
fn a_long_journal_is_emptied_at_a_flush_and_removed_at_close() {
    let (dir, id, session_dir) = closed_file_fixture();
    let journal = session_dir.join("journal.jsonl");
    let store = open_file_store(dir.path());
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
    assert_eq!(stored_event_types(&store, &id).len(), 514);
}

/// `tidy_session`, which the hub runs after each turn beside the next one, writes what was
/// journaled to its files without a read, and checkpoints the journal once one is due.
#[test]
fn a_tidy_writes_the_journaled_files_and_checkpoints_when_due() {
    let (dir, id, session_dir) = closed_file_fixture();
    let journal = session_dir.join("journal.jsonl");
    let store = open_file_store(dir.path());
    assert!(!store.tidy_pending(&id), "nothing journaled yet");
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "hello"))
        .unwrap();
    assert!(!message_file(&session_dir, 2).exists(), "journaled only");
    assert!(store.tidy_pending(&id), "a journaled message to write");
    store.tidy_session(&id).unwrap();
    assert!(
        message_file(&session_dir, 2).exists(),
        "written by the tidy"
    );
    assert!(fs::metadata(&journal).unwrap().len() > 0, "not due yet");
    for n in 0..511 {
        store
            .append_event(&id, &json!({"type": "tick", "n": n}))
            .unwrap();
    }
    store.tidy_session(&id).unwrap();
    assert_eq!(
        fs::metadata(&journal).unwrap().len(),
        0,
        "512 batches: emptied"
    );
    assert!(!store.tidy_pending(&id), "checkpointed: nothing left");
    assert_eq!(stored_texts(&store, &id).len(), 3);
    assert_eq!(stored_event_types(&store, &id).len(), 512);
}

/// Six turns (a `turn` event, a prompt and its answer each) journaled, then a crash: the store is
/// forgotten before anything reached a file. Their journal lines, one a turn, in order.
fn crash_after_six_turns(dir: &Path, id: &str) {
    let store = open_file_store(dir);
    for turn in 0..6u64 {
        store
            .append_batch(
                id,
                DEFAULT_AGENT_ID,
                &[json!({"type": "turn", "n": turn})],
                &[
                    user_message(2 + 2 * turn, &format!("question {turn}")),
                    assistant_message(3 + 2 * turn, &format!("answer {turn}")),
                ],
            )
            .unwrap();
    }
    std::mem::forget(store);
}

/// The texts of the fixture's two messages and of the six turns but `lost`.
fn six_turns_but(lost: Option<u64>) -> Vec<String> {
    let mut texts = vec!["first".to_owned(), "reply".to_owned()];
    for turn in (0..6).filter(|&t| Some(t) != lost) {
        texts.push(format!("question {turn}"));
        texts.push(format!("answer {turn}"));
    }
    texts
}

/// The session's journals set aside (`journal.jsonl.damaged-…`), by name.
fn aside_journals(session_dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(session_dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("journal.jsonl.damaged-"))
        })
        .collect();
    found.sort();
    found
}

/// Rewrites a line of the session's journal with `damage`: the first line with `None`, else the
/// line of turn `Some(n)`. Returns the journal as it was.
fn damage_line(session_dir: &Path, turn: Option<u64>, damage: impl Fn(&str) -> String) -> String {
    let journal = session_dir.join("journal.jsonl");
    let before = fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<String> = before.lines().map(str::to_owned).collect();
    let at = match turn {
        None => 0,
        Some(n) => {
            let question = format!("question {n}\"");
            lines.iter().position(|l| l.contains(&question)).unwrap()
        }
    };
    lines[at] = damage(&lines[at]);
    fs::write(&journal, lines.join("\n") + "\n").unwrap();
    before
}

fn message_ids(store: &dyn SessionStore, id: &str) -> Vec<u64> {
    store
        .list_messages(id, DEFAULT_AGENT_ID, None, 0)
        .unwrap()
        .iter()
        .map(|m| m.message_id)
        .collect()
}

/// The next id as the hub takes it: past the last message it lists and the store's floor.
fn next_id(store: &dyn SessionStore, id: &str) -> u64 {
    let listed = store
        .list_messages_before(id, DEFAULT_AGENT_ID, None, 1)
        .unwrap()
        .last()
        .map_or(0, |m| m.message_id + 1);
    listed.max(store.message_id_floor(id, DEFAULT_AGENT_ID).unwrap())
}

/// Issue 36: six acknowledged turns, a crash, the journal's first line garbage. Only the damaged
/// turn is lost; the journal is set aside, not left to be appended to, and the next turn takes
/// no id the journal held, so after a clean close and a restart everything is still there.
#[test]
fn a_damaged_first_journal_line_loses_only_its_own_turn() {
    let (dir, id, session_dir) = closed_file_fixture();
    crash_after_six_turns(dir.path(), &id);
    let before = damage_line(&session_dir, None, |_| "garbage".to_owned());

    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id), six_turns_but(Some(0)));
    assert_eq!(
        message_ids(&store, &id),
        [0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]
    );
    assert!(!session_dir.join("journal.jsonl").exists());
    let aside = aside_journals(&session_dir);
    assert_eq!(aside.len(), 1, "the damaged journal is kept aside");
    assert_eq!(
        fs::read_to_string(&aside[0]).unwrap(),
        before.replacen(before.lines().next().unwrap(), "garbage", 1)
    );
    let turns: Vec<Value> = store
        .read_events(&id)
        .unwrap()
        .iter()
        .filter_map(|e| e.get("n").cloned())
        .collect();
    assert_eq!(turns, [json!(1), json!(2), json!(3), json!(4), json!(5)]);

    let next = next_id(&store, &id);
    assert_eq!(next, 14, "no id of the journal is taken again");
    store
        .append_batch(
            &id,
            DEFAULT_AGENT_ID,
            &[json!({"type": "turn", "n": 6})],
            &[
                user_message(next, "question 6"),
                assistant_message(next + 1, "answer 6"),
            ],
        )
        .unwrap();
    store.close_session(&id).unwrap();
    drop(store);

    let store = open_file_store(dir.path());
    let mut expected = six_turns_but(Some(0));
    expected.extend(["question 6".to_owned(), "answer 6".to_owned()]);
    assert_eq!(stored_texts(&store, &id), expected);
    assert_eq!(
        message_ids(&store, &id),
        [0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    );
    let info = store.session_info(&id).unwrap().unwrap();
    assert_eq!(info.message_count, 14);
}

/// A record whose bytes changed but still parse (one letter of a message) is found by its
/// checksum and skipped, never replayed with the wrong content; the records around it replay.
fn a_silently_changed_line_loses_only_itself(turn: u64) {
    let (dir, id, session_dir) = closed_file_fixture();
    crash_after_six_turns(dir.path(), &id);
    damage_line(&session_dir, Some(turn), |line| {
        let answer = format!("answer {turn}");
        assert!(line.contains(&answer), "{line}");
        line.replace(&answer, &format!("answeR {turn}"))
    });

    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id), six_turns_but(Some(turn)));
    assert!(!session_dir.join("journal.jsonl").exists());
    assert_eq!(aside_journals(&session_dir).len(), 1);
}

#[test]
fn a_silently_changed_middle_line_loses_only_itself() {
    a_silently_changed_line_loses_only_itself(3);
}

#[test]
fn a_silently_changed_last_line_loses_only_itself() {
    a_silently_changed_line_loses_only_itself(5);
}

/// The last line damaged past parsing (a byte of its JSON lost): its turn is lost, and its ids,
/// which no later line's ids stand above, are still not given to the next message: the journal
/// set aside shows them, and a store opened again reads them there.
#[test]
fn the_ids_of_a_last_line_that_no_longer_parses_are_not_given_again() {
    let (dir, id, session_dir) = closed_file_fixture();
    crash_after_six_turns(dir.path(), &id);
    damage_line(&session_dir, Some(5), |line| {
        let field = "\"messages\":";
        assert!(line.contains(field), "{line}");
        line.replacen(field, "\"messages:", 1)
    });

    for _ in 0..2 {
        let store = open_file_store(dir.path());
        assert_eq!(stored_texts(&store, &id), six_turns_but(Some(5)));
        assert_eq!(aside_journals(&session_dir).len(), 1);
        assert_eq!(next_id(&store, &id), 14, "ids 12 and 13 were acknowledged");
        store.close_session(&id).unwrap();
    }
}

/// A crash that cut the last append short (a power loss: no newline yet) is no damage: the
/// whole records replay and the journal is removed, not set aside.
#[test]
fn a_torn_last_line_is_no_damage() {
    let (dir, id, session_dir) = closed_file_fixture();
    crash_after_six_turns(dir.path(), &id);
    let journal = session_dir.join("journal.jsonl");
    let bytes = fs::read(&journal).unwrap();
    fs::write(&journal, &bytes[..bytes.len() - 20]).unwrap();

    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id), six_turns_but(Some(5)));
    assert!(!journal.exists());
    assert!(aside_journals(&session_dir).is_empty());
}

/// The checksummed format, the first format without its first line, and journals set aside.
#[path = "store_file_journal_cases/formats.rs"]
mod formats;

/// The messages directory a session's journal holds open is written to only while it is still
/// the directory at its path: one put in its place behind the store's back gets the next
/// message, the old one (moved away) does not.
#[test]
fn a_messages_directory_replaced_behind_the_store_gets_the_next_message() {
    let (dir, id, session_dir) = closed_file_fixture();
    let store = open_file_store(dir.path());
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "held"))
        .unwrap();
    store.tidy_session(&id).unwrap();
    let messages = session_dir.join("agents/tau/messages");
    let moved = session_dir.join("agents/tau/moved");
    fs::rename(&messages, &moved).unwrap();
    fs::create_dir(&messages).unwrap();
    store
        .create_message(&id, DEFAULT_AGENT_ID, &assistant_message(3, "new"))
        .unwrap();
    store.close_session(&id).unwrap();
    assert!(moved.join("000002.json").exists());
    assert!(
        !moved.join("000003.json").exists(),
        "written to the old directory"
    );
    let written: SessionMessageFile =
        serde_json::from_slice(&fs::read(messages.join("000003.json")).unwrap()).unwrap();
    assert_eq!(written.message_id, 3);
}

#[derive(serde::Deserialize)]
struct SessionMessageFile {
    message_id: u64,
}
