//! Session storage: every conversation is a session with its messages, its agent events and its
//! metadata, kept by a [`SessionStore`] backend (`file` or `sqlite`, chosen by `[sessions].backend`
//! through a [`SessionBackends`] registry value).
//!
//! Invariants (both backends, checked by one contract suite in `daemon/tests/store_contract.rs`):
//! ids are plain names checked before any I/O; nothing is ever deleted and no message overwritten;
//! every stored record carries a format version and readers ignore unknown keys; a write that
//! returned is durable (with `Durability::Full`) and a crash never leaves a partial record visible.
//!
//! Layout: `contract` (the [`SessionStore`] trait, `NewSession`, `Durability`), `checked_store`
//! (the one implementation of that trait over the built-in backends: id validation, format
//! versions, the rules of an update), `backend` (the narrower `StoreBackend` trait a backend
//! implements, trusting its inputs), `records` and `meta` (what is stored), `id`, `store_error`,
//! `context_mode` (the conversation manager a session was recorded under), `context_check` (the
//! check on open), `resume` (listings), `registry` (backend by name), `blocking` (`store_io`), and
//! the two backends `file` and `sqlite`. See ARCHITECTURE.md (store); this module imports only
//! `message` from the rest of the crate.

mod backend;
mod blocking;
mod checked_store;
mod context_check;
mod context_mode;
mod contract;
mod file;
mod id;
mod meta;
mod records;
mod registry;
mod resume;
#[cfg(feature = "hub")]
mod sqlite;
mod store_error;

pub(crate) use blocking::store_io;
pub use checked_store::CheckedStore;
pub use context_check::{check_context, read_agent_for_mode};
pub use context_mode::{ContextMode, SessionContextMismatch};
pub use contract::{Durability, SessionStore, create_fresh_session, event_record};
pub use contract::{NewSession, create_fresh_complete_session};
pub use file::FileSessionStore;
pub use id::{MAX_ID_LEN, new_session_id, validate_id};
pub use meta::{SessionMeta, TITLE_MAX_CHARS, title_from};
pub use records::{
    ConversationManagerState, DEFAULT_AGENT_ID, FORMAT_VERSION, Session, SessionAgent, SessionInfo,
    SessionMessage, SessionType, check_version, now_utc,
};
pub use records::{REPAIR_NOTICE_KEY, REPAIR_NOTICE_VERSION, RepairNotice};
pub use registry::{
    DEFAULT_SESSION_BACKEND, SessionBackendFactory, SessionBackends, SessionStoreConfig,
    open_session_store,
};
pub use resume::{
    RECENT_SESSIONS_LIMIT, SessionListing, most_recent_session, recent_sessions, session_by_index,
};
#[cfg(feature = "hub")]
pub use sqlite::SqliteSessionStore;
pub use store_error::{IdKind, SessionError};
