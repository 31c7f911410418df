//! The journal's formats read back: version 2 and its fixture, version 1 without its first line,
//! a newer version and an unreadable journal set aside.

use super::*;

/// The fixture's journals carry `events_len` 22: the length of [`session`]'s `events.jsonl`.
fn check_fixture_events_len(session_dir: &Path) {
    let events_len = fs::metadata(session_dir.join("events.jsonl"))
        .unwrap()
        .len();
    assert_eq!(
        events_len, 22,
        "the journal fixtures expect this events.jsonl"
    );
}

#[test]
fn the_checksummed_journal_format_replays() {
    let (dir, id, session_dir) = closed_file_fixture();
    check_fixture_events_len(&session_dir);
    fs::write(
        session_dir.join("journal.jsonl"),
        include_str!("../fixtures/journal-v2.jsonl"),
    )
    .unwrap();

    let store = open_file_store(dir.path());
    assert_eq!(
        stored_texts(&store, &id),
        ["first", "reply", "what time is it", "It is noon."]
    );
    assert_eq!(
        stored_event_types(&store, &id),
        [json!("turn"), json!("approval"), json!("tool_call")]
    );
    assert!(!session_dir.join("journal.jsonl").exists());
    assert!(aside_journals(&session_dir).is_empty());
}

/// Each line of the fixture, changed by one byte: that record is skipped, the other replays.
#[test]
fn a_changed_line_of_the_checksummed_fixture_is_skipped() {
    let fixture_text = include_str!("../fixtures/journal-v2.jsonl");
    let cases = [
        (
            fixture_text.replacen("pending", "pendinG", 1),
            vec!["first", "reply", "what time is it", "It is noon."],
            vec![json!("turn"), json!("tool_call")],
        ),
        (
            fixture_text.replacen("It is noon.", "It is noon!", 1),
            vec!["first", "reply"],
            vec![json!("turn"), json!("approval")],
        ),
    ];
    for (journal, messages, events) in cases {
        let (dir, id, session_dir) = closed_file_fixture();
        check_fixture_events_len(&session_dir);
        fs::write(session_dir.join("journal.jsonl"), &journal).unwrap();
        let store = open_file_store(dir.path());
        assert_eq!(stored_texts(&store, &id), messages);
        assert_eq!(stored_event_types(&store, &id), events);
        let aside = aside_journals(&session_dir);
        assert_eq!(aside.len(), 1);
        assert_eq!(fs::read_to_string(&aside[0]).unwrap(), journal);
    }
}

/// A version 1 journal whose first line (`events_len`) was lost still replays its records: the
/// events `events.jsonl` does not end with yet are appended.
#[test]
fn a_first_format_journal_without_its_first_line_still_replays() {
    let (dir, id, session_dir) = closed_file_fixture();
    let fixture_text = include_str!("../fixtures/journal-v1.jsonl");
    let damaged = fixture_text.replacen("{\"v\":1,\"events_len\":EVENTS_LEN}", "garbage", 1);
    assert_ne!(damaged, fixture_text);
    fs::write(session_dir.join("journal.jsonl"), &damaged).unwrap();
    // The approval was materialized before the crash; the tool call was not.
    fs::write(
        session_dir.join("events.jsonl"),
        fs::read_to_string(session_dir.join("events.jsonl")).unwrap()
            + "{\"approval_id\":\"a1\",\"status\":\"pending\",\"type\":\"approval\",\"v\":1}\n",
    )
    .unwrap();

    let store = open_file_store(dir.path());
    assert_eq!(
        stored_texts(&store, &id),
        ["first", "reply", "what time is it", "It is noon."]
    );
    assert_eq!(
        stored_event_types(&store, &id),
        [json!("turn"), json!("approval"), json!("tool_call")]
    );
    assert_eq!(aside_journals(&session_dir).len(), 1);
}

/// A journal of a newer format is not replayed: it is set aside as it was, the session goes on
/// with a new journal, and the message ids the journal holds are never given again, in this
/// process or the next.
#[test]
fn a_journal_of_a_newer_version_is_set_aside_and_its_ids_stay_taken() {
    let (dir, id, session_dir) = closed_file_fixture();
    let journal = session_dir.join("journal.jsonl");
    let line =
        "{\"v\":3,\"agent_id\":\"tau\",\"messages\":[{\"message_id\":2},{\"message_id\":3}]}\n";
    fs::write(&journal, line).unwrap();

    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id), ["first", "reply"]);
    assert!(!journal.exists());
    let aside = aside_journals(&session_dir);
    assert_eq!(aside.len(), 1);
    assert_eq!(fs::read_to_string(&aside[0]).unwrap(), line);
    assert_eq!(store.message_id_floor(&id, DEFAULT_AGENT_ID).unwrap(), 4);
    assert_eq!(next_id(&store, &id), 4);
    let err = store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(3, "taken"))
        .unwrap_err();
    assert!(
        matches!(err, SessionError::MessageExists { message_id: 3, .. }),
        "{err}"
    );
    drop(store);

    let store = open_file_store(dir.path());
    assert_eq!(next_id(&store, &id), 4, "still taken after a restart");
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(4, "later"))
        .unwrap();
    store.close_session(&id).unwrap();
    assert!(!journal.exists(), "the new journal is emptied as usual");
    drop(store);

    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id), ["first", "reply", "later"]);
    assert_eq!(next_id(&store, &id), 5);
    assert_eq!(
        fs::read_to_string(&aside[0]).unwrap(),
        line,
        "kept as it was"
    );
}

/// A journal that cannot be read (here a directory where the file belongs) is set aside, kept,
/// and the session goes on with a new one.
#[test]
fn an_unreadable_journal_is_set_aside_and_the_session_goes_on() {
    let (dir, id, session_dir) = closed_file_fixture();
    let journal = session_dir.join("journal.jsonl");
    fs::create_dir(&journal).unwrap();
    fs::write(journal.join("inside"), "kept").unwrap();

    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id), ["first", "reply"]);
    let aside = aside_journals(&session_dir);
    assert_eq!(aside.len(), 1);
    assert_eq!(fs::read_to_string(aside[0].join("inside")).unwrap(), "kept");
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(2, "later"))
        .unwrap();
    std::mem::forget(store);

    let store = open_file_store(dir.path());
    assert_eq!(stored_texts(&store, &id), ["first", "reply", "later"]);
    assert!(!journal.exists());
    assert_eq!(aside_journals(&session_dir).len(), 1);
}
