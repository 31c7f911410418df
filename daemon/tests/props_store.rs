//! Property tests of the session stores' readers: a stored record damaged in any way (arbitrary
//! bytes, truncated, a field of the wrong type or out of range, a field removed, a newer format
//! version) never panics a reader or a later write. A reader of the damaged record either reads
//! it or fails with `Corrupt` / `UnsupportedFormat` naming the record (its file for the `file`
//! backend, the session for `sqlite`); readers of the other records are not disturbed. The hub's
//! own files (`approval-scan.json`, `state.json`, `crash.json`, `last_crash.json`) and the restart
//! scan over arbitrary events are covered too.
//!
//! `PROPTEST_CASES=N` runs N cases per property instead of the short default.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};
use support::props::targets::{
    FileTarget, RowTarget, SqlJunk, damage_file, damage_row, file_target, row_target,
};
use support::props::{Damage, ID, MESSAGES, apply, approval_event, damage, fill, runner};
use taud::message::Message;
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, Durability, FileSessionStore, Session, SessionAgent,
    SessionError, SessionMessage, SessionMeta, SessionStore, SqliteSessionStore,
};

/// `result` is fine when it read, or when `damaged` says the reader read the damaged record and
/// the error is the store's, naming it by `name`.
fn check<T: std::fmt::Debug>(
    what: &str,
    result: &Result<T, SessionError>,
    damaged: bool,
    name: &str,
) -> Result<(), TestCaseError> {
    let Err(error) = result else {
        return Ok(());
    };
    prop_assert!(
        damaged,
        "{what} failed although it reads no damaged record: {error}"
    );
    prop_assert!(
        matches!(
            error,
            SessionError::Corrupt { .. } | SessionError::UnsupportedFormat { .. }
        ),
        "{what}: not a Corrupt or UnsupportedFormat error: {error:?}"
    );
    prop_assert!(
        error.to_string().contains(name),
        "{what}: the error does not name {name}: {error}"
    );
    Ok(())
}

/// Every reader, then a write of each kind, on a file store with one damaged record.
fn file_case(target: &FileTarget, damage: &Damage) -> Result<(), TestCaseError> {
    let tmp = crate::support::temp::dir();
    let root = tmp.path().join("sessions");
    let store = FileSessionStore::open(&root, Durability::NoSync).unwrap();
    fill(&store);
    let name = damage_file(&root, target, damage);
    let is = |t: fn(&FileTarget) -> bool| t(target);

    let session = store.read_session(ID);
    check(
        "read_session",
        &session,
        is(|t| matches!(t, FileTarget::Session)),
        &name,
    )?;
    let agent = store.read_agent(ID, DEFAULT_AGENT_ID);
    check(
        "read_agent",
        &agent,
        is(|t| matches!(t, FileTarget::Agent)),
        &name,
    )?;
    check(
        "read_meta",
        &store.read_meta(ID),
        is(|t| matches!(t, FileTarget::Meta)),
        &name,
    )?;
    let a_message = is(|t| matches!(t, FileTarget::Message(_)));
    check(
        "list_messages",
        &store.list_messages(ID, DEFAULT_AGENT_ID, None, 0),
        a_message,
        &name,
    )?;
    for id in 0..MESSAGES {
        let damaged = matches!(target, FileTarget::Message(m) if *m == id);
        check(
            "read_message",
            &store.read_message(ID, DEFAULT_AGENT_ID, id),
            damaged,
            &name,
        )?;
    }
    // Unreadable event lines are skipped; the log itself always reads.
    check("read_events", &store.read_events(ID), false, &name)?;
    // A listing skips what it cannot read and repairs the index from session.json.
    let listed = store.list_sessions();
    check("list_sessions", &listed, false, &name)?;
    if !is(|t| matches!(t, FileTarget::Session)) {
        prop_assert!(
            listed.unwrap().iter().any(|s| s.session_id == ID),
            "the session is no longer listed"
        );
    }

    // Writes after the damage: never a panic; only a write that reads the damaged record fails.
    let now = taud::store::now_utc();
    let next = SessionMessage::new(MESSAGES, Message::user_text("again"), now);
    let appended = store.create_message(ID, DEFAULT_AGENT_ID, &next);
    check(
        "create_message",
        &appended,
        is(|t| matches!(t, FileTarget::Session)),
        &name,
    )?;
    check(
        "append_event",
        &store.append_event(ID, &approval_event("approved")),
        false,
        &name,
    )?;
    check(
        "write_meta",
        &store.write_meta(ID, &SessionMeta::default()),
        false,
        &name,
    )?;
    let fresh = SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now);
    check(
        "update_agent",
        &store.update_agent(ID, &fresh),
        is(|t| matches!(t, FileTarget::Agent)),
        &name,
    )?;
    check("list_sessions", &store.list_sessions(), false, &name)?;
    Ok(())
}

