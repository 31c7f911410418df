//! Shared by the session test binaries: how each built-in backend is opened on a temporary data
//! directory, a reopenable harness, and small builders.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use crate::support::temp::TestDir;
use taud::message::Message;
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, Durability, SessionAgent, SessionBackends, SessionMessage,
    SessionStore, SessionStoreConfig, create_fresh_session, now_utc,
};

/// The built-in backends the contract applies to.
pub const BACKENDS: [&str; 2] = ["file", "sqlite"];

/// Opens the built-in backend `name` under `data_dir`, fully durable.
pub fn open_backend(name: &str, data_dir: &Path) -> Arc<dyn SessionStore> {
    let config = SessionStoreConfig {
        durability: Durability::Full,
        ..SessionStoreConfig::under(data_dir)
    };
    SessionBackends::builtin().open(name, &config).unwrap()
}

/// A message record with a user text.
pub fn user_message(id: u64, text: &str) -> SessionMessage {
    SessionMessage::new(id, Message::user_text(text), now_utc())
}

/// A message record with an assistant text.
pub fn assistant_message(id: u64, text: &str) -> SessionMessage {
    SessionMessage::new(id, Message::assistant_text(text), now_utc())
}

/// A store of one backend on a temporary data directory, reopenable.
pub struct Harness {
    pub backend: &'static str,
    pub store: Arc<dyn SessionStore>,
    /// Declared last, so dropped last: what writes into it is gone first.
    pub dir: TestDir,
}

impl Harness {
    pub fn new(backend: &'static str) -> Self {
        let dir = crate::support::temp::dir();
        let store = open_backend(backend, dir.path());
        Self {
            backend,
            dir,
            store,
        }
    }

    /// A new store instance on the same data (as after a restart).
    pub fn reopen(&self) -> Arc<dyn SessionStore> {
        open_backend(self.backend, self.dir.path())
    }

    /// A session with the default agent.
    pub fn session_with_agent(&self) -> String {
        session_with_agent(self.store.as_ref())
    }
}

/// A new session in `store` with the default agent; its id.
pub fn session_with_agent(store: &dyn SessionStore) -> String {
    let session = create_fresh_session(store).unwrap();
    store
        .create_agent(
            &session.session_id,
            &SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now_utc()),
        )
        .unwrap();
    session.session_id
}

/// Every file name under `dir`, for "nothing was touched" checks.
pub fn tree(dir: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap();
            // The store's clean-stop mark comes and goes with a store opened and closed beside
            // the one under test; it is no session's data.
            if entry.file_name() == ".clean-stop" {
                continue;
            }
            names.insert(entry.path().display().to_string());
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            }
        }
    }
    names
}

/// Opens the file store under `dir` (its `sessions/`), fully durable.
pub fn open_file_store(dir: &Path) -> taud::store::FileSessionStore {
    taud::store::FileSessionStore::open(dir.join("sessions"), taud::store::Durability::Full)
        .unwrap()
}

/// A file-store session under `dir` with an agent and two messages, closed (no journal): its id
/// and its directory.
pub fn closed_file_session(dir: &Path) -> (String, std::path::PathBuf) {
    let store = open_file_store(dir);
    let id = session_with_agent(&store);
    store
        .create_message(&id, DEFAULT_AGENT_ID, &user_message(0, "first"))
        .unwrap();
    store
        .create_message(&id, DEFAULT_AGENT_ID, &assistant_message(1, "reply"))
        .unwrap();
    store
        .append_event(&id, &serde_json::json!({"type": "turn"}))
        .unwrap();
    store.close_session(&id).unwrap();
    let dir = dir.join("sessions").join(&id);
    (id, dir)
}

/// A temporary directory holding [`closed_file_session`]'s session: the directory, the id, the
/// session's directory.
pub fn closed_file_fixture() -> (TestDir, String, std::path::PathBuf) {
    let dir = crate::support::temp::dir();
    let (id, session_dir) = closed_file_session(dir.path());
    (dir, id, session_dir)
}

/// The texts of the default agent's stored messages, in order.
pub fn stored_texts(store: &dyn SessionStore, id: &str) -> Vec<String> {
    store
        .list_messages(id, DEFAULT_AGENT_ID, None, 0)
        .unwrap()
        .iter()
        .map(|m| m.message.text())
        .collect()
}

/// The `type` of each stored event, in order.
pub fn stored_event_types(store: &dyn SessionStore, id: &str) -> Vec<serde_json::Value> {
    store
        .read_events(id)
        .unwrap()
        .iter()
        .map(|e| e["type"].clone())
        .collect()
}
