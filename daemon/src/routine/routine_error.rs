//! The routine room's one error type, at its boundary (the engine's API and the file).
//!
//! Invariant: every message is one line naming what was wrong (the file, the routine, the value)
//! and what was expected.

use std::path::PathBuf;

/// What a routine operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RoutineError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a routines file: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error(
        "{path}: format version {found} is newer than this hub reads ({supported}); upgrade tau"
    )]
    NewerVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A request that cannot be accepted as given (a bad name, schedule or action).
    #[error("{0}")]
    Invalid(String),
    #[error("no routine named {0:?}")]
    NotFound(String),
    #[error("a routine named {0:?} already exists; remove it first or pick another name")]
    AlreadyExists(String),
    #[error("at most {0} routines; remove one first")]
    TooMany(usize),
    #[error("unknown tool {0:?}: it is not in the hub's tool catalog")]
    UnknownTool(String),
    /// The registration of a tier-2 action was not approved.
    #[error("routine {name:?} was not registered: its approval ended as {outcome}")]
    NotApproved { name: String, outcome: String },
}