#[test]
fn the_file_store_reads_or_names_a_damaged_record_and_never_panics() {
    runner(192)
        .run(&(file_target(), damage()), |(target, damage)| {
            file_case(&target, &damage)
        })
        .unwrap();
}

/// A sqlite reader's result: read, or the store's error (a record that does not parse names its
/// session; a value of the wrong SQL type is the database's own error).
fn check_row<T: std::fmt::Debug>(
    what: &str,
    result: &Result<T, SessionError>,
    damaged: bool,
) -> Result<(), TestCaseError> {
    let Err(error) = result else {
        return Ok(());
    };
    prop_assert!(
        damaged,
        "{what} failed although it reads no damaged row: {error}"
    );
    match error {
        SessionError::Corrupt { location, .. }
        | SessionError::UnsupportedFormat { location, .. } => {
            prop_assert!(location.contains(ID), "{what}: {error}")
        }
        SessionError::Database(_) => {}
        other => prop_assert!(false, "{what}: unexpected error {other:?}"),
    }
    Ok(())
}

fn sqlite_case(target: &RowTarget, damage: &Damage) -> Result<(), TestCaseError> {
    let tmp = crate::support::temp::dir();
    let db = tmp.path().join("sessions.db");
    {
        let store = SqliteSessionStore::open(&db, Durability::NoSync).unwrap();
        fill(&store);
    }
    damage_row(&db, target, damage);
    let store = SqliteSessionStore::open(&db, Durability::NoSync).unwrap();
    let session_row = matches!(
        target,
        RowTarget::SessionRecord | RowTarget::SessionColumn(..)
    );
    check_row("read_session", &store.read_session(ID), session_row)?;
    check_row(
        "read_agent",
        &store.read_agent(ID, DEFAULT_AGENT_ID),
        matches!(target, RowTarget::AgentRecord),
    )?;
    check_row(
        "read_meta",
        &store.read_meta(ID),
        matches!(target, RowTarget::MetaRecord),
    )?;
    let a_message = matches!(target, RowTarget::MessageRecord(_));
    check_row(
        "list_messages",
        &store.list_messages(ID, DEFAULT_AGENT_ID, None, 0),
        a_message,
    )?;
    for id in 0..MESSAGES {
        check_row(
            "read_message",
            &store.read_message(ID, DEFAULT_AGENT_ID, id),
            matches!(target, RowTarget::MessageRecord(m) if *m == id),
        )?;
    }
    check_row(
        "read_events",
        &store.read_events(ID),
        matches!(target, RowTarget::EventRecord(_)),
    )?;
    // A listing skips a row it cannot read; it never fails for one.
    check_row("list_sessions", &store.list_sessions(), false)?;
    let now = taud::store::now_utc();
    let next = SessionMessage::new(MESSAGES, Message::user_text("again"), now);
    check_row(
        "create_message",
        &store.create_message(ID, DEFAULT_AGENT_ID, &next),
        session_row,
    )?;
    check_row(
        "append_event",
        &store.append_event(ID, &approval_event("approved")),
        false,
    )?;
    check_row(
        "write_meta",
        &store.write_meta(ID, &SessionMeta::default()),
        false,
    )?;
    let fresh = SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now);
    check_row(
        "update_agent",
        &store.update_agent(ID, &fresh),
        matches!(target, RowTarget::AgentRecord),
    )?;
    Ok(())
}

