//! The records the store properties damage: which file of the `file` backend, which row (and
//! column) of the `sqlite` backend, and how the damage is written there.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use taud::store::DEFAULT_AGENT_ID;

use super::{Damage, ID, MESSAGES, apply};

/// Which record of the file backend is damaged.
#[derive(Debug, Clone)]
pub enum FileTarget {
    Session,
    Meta,
    Agent,
    Message(u64),
    /// A line of `events.jsonl`.
    Events(usize),
    /// A line of the listing index.
    Index(usize),
}

pub fn file_target() -> impl Strategy<Value = FileTarget> {
    prop_oneof![
        Just(FileTarget::Session),
        Just(FileTarget::Meta),
        Just(FileTarget::Agent),
        (0..MESSAGES).prop_map(FileTarget::Message),
        any::<usize>().prop_map(FileTarget::Events),
        any::<usize>().prop_map(FileTarget::Index),
    ]
}

pub fn file_path(root: &Path, target: &FileTarget) -> PathBuf {
    let dir = root.join(ID);
    let agent = dir.join("agents").join(DEFAULT_AGENT_ID);
    match target {
        FileTarget::Session => dir.join("session.json"),
        FileTarget::Meta => dir.join("meta.json"),
        FileTarget::Agent => agent.join("agent.json"),
        FileTarget::Message(id) => agent.join("messages").join(format!("{id:06}.json")),
        FileTarget::Events(_) => dir.join("events.jsonl"),
        FileTarget::Index(_) => root.join(".sessions-index.jsonl"),
    }
}

/// Which row (and column) of the sqlite backend is damaged.
#[derive(Debug, Clone)]
pub enum RowTarget {
    SessionRecord,
    AgentRecord,
    MessageRecord(u64),
    MetaRecord,
    EventRecord(u64),
    /// A column of the sessions table set to a raw SQL value.
    SessionColumn(&'static str, SqlJunk),
}

/// A value of any SQL type.
#[derive(Debug, Clone)]
pub enum SqlJunk {
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl rusqlite::ToSql for SqlJunk {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            SqlJunk::Int(n) => n.to_sql(),
            SqlJunk::Real(f) => f.to_sql(),
            SqlJunk::Text(t) => t.to_sql(),
            SqlJunk::Blob(b) => b.to_sql(),
        }
    }
}

pub fn sql_junk() -> impl Strategy<Value = SqlJunk> {
    prop_oneof![
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(-1i64), any::<i64>()]
            .prop_map(SqlJunk::Int),
        any::<f64>().prop_map(SqlJunk::Real),
        super::text().prop_map(SqlJunk::Text),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(SqlJunk::Blob),
    ]
}

pub fn row_target() -> impl Strategy<Value = RowTarget> {
    prop_oneof![
        Just(RowTarget::SessionRecord),
        Just(RowTarget::AgentRecord),
        (0..MESSAGES).prop_map(RowTarget::MessageRecord),
        Just(RowTarget::MetaRecord),
        (0u64..2).prop_map(RowTarget::EventRecord),
        (
            proptest::sample::select(vec![
                "created_at",
                "updated_at",
                "updated_us",
                "message_count",
                "record"
            ]),
            sql_junk()
        )
            .prop_map(|(column, junk)| RowTarget::SessionColumn(column, junk)),
    ]
}

