//! Shared by the session test binaries: how each built-in backend is opened on a temporary data
//! directory, and small message builders.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use taud::message::Message;
use taud::session::{
    Durability, SessionBackends, SessionMessage, SessionStore, SessionStoreConfig, now_utc,
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
