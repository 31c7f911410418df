//! The channel's state directory, `<TAU_DATA_DIR>/telegram/`: versioned JSON files, each replaced
//! atomically and 0600 in a 0700 directory.
//!
//! Invariants: a file is written to a temporary sibling, synced and renamed, so a reader never sees
//! half a file; every file carries `version`, and one newer than [`FORMAT_VERSION`] is refused
//! rather than misread; a missing file reads as `None`.

use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tau_api::durable_file::write_atomic;

/// The format version every state file is written with.
pub const FORMAT_VERSION: u32 = 1;
/// The directory's name under the data directory.
pub const STATE_DIR_NAME: &str = "telegram";

/// Why a state file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not a valid state file: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error(
        "{path}: written by a newer tau (format {found}, this one reads up to {FORMAT_VERSION})"
    )]
    TooNew { path: PathBuf, found: u32 },
}

/// `<data_dir>/telegram`.
pub fn state_dir(data_dir: &Path) -> PathBuf {
    data_dir.join(STATE_DIR_NAME)
}

/// Creates `dir` 0700 if needed and makes it 0700.
pub fn ensure_dir(dir: &Path) -> Result<(), StateError> {
    let io = |source| StateError::Io {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.is_dir() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io)?;
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io)
}

#[derive(serde::Deserialize)]
struct VersionOnly {
    version: u32,
}

/// Reads a versioned JSON file; `None` when it does not exist.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StateError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(StateError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let invalid = |e: serde_json::Error| StateError::Invalid {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let head: VersionOnly = serde_json::from_str(&text).map_err(invalid)?;
    if head.version > FORMAT_VERSION {
        return Err(StateError::TooNew {
            path: path.to_path_buf(),
            found: head.version,
        });
    }
    serde_json::from_str(&text).map(Some).map_err(invalid)
}

/// Replaces `path` with `value` as JSON, atomically, 0600 (its directory made 0700 first).
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), StateError> {
    if let Some(dir) = path.parent() {
        ensure_dir(dir)?;
    }
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| StateError::Invalid {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    write_atomic(path, &bytes).map_err(|source| StateError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Removes `path`; a missing file is fine.
pub fn remove(path: &Path) -> Result<(), StateError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StateError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}