pub fn damage_row(db: &Path, target: &RowTarget, damage: &Damage) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let (select, update): (&str, &str) = match target {
        RowTarget::SessionRecord => (
            "SELECT record FROM sessions WHERE session_id = ?1",
            "UPDATE sessions SET record = ?2 WHERE session_id = ?1",
        ),
        RowTarget::AgentRecord => (
            "SELECT record FROM agents WHERE session_id = ?1",
            "UPDATE agents SET record = ?2 WHERE session_id = ?1",
        ),
        RowTarget::MetaRecord => (
            "SELECT record FROM meta WHERE session_id = ?1",
            "UPDATE meta SET record = ?2 WHERE session_id = ?1",
        ),
        RowTarget::MessageRecord(id) | RowTarget::EventRecord(id) => {
            let (table, column, key) = match target {
                RowTarget::MessageRecord(_) => ("messages", "record", "message_id"),
                _ => ("events", "event", "seq"),
            };
            let text: String = conn
                .query_row(
                    &format!("SELECT {column} FROM {table} WHERE session_id = ?1 AND {key} = ?2"),
                    rusqlite::params![ID, *id as i64],
                    |row| row.get(0),
                )
                .unwrap();
            let damaged = String::from_utf8_lossy(&apply(text.as_bytes(), damage)).into_owned();
            conn.execute(
                &format!("UPDATE {table} SET {column} = ?3 WHERE session_id = ?1 AND {key} = ?2"),
                rusqlite::params![ID, *id as i64, damaged],
            )
            .unwrap();
            return;
        }
        RowTarget::SessionColumn(column, junk) => {
            conn.execute(
                &format!("UPDATE sessions SET {column} = ?2 WHERE session_id = ?1"),
                rusqlite::params![ID, junk],
            )
            .unwrap();
            return;
        }
    };
    let text: String = conn.query_row(select, [ID], |row| row.get(0)).unwrap();
    let damaged = String::from_utf8_lossy(&apply(text.as_bytes(), damage)).into_owned();
    conn.execute(update, rusqlite::params![ID, damaged])
        .unwrap();
}

/// Damages one record of the file store at `root`; returns its file name.
pub fn damage_file(root: &Path, target: &FileTarget, damage: &Damage) -> String {
    let path = file_path(root, target);
    let original = std::fs::read(&path).unwrap();
    let bytes = match target {
        FileTarget::Events(line) | FileTarget::Index(line) => {
            super::apply_to_line(&original, *line, damage)
        }
        _ => apply(&original, damage),
    };
    std::fs::write(&path, &bytes).unwrap();
    path.file_name().unwrap().to_str().unwrap().to_owned()
}

/// A change to the file store's tree instead of a record's content.
#[derive(Debug, Clone, Copy)]
pub enum Shape {
    /// A file where the directory was.
    FileForDir(&'static str),
    /// A directory where the file was.
    DirForFile(&'static str),
    /// A symbolic link (to a copy of the original) where the entry was.
    Symlink(&'static str),
    /// The entry removed.
    Gone(&'static str),
}

/// Entries of a session, relative to the sessions directory's `ID` directory.
pub const SHAPED: [&str; 7] = [
    "agents",
    "agents/tau",
    "agents/tau/messages",
    "agents/tau/agent.json",
    "agents/tau/messages/000001.json",
    "meta.json",
    "events.jsonl",
];

/// Every shape change of every entry in [`SHAPED`].
pub fn shapes() -> Vec<Shape> {
    SHAPED
        .iter()
        .flat_map(|p| {
            [
                Shape::FileForDir(p),
                Shape::DirForFile(p),
                Shape::Symlink(p),
                Shape::Gone(p),
            ]
        })
        .collect()
}

/// Reshapes the session `ID` under `sessions`; false when the shape does not apply (a file for
/// a file). Returns the entry's name.
pub fn reshape(sessions: &Path, shape: Shape) -> Option<String> {
    let session = sessions.join(ID);
    let (rel, is_dir_now) = match shape {
        Shape::FileForDir(p) | Shape::DirForFile(p) | Shape::Symlink(p) | Shape::Gone(p) => {
            (p, session.join(p).is_dir())
        }
    };
    let path = session.join(rel);
    let remove = |path: &Path| {
        if path.is_dir() {
            std::fs::remove_dir_all(path).unwrap();
        } else {
            std::fs::remove_file(path).unwrap();
        }
    };
    match shape {
        Shape::FileForDir(_) if is_dir_now => {
            remove(&path);
            std::fs::write(&path, b"{}").unwrap();
        }
        Shape::DirForFile(_) if !is_dir_now => {
            remove(&path);
            std::fs::create_dir(&path).unwrap();
        }
        Shape::Symlink(_) => {
            let aside = sessions
                .parent()
                .unwrap()
                .join(format!("aside-{}", rel.replace('/', "-")));
            std::fs::rename(&path, &aside).unwrap();
            std::os::unix::fs::symlink(&aside, &path).unwrap();
        }
        Shape::Gone(_) => remove(&path),
        _ => return None,
    }
    Some(rel.rsplit('/').next().unwrap().to_owned())
}
