//! The sqlite backend's schema history: a database created with the first schema (a frozen copy of
//! migration 1, kept here on purpose so editing a released migration breaks this test) opens,
//! migrates and reads; a newer database is refused; the file is private and in WAL mode.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::PermissionsExt;

use rusqlite::Connection;
use serde_json::json;
use taud::store::{Durability, SessionError, SessionStore, SqliteSessionStore};

use support::store::user_message;

/// Schema version 1 exactly as released.
const SCHEMA_V1: &str = "
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    record TEXT NOT NULL
);
CREATE TABLE agents (
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    agent_id TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (session_id, agent_id)
);
CREATE TABLE messages (
    session_id TEXT NOT NULL,
    agent_id TEXT NOT NULL,
    message_id INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (session_id, agent_id, message_id),
    FOREIGN KEY (session_id, agent_id) REFERENCES agents(session_id, agent_id)
);
CREATE TABLE events (
    session_id TEXT NOT NULL REFERENCES sessions(session_id),
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE meta (
    session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions(session_id),
    record TEXT NOT NULL
);
PRAGMA user_version = 1;
";

/// Two sessions as a version-1 tau wrote them (timestamps in the form Strands uses, too).
const DATA_V1: &str = r#"
INSERT INTO sessions VALUES ('20260101-100000-aaaa', '2026-01-01T10:00:00.000000Z', '2026-01-01T12:00:00.000000Z',
  '{"v":1,"session_id":"20260101-100000-aaaa","session_type":"AGENT","created_at":"2026-01-01T10:00:00.000000Z","updated_at":"2026-01-01T10:00:00.000000Z"}');
INSERT INTO sessions VALUES ('20260102-100000-bbbb', '2026-01-02T10:00:00+00:00', '2026-01-02T11:00:00.5+00:00',
  '{"session_id":"20260102-100000-bbbb","session_type":"AGENT","created_at":"2026-01-02T10:00:00+00:00","updated_at":"2026-01-02T10:00:00+00:00"}');
INSERT INTO agents VALUES ('20260101-100000-aaaa', 'tau',
  '{"v":1,"agent_id":"tau","state":{},"conversation_manager_state":{"__name__":"SlidingWindowConversationManager","removed_message_count":0},"created_at":"2026-01-01T10:00:00.000000Z","updated_at":"2026-01-01T10:00:00.000000Z"}');
INSERT INTO messages VALUES ('20260101-100000-aaaa', 'tau', 0,
  '{"v":1,"message_id":0,"message":{"role":"user","content":[{"text":"hi"}]},"redact_message":null,"created_at":"2026-01-01T11:00:00.000000Z","updated_at":"2026-01-01T11:00:00.000000Z"}');
INSERT INTO messages VALUES ('20260101-100000-aaaa', 'tau', 1,
  '{"v":1,"message_id":1,"message":{"role":"assistant","content":[{"text":"hello"}]},"redact_message":null,"created_at":"2026-01-01T12:00:00.000000Z","updated_at":"2026-01-01T12:00:00.000000Z"}');
INSERT INTO events VALUES ('20260101-100000-aaaa', 0, '{"v":1,"type":"turn"}');
INSERT INTO meta VALUES ('20260101-100000-aaaa', '{"v":1,"channel":"terminal","title":"hi"}');
"#;

#[test]
fn a_database_of_the_first_schema_opens_and_reads() {
    let dir = crate::support::temp::dir();
    let path = dir.path().join("sessions.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(SCHEMA_V1).unwrap();
        conn.execute_batch(DATA_V1).unwrap();
    }
    let store = SqliteSessionStore::open(&path, Durability::Full).unwrap();
    assert_eq!(store.schema_version().unwrap(), 2);

    let listed = store.list_sessions().unwrap();
    let ids: Vec<&str> = listed.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(ids, ["20260102-100000-bbbb", "20260101-100000-aaaa"]);
    assert_eq!(listed[1].message_count, 2);
    assert_eq!(listed[0].message_count, 0);
    assert_eq!(listed[0].updated_at.to_string(), "2026-01-02T11:00:00.5Z");

    let id = "20260101-100000-aaaa";
    let messages = store.list_messages(id, "tau", None, 0).unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[1].message.text(), "hello");
    assert_eq!(
        store.read_events(id).unwrap(),
        vec![json!({"v": 1, "type": "turn"})]
    );
    assert_eq!(
        store.read_meta(id).unwrap().unwrap().title.as_deref(),
        Some("hi")
    );
    assert_eq!(
        store
            .read_session("20260102-100000-bbbb")
            .unwrap()
            .unwrap()
            .v,
        1
    );

    // The migrated database takes new messages and keeps counting.
    store
        .create_message(id, "tau", &user_message(2, "more"))
        .unwrap();
    let listed = store.list_sessions().unwrap();
    assert_eq!(listed[0].session_id, id);
    assert_eq!(listed[0].message_count, 3);

    // Opening again runs no migration twice.
    drop(store);
    let store = SqliteSessionStore::open(&path, Durability::Full).unwrap();
    assert_eq!(store.schema_version().unwrap(), 2);
    assert_eq!(store.list_sessions().unwrap()[0].message_count, 3);
}