#[test]
fn the_sqlite_store_reads_or_names_a_damaged_row_and_never_panics() {
    runner(96)
        .run(&(row_target(), damage()), |(target, damage)| {
            sqlite_case(&target, &damage)
        })
        .unwrap();
}

#[test]
fn a_database_file_of_arbitrary_bytes_is_refused_cleanly() {
    runner(32)
        .run(
            &(
                proptest::collection::vec(any::<u8>(), 0..8192),
                any::<bool>(),
            ),
            |(bytes, keep_header)| {
                let tmp = crate::support::temp::dir();
                let db = tmp.path().join("sessions.db");
                let mut content = bytes;
                if keep_header {
                    // A real header, then garbage: sqlite must find the damage, not us.
                    let mut header = b"SQLite format 3\0".to_vec();
                    header.extend(content);
                    content = header;
                }
                std::fs::write(&db, &content).unwrap();
                if let Ok(store) = SqliteSessionStore::open(&db, Durability::NoSync) {
                    let _ = store.list_sessions();
                    let _ = store.read_session(ID);
                    let _ = store.read_events(ID);
                }
                Ok(())
            },
        )
        .unwrap();
}

#[test]
fn the_restart_scan_reads_arbitrary_events_without_panicking() {
    let event = prop_oneof![
        (
            proptest::option::of(support::props::junk()),
            proptest::option::of(support::props::junk()),
            proptest::option::of(support::props::junk())
        )
            .prop_map(|(id, status, tool)| {
                let mut event = approval_event("pending");
                let map = event.as_object_mut().unwrap();
                for (key, junk) in [("approval_id", id), ("status", status), ("tool", tool)] {
                    if let Some(junk) = junk {
                        let bytes = apply(br#"{"x":0}"#, &Damage::Field(0, junk));
                        map.insert(
                            key.into(),
                            serde_json::from_slice::<Value>(&bytes)
                                .ok()
                                .and_then(|v| v.get("x").cloned())
                                .unwrap_or(Value::Null),
                        );
                    }
                }
                event
            }),
        Just(json!({"type": "approval"})),
        Just(json!({"type": 7})),
    ];
    runner(64)
        .run(&proptest::collection::vec(event, 0..12), |events| {
            let pending = taud::hub::restart::pending_in(&events);
            prop_assert!(pending.len() <= events.len());
            let tmp = crate::support::temp::dir();
            let store = FileSessionStore::open(tmp.path(), Durability::NoSync).unwrap();
            store
                .create_session(&Session::new(ID, taud::store::now_utc()))
                .unwrap();
            for event in &events {
                store.append_event(ID, event).unwrap();
            }
            let all = taud::hub::scan_mark::ScanPlan::All;
            let outcome = taud::hub::restart::expire_stale_approvals(&store, &all).unwrap();
            prop_assert_eq!(outcome.expired.len(), pending.len());
            prop_assert!(outcome.unfinished.is_empty());
            // A second scan finds nothing left pending.
            let again = taud::hub::restart::expire_stale_approvals(&store, &all).unwrap();
            prop_assert!(again.expired.is_empty(), "still pending: {:?}", again);
            Ok(())
        })
        .unwrap();
}

#[test]
fn the_approval_scan_mark_of_any_content_reads_as_a_plan_that_covers_what_it_noted() {
    use taud::hub::scan_mark::{ScanJournal, ScanPlan};
    let started: Timestamp = "2026-12-01T12:00:00Z".parse().unwrap();
    runner(128)
        .run(&damage(), |damage| {
            let tmp = crate::support::temp::dir();
            let path = tmp.path().join("approval-scan.json");
            let journal = ScanJournal::new(&path, "file");
            journal.record_scan(started, &[]);
            journal.note(ID).unwrap();
            let original = std::fs::read(&path).unwrap();
            let bytes = apply(&original, &damage);
            std::fs::write(&path, &bytes).unwrap();
            let plan = ScanJournal::new(&path, "file").plan();
            if bytes == original {
                prop_assert_eq!(
                    plan.clone(),
                    ScanPlan::Sessions([ID.to_owned()].into_iter().collect())
                );
            }
            // Any other content must read without a panic (the property under test); what it
            // reads as is the mark's own business.
            Ok(())
        })
        .unwrap();
}

#[test]
fn hub_files_of_any_content_are_read_or_ignored_without_panicking() {
    use tau_api::hub_files::{CrashReport, HubPaths, HubState, parse};
    let state = HubState {
        version: 1,
        pid: 4242,
        started_at: "2026-12-01T12:00:00Z".into(),
        heartbeat_at: "2026-12-01T12:00:05Z".into(),
        stopped_at: None,
        heartbeat_seconds: 5,
        control_port: 7878,
        listening_port: Some(7878),
        ready_at: Some("2026-12-01T12:00:01Z".into()),
        profile: "home".into(),
        role: "hub".into(),
        tau_version: "0.1.0".into(),
    };
    let note =
        json!({"version": 1, "pid": 4242, "at": "2026-12-01T12:00:06Z", "reason": "panic: x"});
    let state_text = serde_json::to_vec(&state).unwrap();
    let note_text = serde_json::to_vec(&note).unwrap();
    runner(128)
        .run(
            &(damage(), damage(), any::<bool>()),
            |(state_damage, note_damage, with_note)| {
                let tmp = crate::support::temp::dir();
                let paths = HubPaths::in_dir(tmp.path().join("hub"));
                std::fs::create_dir_all(&paths.dir).unwrap();
                let state_bytes = apply(&state_text, &state_damage);
                std::fs::write(&paths.state_file, &state_bytes).unwrap();
                if with_note {
                    std::fs::write(&paths.crash_file, apply(&note_text, &note_damage)).unwrap();
                }
                // The reader refuses what it cannot read, naming the file.
                if let Ok(text) = std::str::from_utf8(&state_bytes)
                    && let Err(error) = parse::<HubState>(&paths.state_file, text)
                {
                    prop_assert!(error.to_string().contains("state.json"), "{}", error);
                }
                let checked = taud::host::crash::check(&paths).unwrap();
                // A crash report written now is read back by the next start.
                if let Some(report) = &checked.recorded {
                    let last = taud::host::crash::read_last_crash(&paths.last_crash_file);
                    prop_assert_eq!(last.as_ref(), Some(report));
                }
                // A damaged last_crash.json is ignored.
                std::fs::write(&paths.last_crash_file, apply(&state_text, &note_damage)).unwrap();
                let _: Option<CrashReport> =
                    taud::host::crash::read_last_crash(&paths.last_crash_file);
                Ok(())
            },
        )
        .unwrap();
}

/// Every number of every record at the edges of the integer types, one at a time: the cases a
/// random run finds only rarely.
#[test]
fn every_stored_number_at_its_extremes_reads_or_names_its_record() {
    let file_targets = [
        FileTarget::Session,
        FileTarget::Meta,
        FileTarget::Agent,
        FileTarget::Message(0),
        FileTarget::Message(1),
        FileTarget::Events(0),
        FileTarget::Index(4),
    ];
    let row_targets = [
        RowTarget::SessionRecord,
        RowTarget::AgentRecord,
        RowTarget::MessageRecord(1),
        RowTarget::MetaRecord,
        RowTarget::EventRecord(0),
    ];
    for raw in support::props::EXTREME_NUMBERS {
        for pick in 0..3 {
            let damage = Damage::Number(pick, raw);
            for target in &file_targets {
                file_case(target, &damage).unwrap_or_else(|e| panic!("{target:?} {damage:?}: {e}"));
            }
            for target in &row_targets {
                sqlite_case(target, &damage)
                    .unwrap_or_else(|e| panic!("{target:?} {damage:?}: {e}"));
            }
        }
    }
    for column in ["updated_us", "message_count"] {
        for n in [i64::MIN, -1, i64::MAX] {
            let target = RowTarget::SessionColumn(column, SqlJunk::Int(n));
            sqlite_case(&target, &Damage::Truncate(0))
                .unwrap_or_else(|e| panic!("{target:?}: {e}"));
        }
    }
}

#[test]
fn a_message_count_at_the_top_of_its_range_does_not_overflow_the_next_append() {
    let tmp = crate::support::temp::dir();
    let root = tmp.path().join("sessions");
    let store = FileSessionStore::open(&root, Durability::NoSync).unwrap();
    fill(&store);
    store.flush_session(ID).unwrap();
    let path = root.join(ID).join("session.json");
    let mut record: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    record["message_count"] = Value::from(u64::MAX);
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    let next = SessionMessage::new(
        MESSAGES,
        Message::user_text("again"),
        taud::store::now_utc(),
    );
    store.create_message(ID, DEFAULT_AGENT_ID, &next).unwrap();
    let listed = store.list_sessions().unwrap();
    assert_eq!(listed[0].message_count, u64::MAX, "saturated, not wrapped");
    assert_eq!(
        store
            .list_messages(ID, DEFAULT_AGENT_ID, None, 0)
            .unwrap()
            .len(),
        5
    );
}

#[test]
fn a_sqlite_session_row_that_cannot_be_read_is_left_out_of_the_listing() {
    let tmp = crate::support::temp::dir();
    let db = tmp.path().join("sessions.db");
    let store = SqliteSessionStore::open(&db, Durability::NoSync).unwrap();
    fill(&store);
    let other = "20261201-130000-beef";
    store
        .create_session(&Session::new(other, taud::store::now_utc()))
        .unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE sessions SET created_at = 'not a time' WHERE session_id = ?1",
        [ID],
    )
    .unwrap();
    let listed = store.list_sessions().unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, [other]);
    conn.execute(
        "UPDATE sessions SET message_count = 'many' WHERE session_id = ?1",
        [other],
    )
    .unwrap();
    assert!(store.list_sessions().unwrap().is_empty());
    // The damaged session itself still fails naming it.
    conn.execute(
        "UPDATE sessions SET updated_at = 'never' WHERE session_id = ?1",
        [ID],
    )
    .unwrap();
    let err = store.read_session(ID).unwrap_err();
    assert!(err.to_string().contains(ID), "{err}");
}

