//! The file backend's own promises beyond the shared contract: the seed's exact layout, private
//! permissions, refusing symbolic links anywhere under the root, tolerating a torn event line, and
//! ignoring half-finished creations.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::fs;
use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use taud::store::{
    ContextMode, Durability, FileSessionStore, SessionAgent, SessionError, SessionMeta,
    SessionStore, create_fresh_session, now_utc,
};

use support::store::user_message;

fn store(dir: &Path) -> FileSessionStore {
    FileSessionStore::open(dir.join("sessions"), Durability::Full).unwrap()
}

fn populated(dir: &Path) -> (FileSessionStore, String, PathBuf) {
    let store = store(dir);
    let id = create_fresh_session(&store).unwrap().session_id;
    store
        .create_agent(
            &id,
            &SessionAgent::new("tau", ContextMode::Sliding, now_utc()),
        )
        .unwrap();
    store
        .create_message(&id, "tau", &user_message(0, "hello"))
        .unwrap();
    store
        .create_message(&id, "tau", &user_message(1, "again"))
        .unwrap();
    store.flush_session(&id).unwrap();
    store.append_event(&id, &json!({"type": "turn"})).unwrap();
    store
        .write_meta(
            &id,
            &SessionMeta {
                channel: Some("terminal".into()),
                ..SessionMeta::default()
            },
        )
        .unwrap();
    // Closed as the hub closes a session: every record in its file, no journal left.
    store.close_session(&id).unwrap();
    let session_dir = dir.join("sessions").join(&id);
    (store, id, session_dir)
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

fn all_paths(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(all_paths(&path));
        }
        out.push(path);
    }
    out
}