#[test]
fn a_database_from_a_newer_tau_is_refused_untouched() {
    let dir = crate::support::temp::dir();
    let path = dir.path().join("sessions.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let err = SqliteSessionStore::open(&path, Durability::Full)
        .err()
        .unwrap();
    assert!(
        matches!(err, SessionError::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
    let conn = Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 99);
}

#[test]
fn the_database_is_private_and_in_wal_mode() {
    let dir = crate::support::temp::dir();
    let path = dir.path().join("data").join("sessions.db");
    let store = SqliteSessionStore::open(&path, Durability::Full).unwrap();
    taud::store::create_fresh_session(&store).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir.path().join("data")), 0o700);
    let wal = dir.path().join("data").join("sessions.db-wal");
    assert!(wal.exists(), "no WAL file");
    assert_eq!(mode(&wal), 0o600);
    let conn = Connection::open(&path).unwrap();
    let journal: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(journal, "wal");
}

/// The database file is created 0600, never created with sqlite's 0644 and narrowed after: the
/// directory is watched while a store is created and written, and no attribute change (a chmod)
/// ever reaches the database, which ends 0600: a file whose mode never changed had its final mode
/// from the start. sqlite opens its companions with the database's mode (it may then fchown them
/// to the database's owner when run as root, an attribute change too), so they end 0600.
#[test]
fn a_new_database_is_private_from_its_creation() {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let dir = crate::support::temp::dir();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let watch = Inotify::init(InitFlags::IN_NONBLOCK).unwrap();
    watch
        .add_watch(&data, AddWatchFlags::IN_ATTRIB | AddWatchFlags::IN_CREATE)
        .unwrap();
    let path = data.join("sessions.db");
    let store = SqliteSessionStore::open(&path, Durability::Full).unwrap();
    taud::store::create_fresh_session(&store).unwrap();
    let mut created = Vec::new();
    let mut changed = Vec::new();
    while let Ok(events) = watch.read_events() {
        for event in events {
            let name = event
                .name
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            if event.mask.contains(AddWatchFlags::IN_CREATE) {
                created.push(name.clone());
            }
            if event.mask.contains(AddWatchFlags::IN_ATTRIB) && name == "sessions.db" {
                changed.push(name);
            }
        }
    }
    assert!(created.contains(&"sessions.db".to_owned()), "{created:?}");
    assert!(
        changed.is_empty(),
        "modes changed after creation: {changed:?}"
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for name in ["sessions.db", "sessions.db-wal", "sessions.db-shm"] {
        assert_eq!(mode(&data.join(name)), 0o600, "{name}");
    }
}

/// A database (and its WAL and shared-memory files) left 0644 by an older version is narrowed.
#[test]
fn an_older_wider_database_is_narrowed() {
    let dir = crate::support::temp::dir();
    let path = dir.path().join("sessions.db");
    let store = SqliteSessionStore::open(&path, Durability::Full).unwrap();
    taud::store::create_fresh_session(&store).unwrap();
    let wide = std::fs::Permissions::from_mode(0o644);
    let names = ["sessions.db", "sessions.db-wal", "sessions.db-shm"];
    for name in names {
        std::fs::set_permissions(dir.path().join(name), wide.clone()).unwrap();
    }
    let again = SqliteSessionStore::open(&path, Durability::Full).unwrap();
    assert_eq!(again.list_sessions().unwrap().len(), 1);
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for name in names {
        assert_eq!(mode(&dir.path().join(name)), 0o600, "{name}");
    }
    drop(store);
}

#[test]
fn a_symlinked_database_is_refused() {
    let dir = crate::support::temp::dir();
    let real = dir.path().join("real.db");
    std::fs::write(&real, b"").unwrap();
    let link = dir.path().join("sessions.db");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let err = SqliteSessionStore::open(&link, Durability::Full)
        .err()
        .unwrap();
    assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
}

#[test]
fn a_complete_session_that_fails_part_way_leaves_nothing() {
    use taud::store::{
        ContextMode, DEFAULT_AGENT_ID, NewSession, Session, SessionAgent, SessionMeta,
        new_session_id, now_utc,
    };
    let dir = crate::support::temp::dir();
    let path = dir.path().join("sessions.db");
    let store = SqliteSessionStore::open(&path, Durability::NoSync).unwrap();
    let now = now_utc();
    let id = new_session_id(now).unwrap();
    // A stray metadata row for the id (written without foreign keys) makes the last insert of
    // the creation fail, after the session, agent and messages rows went in.
    let raw = Connection::open(&path).unwrap();
    raw.pragma_update(None, "foreign_keys", false).unwrap();
    raw.execute(
        "INSERT INTO meta (session_id, record) VALUES (?1, '{}')",
        [&id],
    )
    .unwrap();
    drop(raw);
    let new = NewSession {
        session: Session::new(id.clone(), now),
        agent: SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now),
        messages: vec![user_message(0, "summary")],
        meta: SessionMeta::default(),
    };
    assert!(store.create_complete_session(&new).is_err());
    assert_eq!(store.read_session(&id).unwrap(), None);
    assert!(store.list_sessions().unwrap().is_empty());
    let raw = Connection::open(&path).unwrap();
    for table in ["sessions", "agents", "messages"] {
        let rows: i64 = raw
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
                row.get(0)
            })
            .unwrap();
        assert_eq!(rows, 0, "{table}");
    }
}
