//! How a journal's records end: the paths they materialized are synced (one pass of the store's
//! `SyncPool`), then the journal is emptied or removed ([`empty_journal`]). Both a checkpoint
//! (`journal.rs`) and the replay of a journal found on open (`journal_replay.rs`) end this way.
//! What a checkpoint is to sync is gathered meanwhile in an [`Unsynced`].
//!
//! Invariants: the journal is emptied only after what it covered is synced (with
//! `Durability::Full`), and a removal syncs the session directory; a journal already gone is fine.
//! An emptying is not synced itself: the session's next append makes it durable (its `fdatasync`
//! makes the file's new length durable with its line), a close removes the journal and syncs the
//! directory, and a crash before either finds the journal whole, all of whose records are in
//! synced files already, which its replay leaves as they are (a message file that parses as its
//! message is kept, `events.jsonl` is cut back and given the same events again).

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::OFlag;

use super::fsutil::sync_dir;
use super::layout::{EVENTS_FILE, JOURNAL_FILE};
use super::sync_pool::{HeldDir, Pass, SyncPool, SyncTarget};
use crate::store::contract::Durability;
use crate::store::store_error::SessionError;

/// What a session's materializations wrote since its last checkpoint, to sync at the next one.
/// Message files are kept as their ids (8 bytes each, not a path) beside the held directory they
/// were written in, so a checkpoint can cover hundreds of them and opens each relative to it.
#[derive(Default)]
pub(super) struct Unsynced {
    /// Directories, and `events.jsonl`.
    paths: HashSet<PathBuf>,
    /// Message files, by the held directory they were written in (one per agent, seldom more).
    messages: Vec<(Arc<dyn HeldDir>, Vec<u64>)>,
    /// Message files in `messages`.
    files: usize,
}

impl Unsynced {
    /// A directory or `events.jsonl` written to.
    pub(super) fn add_path(&mut self, path: PathBuf) {
        self.paths.insert(path);
    }

    /// Whether `path` was added (with [`Unsynced::add_path`]).
    pub(super) fn holds(&self, path: &Path) -> bool {
        self.paths.contains(path)
    }

    /// The file of message `id` written in `dir` (the directory is synced too).
    pub(super) fn add_message<D: HeldDir + 'static>(&mut self, dir: &Arc<D>, id: u64) {
        let dir: Arc<dyn HeldDir> = Arc::clone(dir) as Arc<dyn HeldDir>;
        self.add_held(&dir, id);
    }

    fn add_held(&mut self, dir: &Arc<dyn HeldDir>, id: u64) {
        match self
            .messages
            .iter_mut()
            .find(|(held, _)| Arc::ptr_eq(held, dir))
        {
            Some((_, ids)) => ids.push(id),
            None => self.messages.push((Arc::clone(dir), vec![id])),
        }
        self.files += 1;
    }

    /// Paths to sync, directories included.
    pub(super) fn len(&self) -> usize {
        self.paths.len() + self.messages.len() + self.files
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes `other`'s paths too (a failed sync's, to try again).
    pub(super) fn extend(&mut self, other: Unsynced) {
        self.paths.extend(other.paths);
        for (dir, ids) in other.messages {
            for id in ids {
                self.add_held(&dir, id);
            }
        }
    }

    /// Syncs everything in one pass of `syncer`: the files first, the directories after them.
    /// `Pass::Background` when nobody waits for it (no lock held, no turn waiting).
    pub(super) fn sync(
        &self,
        syncer: &SyncPool,
        durability: Durability,
        pass: Pass,
    ) -> Result<(), SessionError> {
        if durability == Durability::NoSync || self.is_empty() {
            return Ok(());
        }
        let mut targets = Vec::with_capacity(self.len());
        for (dir, ids) in &self.messages {
            targets.extend(
                ids.iter()
                    .map(|&id| SyncTarget::Message(Arc::clone(dir), id)),
            );
        }
        let (dirs, files): (Vec<&PathBuf>, Vec<&PathBuf>) = self
            .paths
            .iter()
            .partition(|path| !path.ends_with(EVENTS_FILE));
        targets.extend(files.into_iter().cloned().map(SyncTarget::Path));
        targets.extend(
            self.messages
                .iter()
                .map(|(dir, _)| SyncTarget::Dir(Arc::clone(dir))),
        );
        targets.extend(dirs.into_iter().cloned().map(SyncTarget::Path));
        syncer.sync_targets(targets, durability, pass)
    }
}

/// Empties the session's journal (unsynced, see the module's invariants), or removes it with
/// `remove` and syncs the directory (a checkpoint's or a replay's last step).
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
    file.set_len(0).map_err(|err| SessionError::io(&path, err))
}

/// Removes the session's journal if it is empty (one a creation left), syncing the directory.
pub(super) fn remove_empty_journal(
    session_dir: &Path,
    durability: Durability,
) -> Result<(), SessionError> {
    let path = session_dir.join(JOURNAL_FILE);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() && meta.len() == 0 => {
            empty_journal(session_dir, true, durability)
        }
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(SessionError::io(&path, err)),
    }
}
