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

/// Paths synced at once at most (one thread each): a file system commits syncs that arrive
/// together in one journal commit, so a pass of many paths costs about one sync, not one each.
const SYNC_LANES: usize = 8;

/// Syncs every path in `paths` (files and directories), up to [`SYNC_LANES`] at once. Never
/// `syncfs`: a whole file system's sync also writes every other program's dirty pages, and a
/// session's appends would wait behind it (hundreds of milliseconds next to a build).
pub(super) fn sync_paths<'a>(
    paths: impl ExactSizeIterator<Item = &'a PathBuf>,
    durability: Durability,
) -> Result<(), SessionError> {
    if durability == Durability::NoSync || paths.len() == 0 {
        return Ok(());
    }
    let paths: Vec<&PathBuf> = paths.collect();
    let lanes = paths.len().min(SYNC_LANES);
    if lanes == 1 {
        return sync_lane(&paths, 0, 1);
    }
    std::thread::scope(|scope| {
        let paths = &paths;
        let mut inline = vec![0];
        let mut spawned = Vec::with_capacity(lanes - 1);
        for lane in 1..lanes {
            match std::thread::Builder::new()
                .name("tau-sync".to_owned())
                .spawn_scoped(scope, move || sync_lane(paths, lane, lanes))
            {
                Ok(handle) => spawned.push((lane, handle)),
                // No thread to be had: this one syncs that lane too.
                Err(_) => inline.push(lane),
            }
        }
        let mut result = Ok(());
        for lane in inline {
            result = result.and(sync_lane(paths, lane, lanes));
        }
        for (lane, handle) in spawned {
            let synced = handle.join().unwrap_or_else(|_| {
                Err(SessionError::io(
                    paths[lane],
                    std::io::Error::other("the thread syncing it panicked"),
                ))
            });
            result = result.and(synced);
        }
        result
    })
}

/// Syncs every `lanes`-th path of `paths` from `lane` on.
fn sync_lane(paths: &[&PathBuf], lane: usize, lanes: usize) -> Result<(), SessionError> {
    for path in paths.iter().skip(lane).step_by(lanes) {
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