/// A file where a directory belongs, a directory where a file belongs, a symbolic link or a
/// missing entry, in every place of a session: no reader or write panics, the session record
/// still reads and lists, and an error names the entry.
#[test]
fn a_reshaped_session_tree_never_panics_a_reader_or_a_write() {
    use support::props::targets::{reshape, shapes};
    for shape in shapes() {
        let tmp = crate::support::temp::dir();
        let root = tmp.path().join("sessions");
        let store = FileSessionStore::open(&root, Durability::NoSync).unwrap();
        fill(&store);
        let Some(name) = reshape(&root, shape) else {
            continue;
        };
        let named = |what: &str, result: Result<(), SessionError>| {
            if let Err(error) = result {
                let text = error.to_string();
                assert!(
                    text.contains(&name) || text.contains(DEFAULT_AGENT_ID),
                    "{shape:?} {what}: {text}"
                );
            }
        };
        assert!(store.read_session(ID).unwrap().is_some(), "{shape:?}");
        let listed = store.list_sessions().unwrap();
        assert!(listed.iter().any(|s| s.session_id == ID), "{shape:?}");
        named(
            "read_agent",
            store.read_agent(ID, DEFAULT_AGENT_ID).map(drop),
        );
        named("read_meta", store.read_meta(ID).map(drop));
        named(
            "list_messages",
            store.list_messages(ID, DEFAULT_AGENT_ID, None, 0).map(drop),
        );
        named(
            "read_message",
            store.read_message(ID, DEFAULT_AGENT_ID, 1).map(drop),
        );
        named("read_events", store.read_events(ID).map(drop));
        let now = taud::store::now_utc();
        let next = SessionMessage::new(MESSAGES, Message::user_text("again"), now);
        named(
            "create_message",
            store.create_message(ID, DEFAULT_AGENT_ID, &next),
        );
        named(
            "append_event",
            store.append_event(ID, &approval_event("approved")),
        );
        named("write_meta", store.write_meta(ID, &SessionMeta::default()));
        let fresh = SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now);
        named("update_agent", store.update_agent(ID, &fresh));
    }
}
