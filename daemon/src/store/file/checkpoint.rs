//! How a journal's records end: the paths they materialized are synced ([`sync_paths`]), then the
//! journal is emptied or removed ([`empty_journal`]). Both a checkpoint (`journal.rs`) and the
//! replay of a journal found on open (`journal_replay.rs`) end this way.
//!
//! Invariant: the journal is emptied only after what it covered is synced (with
//! `Durability::Full`), and a removal syncs the session directory; a journal already gone is fine.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

use super::fsutil::sync_dir;
use super::layout::JOURNAL_FILE;
use crate::store::contract::Durability;
use crate::store::store_error::SessionError;

/// Syncs every path in `paths` (files and directories), one by one. Never `syncfs`: a whole
/// file system's sync also writes every other program's dirty pages, and a session's appends
/// would wait behind it (hundreds of milliseconds next to a build).
pub(super) fn sync_paths<'a>(
    paths: impl ExactSizeIterator<Item = &'a PathBuf>,
    durability: Durability,
) -> Result<(), SessionError> {
    if durability == Durability::NoSync || paths.len() == 0 {
        return Ok(());
    }
    for path in paths {
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            // Nothing to sync (a replay names `events.jsonl` whether or not one was written).
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(SessionError::io(path, err)),
        };
        file.sync_all().map_err(|err| SessionError::io(path, err))?;
    }
    Ok(())
}

/// Empties the session's journal, or removes it with `remove` (a checkpoint's or a replay's last
/// step).
pub(super) fn empty_journal(
    session_dir: &Path,
    remove: bool,
    durability: Durability,
) -> Result<(), SessionError> {
    let path = session_dir.join(JOURNAL_FILE);
    if remove {
        return match std::fs::remove_file(&path) {
            Ok(()) => sync_dir(session_dir, durability),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(SessionError::io(&path, err)),
        };
    }
    let file = match OpenOptions::new()
        .write(true)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&path)
    {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(SessionError::io(&path, err)),
    };
    file.set_len(0)
        .map_err(|err| SessionError::io(&path, err))?;
    if durability == Durability::Full {
        file.sync_data()
            .map_err(|err| SessionError::io(&path, err))?;
    }
    Ok(())
}
