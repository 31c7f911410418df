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

/// Syncs every path in `paths` (files and directories); on Linux one `syncfs` does it all,
/// unless the kernel (or a sandbox) refuses the call.
pub(super) fn sync_paths<'a>(
    session_dir: &Path,
    paths: impl ExactSizeIterator<Item = &'a PathBuf>,
    durability: Durability,
) -> Result<(), SessionError> {
    if durability == Durability::NoSync || paths.len() == 0 {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        let dir =
            std::fs::File::open(session_dir).map_err(|err| SessionError::io(session_dir, err))?;
        match nix::unistd::syncfs(&dir) {
            Ok(()) => return Ok(()),
            Err(nix::errno::Errno::ENOSYS | nix::errno::Errno::EPERM) => {}
            Err(err) => return Err(SessionError::io(session_dir, std::io::Error::from(err))),
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = session_dir;
    for path in paths {
        let file = std::fs::File::open(path).map_err(|err| SessionError::io(path, err))?;
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