#[test]
fn the_layout_is_the_seeds() {
    let dir = crate::support::temp::dir();
    let (_store, _id, session_dir) = populated(dir.path());
    let mut names: Vec<String> = all_paths(&session_dir)
        .iter()
        .map(|p| p.strip_prefix(&session_dir).unwrap().display().to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            // The spare `session.json` is exchanged with at a flush (no inode freed): the
            // record before the last flush, a name no reader takes.
            ".session.json.spare",
            "agents",
            "agents/tau",
            "agents/tau/agent.json",
            "agents/tau/messages",
            "agents/tau/messages/000000.json",
            "agents/tau/messages/000001.json",
            "events.jsonl",
            "meta.json",
            "session.json",
        ]
    );
    let record: Value = serde_json::from_slice(
        &fs::read(session_dir.join("agents/tau/messages/000001.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["v"], 1);
    assert_eq!(record["message_id"], 1);
    assert_eq!(
        record["message"],
        json!({"role": "user", "content": [{"text": "again"}]})
    );
    let session: Value =
        serde_json::from_slice(&fs::read(session_dir.join("session.json")).unwrap()).unwrap();
    assert_eq!(session["v"], 1);
    assert_eq!(session["session_type"], "AGENT");
    assert_eq!(session["message_count"], 2);
}

#[test]
fn directories_are_0700_and_files_0600() {
    let dir = crate::support::temp::dir();
    let (_store, _id, session_dir) = populated(dir.path());
    assert_eq!(mode(&dir.path().join("sessions")), 0o700);
    assert_eq!(mode(&session_dir), 0o700);
    for path in all_paths(&session_dir) {
        let expected = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(&path), expected, "{}", path.display());
    }
}

#[test]
fn a_symlinked_session_directory_is_refused() {
    let dir = crate::support::temp::dir();
    let (store, id, session_dir) = populated(dir.path());
    let elsewhere = dir.path().join("elsewhere");
    fs::rename(&session_dir, &elsewhere).unwrap();
    symlink(&elsewhere, &session_dir).unwrap();
    for result in [
        store.read_session(&id).map(drop),
        store.read_agent(&id, "tau").map(drop),
        store.list_messages(&id, "tau", None, 0).map(drop),
        store.create_message(&id, "tau", &user_message(2, "x")),
        store.read_events(&id).map(drop),
        store.read_meta(&id).map(drop),
    ] {
        assert!(
            matches!(result, Err(SessionError::Symlink { .. })),
            "{result:?}"
        );
    }
    assert!(
        store.list_sessions().unwrap().is_empty(),
        "a symlinked session was listed"
    );
    assert!(!elsewhere.join("agents/tau/messages/000002.json").exists());
}

#[test]
fn symlinks_deeper_in_a_session_are_refused() {
    let dir = crate::support::temp::dir();
    let (store, id, session_dir) = populated(dir.path());
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();

    // The messages directory.
    let messages = session_dir.join("agents/tau/messages");
    fs::rename(&messages, outside.join("messages")).unwrap();
    symlink(outside.join("messages"), &messages).unwrap();
    let err = store
        .create_message(&id, "tau", &user_message(2, "x"))
        .unwrap_err();
    assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
    let err = store.list_messages(&id, "tau", None, 0).unwrap_err();
    assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
    fs::remove_file(&messages).unwrap();
    fs::rename(outside.join("messages"), &messages).unwrap();

    // One message file.
    let message = messages.join("000001.json");
    fs::rename(&message, outside.join("m.json")).unwrap();
    symlink(outside.join("m.json"), &message).unwrap();
    let err = store.read_message(&id, "tau", 1).unwrap_err();
    assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
    let err = store.list_messages(&id, "tau", None, 0).unwrap_err();
    assert!(matches!(err, SessionError::Symlink { .. }), "{err}");

    // meta.json and events.jsonl: neither read nor written through.
    let target = outside.join("target");
    fs::write(&target, b"{}").unwrap();
    fs::remove_file(session_dir.join("meta.json")).unwrap();
    symlink(&target, session_dir.join("meta.json")).unwrap();
    assert!(matches!(
        store.read_meta(&id),
        Err(SessionError::Symlink { .. })
    ));
    let err = store.write_meta(&id, &SessionMeta::default()).unwrap_err();
    assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
    fs::remove_file(session_dir.join("events.jsonl")).unwrap();
    symlink(&target, session_dir.join("events.jsonl")).unwrap();
    let err = store.append_event(&id, &json!({"x": 1})).unwrap_err();
    assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
    assert_eq!(
        fs::read(&target).unwrap(),
        b"{}",
        "a symlink target was written"
    );
}

#[test]
fn a_torn_last_event_line_is_skipped_and_the_next_append_is_kept() {
    let dir = crate::support::temp::dir();
    let (store, id, session_dir) = populated(dir.path());
    let mut file = fs::OpenOptions::new()
        .append(true)
        .open(session_dir.join("events.jsonl"))
        .unwrap();
    file.write_all(br#"{"type":"tool_call","tool":"lig"#)
        .unwrap();
    assert_eq!(
        store.read_events(&id).unwrap(),
        vec![json!({"v": 1, "type": "turn"})]
    );
    store.append_event(&id, &json!({"type": "after"})).unwrap();
    assert_eq!(
        store.read_events(&id).unwrap(),
        vec![
            json!({"v": 1, "type": "turn"}),
            json!({"v": 1, "type": "after"})
        ]
    );
}

#[test]
fn half_created_sessions_and_temporary_files_are_ignored() {
    let dir = crate::support::temp::dir();
    let (store, id, session_dir) = populated(dir.path());
    let root = dir.path().join("sessions");
    // A creation that died after mkdir, and a leftover temporary file of a message write.
    fs::create_dir(root.join("20260101-000000-dead")).unwrap();
    fs::write(
        session_dir.join("agents/tau/messages/.000002.json.1234abcd.tmp"),
        b"{\"trunc",
    )
    .unwrap();
    fs::write(root.join("stray-file"), b"").unwrap();
    let listed = store.list_sessions().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].session_id, id);
    assert_eq!(store.read_session("20260101-000000-dead").unwrap(), None);
    assert_eq!(store.list_messages(&id, "tau", None, 0).unwrap().len(), 2);
    // The interrupted creation can be completed.
    store
        .create_session(&taud::store::Session::new(
            "20260101-000000-dead",
            now_utc(),
        ))
        .unwrap();
}

#[test]
fn a_record_from_a_newer_format_is_refused_not_misread() {
    let dir = crate::support::temp::dir();
    let (store, id, session_dir) = populated(dir.path());
    let path = session_dir.join("meta.json");
    let mut meta: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    meta["v"] = json!(2);
    fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let err = store.read_meta(&id).unwrap_err();
    assert!(
        matches!(err, SessionError::UnsupportedFormat { version: 2, .. }),
        "{err}"
    );
}

