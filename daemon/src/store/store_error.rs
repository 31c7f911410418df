//! `SessionError`: every way a session store operation can fail, for both built-in backends and for
//! backends registered in code. Callers match on the variant; the text is for logs and for people.
//!
//! Invariant: an error never carries a secret, and an id taken from a request is shown escaped and
//! shortened (`{:?}` of at most 80 characters), so a hostile id cannot forge log lines.

use std::path::PathBuf;

use super::context_mode::SessionContextMismatch;

/// What kind of id was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Session,
    Agent,
}

impl std::fmt::Display for IdKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IdKind::Session => "session",
            IdKind::Agent => "agent",
        })
    }
}

/// A failed session store operation.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The id is not a plain name (empty, too long, `.`/`..`, a separator, a control character …).
    /// Refused before anything touches the disk or the database.
    #[error("invalid {kind} id {id:?}: {reason}")]
    InvalidId {
        kind: IdKind,
        /// The id as given, cut to 80 characters.
        id: String,
        reason: &'static str,
    },
    #[error("session {0} already exists")]
    SessionExists(String),
    #[error("session {0} does not exist")]
    SessionNotFound(String),
    #[error("agent {agent_id} already exists in session {session_id}")]
    AgentExists {
        session_id: String,
        agent_id: String,
    },
    #[error("agent {agent_id} does not exist in session {session_id}")]
    AgentNotFound {
        session_id: String,
        agent_id: String,
    },
    /// Messages are never overwritten: a second `create_message` with the same id fails.
    #[error("message {message_id} of agent {agent_id} in session {session_id} already exists")]
    MessageExists {
        session_id: String,
        agent_id: String,
        message_id: u64,
    },
    #[error("message {message_id} of agent {agent_id} in session {session_id} does not exist")]
    MessageNotFound {
        session_id: String,
        agent_id: String,
        message_id: u64,
    },
    /// `update_message` only records a redaction; a record without `redact_message` is refused.
    #[error(
        "message {message_id} of session {session_id} can only be updated with a redaction (redact_message is missing)"
    )]
    NotARedaction { session_id: String, message_id: u64 },
    /// The first messages of a session created whole must have the ids 0, 1, 2 … in order.
    #[error("a new session's message {found} is at position {expected}")]
    InvalidMessageOrder { expected: u64, found: u64 },
    /// Agent events are JSON objects.
    #[error("an agent event must be a JSON object, got {0}")]
    InvalidEvent(&'static str),
    /// A path inside the sessions directory is a symbolic link; the file backend never follows one.
    #[error("refusing symbolic link {}", path.display())]
    Symlink { path: PathBuf },
    /// A stored record cannot be read (bad JSON, an id that does not match its file name, a file
    /// where a directory belongs …).
    #[error("invalid stored data in {location}: {detail}")]
    Corrupt { location: String, detail: String },
    /// A stored record was written by a newer tau with an incompatible format.
    #[error(
        "{location} has format version {version}; this tau reads up to {supported} (upgrade tau)"
    )]
    UnsupportedFormat {
        location: String,
        version: u64,
        supported: u32,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[cfg(feature = "hub")]
    #[error("session database: {0}")]
    Database(#[from] rusqlite::Error),
    /// The database was migrated by a newer tau.
    #[error(
        "session database {} has schema version {found}; this tau knows up to {supported} (upgrade tau)",
        path.display()
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// `[sessions].backend` names a backend nobody registered.
    #[error("unknown session backend {name:?} (known: {known})")]
    UnknownBackend { name: String, known: String },
    /// The session was recorded under the other conversation manager.
    #[error(transparent)]
    ContextMismatch(#[from] SessionContextMismatch),
    /// The operating system's random source failed (session id suffix, temporary file names).
    #[error("no randomness available: {0}")]
    Random(String),
    /// A failure inside a backend registered in code.
    #[error("session backend {backend}: {source}")]
    Backend {
        backend: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SessionError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(
        location: impl std::fmt::Display,
        detail: impl std::fmt::Display,
    ) -> Self {
        SessionError::Corrupt {
            location: location.to_string(),
            detail: detail.to_string(),
        }
    }
}
