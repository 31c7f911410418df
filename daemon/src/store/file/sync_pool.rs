//! The file store's passes of syncs (a checkpoint's, a journal replay's, a new session's): up to
//! [`SYNC_LANES`] targets (a path, a message file in a held directory, a held directory) synced at
//! once, one lane on the caller's thread and the others on the
//! store's sync threads, started on its first pass of more than one path and kept while the store
//! lives. A file system commits syncs that arrive together in one journal commit, so a pass of
//! many paths costs about one sync; starting seven threads for each pass cost a new session more
//! than its syncs did on a busy machine (docs/benchmarks.md).
//!
//! Invariants: a pass returns only once every path it was given is synced, missing (nothing to
//! sync) or has failed, and reports the first failure; a lane whose thread cannot be had (none
//! started, gone, or its one-place queue taken by another pass) runs on the caller's thread, so a
//! pass never waits behind more than one other pass's lane and never on a thread that is gone;
//! the threads end when the [`SyncPool`] is dropped (their queues close). Never `syncfs`: a whole
//! file system's sync also writes every other program's dirty pages, and a session's appends
//! would wait behind it (hundreds of milliseconds next to a build).

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, OnceLock};

use crate::store::contract::Durability;
use crate::store::store_error::SessionError;

/// Paths synced at once at most: the caller's lane and `SYNC_LANES - 1` threads.
pub(super) const SYNC_LANES: usize = 8;

/// A sync thread's stack: it opens and syncs files, nothing deeper.
const STACK: usize = 128 * 1024;

/// A directory held open that message files were written in (`materialize`'s `MessagesDir`).
pub(super) trait HeldDir: Send + Sync {
    /// Syncs message `id`'s file, opened relative to the directory (one not there is nothing
    /// to sync).
    fn sync_message(&self, id: u64) -> Result<(), SessionError>;
    /// Syncs the directory itself (the names created in it).
    fn sync(&self) -> Result<(), SessionError>;
}

/// One file or directory to sync.
#[derive(Clone)]
pub(super) enum SyncTarget {
    /// By its path; a missing one has nothing to sync (a replay names `events.jsonl` whether or
    /// not one was written).
    Path(PathBuf),
    /// A message file, opened relative to the held directory it was written in.
    Message(Arc<dyn HeldDir>, u64),
    /// A held directory, through its descriptor.
    Dir(Arc<dyn HeldDir>),
}

impl SyncTarget {
    fn sync(&self) -> Result<(), SessionError> {
        match self {
            Self::Path(path) => match std::fs::File::open(path) {
                Ok(file) => file.sync_all().map_err(|err| SessionError::io(path, err)),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(err) => Err(SessionError::io(path, err)),
            },
            Self::Message(dir, id) => dir.sync_message(*id),
            Self::Dir(dir) => dir.sync(),
        }
    }
}

/// One lane of a pass: its targets, and where its result goes.
type Lane = (Vec<SyncTarget>, SyncSender<Result<(), SessionError>>);

/// The sync threads of one store.
#[derive(Default)]
pub(super) struct SyncPool {
    /// Each thread's queue (one place), started on the first pass that needs one.
    threads: OnceLock<Vec<SyncSender<Lane>>>,
}

impl SyncPool {
    /// Syncs every path in `paths` (files and directories), up to [`SYNC_LANES`] at once.
    pub(super) fn sync_paths<'a>(
        &self,
        paths: impl ExactSizeIterator<Item = &'a PathBuf>,
        durability: Durability,
    ) -> Result<(), SessionError> {
        if durability == Durability::NoSync || paths.len() == 0 {
            return Ok(());
        }
        self.sync_targets(paths.cloned().map(SyncTarget::Path).collect(), durability)
    }

    /// Syncs every target, up to [`SYNC_LANES`] at once.
    pub(super) fn sync_targets(
        &self,
        targets: Vec<SyncTarget>,
        durability: Durability,
    ) -> Result<(), SessionError> {
        if durability == Durability::NoSync || targets.is_empty() {
            return Ok(());
        }
        let lanes = targets.len().min(SYNC_LANES);
        let lane = |n: usize| targets.iter().skip(n).step_by(lanes);
        if lanes == 1 {
            return sync_each(lane(0));
        }
        let threads = self.threads.get_or_init(start_threads);
        let (done, results) = mpsc::sync_channel(lanes);
        let mut inline = vec![0];
        let mut sent = 0;
        for n in 1..lanes {
            let job = (lane(n).cloned().collect(), done.clone());
            // A full or closed queue gives the lane back: the caller syncs it.
            match threads.get(n - 1).map(|thread| thread.try_send(job)) {
                Some(Ok(())) => sent += 1,
                _ => inline.push(n),
            }
        }
        drop(done);
        let mut result = Ok(());
        for n in inline {
            result = result.and(sync_each(lane(n)));
        }
        for _ in 0..sent {
            let synced = results.recv().unwrap_or_else(|_| {
                Err(SessionError::io(
                    "a pass of syncs",
                    std::io::Error::other("a sync thread ended before its targets were synced"),
                ))
            });
            result = result.and(synced);
        }
        result
    }
}