#[test]
fn a_damaged_message_is_an_error_naming_the_file() {
    let dir = crate::support::temp::dir();
    let (store, id, session_dir) = populated(dir.path());
    let path = session_dir.join("agents/tau/messages/000001.json");
    fs::write(&path, b"{\"v\":1,").unwrap();
    let err = store.list_messages(&id, "tau", None, 0).unwrap_err();
    assert!(matches!(err, SessionError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("000001.json"), "{err}");
}

#[test]
fn a_lost_listing_index_is_rebuilt_from_the_sessions() {
    let dir = crate::support::temp::dir();
    let (store, id, _session_dir) = populated(dir.path());
    let other = create_fresh_session(&store).unwrap().session_id;
    let index = dir.path().join("sessions/.sessions-index.jsonl");
    assert!(index.is_file(), "no listing index");
    assert_eq!(mode(&index), 0o600);
    let before = store.list_sessions().unwrap();
    fs::remove_file(&index).unwrap();
    let reopened = FileSessionStore::open(dir.path().join("sessions"), Durability::Full).unwrap();
    let after = reopened.list_sessions().unwrap();
    assert_eq!(after, before);
    assert_eq!(after.len(), 2);
    assert_eq!(
        after
            .iter()
            .find(|s| s.session_id == id)
            .unwrap()
            .message_count,
        2
    );
    assert!(after.iter().any(|s| s.session_id == other));
    assert!(index.is_file(), "the index was not written back");
}

#[test]
fn a_complete_session_without_its_session_json_is_invisible_and_not_reused() {
    use taud::store::{
        ContextMode, NewSession, Session, SessionAgent, SessionMessage, SessionMeta,
    };
    let dir = crate::support::temp::dir();
    let store = store(dir.path());
    let now = now_utc();
    let new = NewSession {
        session: Session::new("20260101-000000-beef", now),
        agent: SessionAgent::new("tau", ContextMode::Sliding, now),
        messages: vec![SessionMessage::new(
            0,
            taud::message::Message::user_text("summary"),
            now,
        )],
        meta: SessionMeta::default(),
    };
    store.create_complete_session(&new).unwrap();
    let session_dir = dir.path().join("sessions/20260101-000000-beef");
    for name in [
        "meta.json",
        "agents/tau/agent.json",
        "agents/tau/messages/000000.json",
        "session.json",
    ] {
        assert!(session_dir.join(name).is_file(), "{name}");
    }
    // What a creation that failed before its last write leaves: everything but session.json
    // (and so no listing index line, which is written after it).
    fs::remove_file(session_dir.join("session.json")).unwrap();
    fs::remove_file(dir.path().join("sessions/.sessions-index.jsonl")).unwrap();
    let store = self::store(dir.path());
    assert_eq!(store.read_session("20260101-000000-beef").unwrap(), None);
    assert!(store.list_sessions().unwrap().is_empty());
    // Its directory is not taken over by another whole creation (that one picks a new id).
    let err = store.create_complete_session(&new).unwrap_err();
    assert!(matches!(err, SessionError::SessionExists(_)), "{err}");
}

#[test]
fn a_created_session_is_not_read_back_at_its_first_append_nor_written_again_unchanged() {
    use taud::store::{NewSession, Session, SessionMeta};
    let dir = crate::support::temp::dir();
    let store = store(dir.path());
    let now = now_utc();
    let new = |id: &str| NewSession {
        session: Session::new(id, now),
        agent: SessionAgent::new("tau", ContextMode::Sliding, now),
        messages: Vec::new(),
        meta: SessionMeta::default(),
    };
    let (written, idle) = ("20260101-000000-0001", "20260101-000000-0002");
    store.create_complete_session(&new(written)).unwrap();
    store.create_complete_session(&new(idle)).unwrap();
    let sessions = dir.path().join("sessions");
    // Changed behind the store's back after the creation: the store goes on from what it
    // created (a count of 0), not from the file.
    let record = sessions.join(written).join("session.json");
    let mut file: Value = serde_json::from_slice(&fs::read(&record).unwrap()).unwrap();
    file["message_count"] = json!(7);
    fs::write(&record, serde_json::to_vec(&file).unwrap()).unwrap();
    store
        .create_message(written, "tau", &user_message(0, "hello"))
        .unwrap();
    store.flush_session(written).unwrap();
    let flushed: Value = serde_json::from_slice(&fs::read(&record).unwrap()).unwrap();
    assert_eq!(flushed["message_count"], json!(1));
    // A session created and never written to: its flush writes nothing (no spare made).
    store.flush_session(idle).unwrap();
    assert!(!sessions.join(idle).join(".session.json.spare").exists());
    assert_eq!(store.read_session(idle).unwrap().unwrap().session_id, idle);
}
