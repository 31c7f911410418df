//! The sessions directory's clean-stop mark, `.clean-stop`: written when a store closes with every
//! journal emptied and every session record written, and taken away (durably) when the next
//! process opens the store. With the mark, that process's first listing trusts the listing index
//! instead of surveying every session's files (1-2 s for 10,000 sessions); without it (a crash,
//! a kill, a store never closed) the listing reconciles every session, as after a crash it must.
//!
//! Invariants: the mark is present only between a clean close and the next open, so a crash of
//! the process that opened the store is never taken for a clean stop; a mark that cannot be read
//! or names another version counts as absent; each session is still reconciled when it is first
//! read or written (`reconcile`), mark or not.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::Durability;
use crate::store::file::fsutil::{replace, sync_dir};
use crate::store::store_error::SessionError;

use super::{FileBackend, to_json};

/// The mark's name in the sessions directory (a dot file, as the index, so no id can take it).
pub(super) const CLEAN_STOP_FILE: &str = ".clean-stop";
/// The mark's format.
const CLEAN_STOP_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct CleanStop {
    v: u32,
    /// When the store closed (RFC 3339), for a person reading the directory.
    stopped_at: String,
}

impl FileBackend {
    /// Writes the mark; only once every journal of this process is emptied and every deferred
    /// record written (the caller checks).
    pub(super) fn mark_clean_stop(&self) -> Result<(), SessionError> {
        let mark = CleanStop {
            v: CLEAN_STOP_VERSION,
            stopped_at: jiff::Timestamp::now().to_string(),
        };
        replace(
            &self.root,
            CLEAN_STOP_FILE,
            &to_json(&mark)?,
            self.durability,
        )
    }
}

/// Whether the store at `root` was closed cleanly by the last process; the mark is removed first
/// (and the removal synced), so this process's own crash is never read as a clean stop.
pub(super) fn take_clean_stop(root: &Path, durability: Durability) -> Result<bool, SessionError> {
    let path = root.join(CLEAN_STOP_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(false),
        Err(err) => {
            tracing::warn!(path = %path.display(), %err, "cannot read the clean-stop mark; every session is surveyed");
            String::new()
        }
    };
    match fs::remove_file(&path) {
        Ok(()) => {}
        Err(err) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => return Err(SessionError::io(&path, err)),
    }
    sync_dir(root, durability)?;
    Ok(serde_json::from_str::<CleanStop>(&text).is_ok_and(|mark| mark.v == CLEAN_STOP_VERSION))
}