/// Starts the sync threads (as many as can be had, up to `SYNC_LANES - 1`).
fn start_threads() -> Vec<SyncSender<Lane>> {
    (1..SYNC_LANES)
        .map_while(|_| {
            let (queue, lanes) = mpsc::sync_channel::<Lane>(1);
            std::thread::Builder::new()
                .name("tau-sync".to_owned())
                .stack_size(STACK)
                .spawn(move || serve(&lanes))
                .ok()
                .map(|_| queue)
        })
        .collect()
}

/// A sync thread: each lane it is given, until its queue closes.
fn serve(lanes: &Receiver<Lane>) {
    for (targets, done) in lanes {
        // The pass may have ended already (it never does before every result came).
        let _ = done.send(sync_each(targets.iter()));
    }
}

/// Syncs each of `targets`, stopping at the first failure.
fn sync_each<'a>(targets: impl Iterator<Item = &'a SyncTarget>) -> Result<(), SessionError> {
    for target in targets {
        target.sync()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &std::path::Path, count: usize) -> Vec<PathBuf> {
        (0..count)
            .map(|i| {
                let path = dir.join(format!("f{i}"));
                std::fs::write(&path, b"x").unwrap();
                path
            })
            .collect()
    }

    #[test]
    fn a_pass_syncs_on_threads_started_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = files(dir.path(), 20);
        paths.push(dir.path().to_path_buf());
        // Missing: nothing to sync.
        paths.push(dir.path().join("gone"));
        let pool = SyncPool::default();
        pool.sync_paths(paths.iter(), Durability::Full).unwrap();
        let started = pool.threads.get().unwrap().as_ptr();
        assert_eq!(pool.threads.get().unwrap().len(), SYNC_LANES - 1);
        pool.sync_paths(paths.iter(), Durability::Full).unwrap();
        assert_eq!(
            pool.threads.get().unwrap().as_ptr(),
            started,
            "the threads started once serve the next pass"
        );
    }

    #[test]
    fn one_path_or_no_sync_starts_no_thread() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path(), 3);
        let pool = SyncPool::default();
        pool.sync_paths(paths[..1].iter(), Durability::Full)
            .unwrap();
        pool.sync_paths(paths.iter(), Durability::NoSync).unwrap();
        assert!(pool.threads.get().is_none());
    }

    #[test]
    fn a_failure_on_any_lane_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut paths = files(dir.path(), 12);
        // Not a directory: opening a path under a file fails (ENOTDIR), it is not missing.
        let bad = paths[5].join("under-a-file");
        paths.push(bad.clone());
        let pool = SyncPool::default();
        let err = pool.sync_paths(paths.iter(), Durability::Full).unwrap_err();
        assert!(
            matches!(&err, SessionError::Io { path, .. } if *path == bad),
            "{err:?}"
        );
        // The threads are still there for the next pass.
        pool.sync_paths(paths[..12].iter(), Durability::Full)
            .unwrap();
    }

    #[test]
    fn passes_at_once_all_finish_when_the_threads_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path(), 16);
        let pool = SyncPool::default();
        std::thread::scope(|scope| {
            let passes: Vec<_> = (0..6)
                .map(|_| scope.spawn(|| pool.sync_paths(paths.iter(), Durability::Full)))
                .collect();
            for pass in passes {
                pass.join().unwrap().unwrap();
            }
        });
    }

    #[test]
    fn a_gone_thread_leaves_its_lane_to_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path(), 16);
        let pool = SyncPool::default();
        // Queues whose threads are gone: every lane runs on the caller's thread.
        let closed: Vec<SyncSender<Lane>> = (1..SYNC_LANES)
            .map(|_| mpsc::sync_channel::<Lane>(1).0)
            .collect();
        assert!(pool.threads.set(closed).is_ok());
        pool.sync_paths(paths.iter(), Durability::Full).unwrap();
    }
}
