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
//!
//! A pass nobody waits for (a checkpoint's, made without the session's locks) runs on threads of
//! its own that yield the processor to the rest of the hub ([`Pass::Background`]): its syncs are
//! mostly waits on the disk, but each one's writeback is kernel work on a core, and on two cores
//! seven such threads took the cores from the turns going on beside them.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, OnceLock};

use crate::store::contract::Durability;
use crate::store::store_error::SessionError;

/// Paths synced at once at most: the caller's lane and `SYNC_LANES - 1` threads.
pub(super) const SYNC_LANES: usize = 8;

/// A sync thread's stack: it opens and syncs files, nothing deeper.
const STACK: usize = 128 * 1024;

/// The nice value of a background pass's threads (Linux gives each thread its own): below
/// every thread of the hub's, which run at the process's. A thread unprivileged cannot lower
/// its value again, hence threads of their own rather than one set switching.
#[cfg(target_os = "linux")]
const BACKGROUND_NICE: i32 = 19;

/// Whether someone waits for a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pass {
    /// A turn, a new session or a caller holding the session's locks waits for it.
    Waited,
    /// Nobody waits for it: its threads run below the hub's others ([`BACKGROUND_NICE`]).
    Background,
}

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
    /// The same for [`Pass::Background`], started on the first such pass.
    background: OnceLock<Vec<SyncSender<Lane>>>,
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
        let targets = paths.cloned().map(SyncTarget::Path).collect();
        self.sync_targets(targets, durability, Pass::Waited)
    }

    /// Syncs every target, up to [`SYNC_LANES`] at once.
    pub(super) fn sync_targets(
        &self,
        targets: Vec<SyncTarget>,
        durability: Durability,
        pass: Pass,
    ) -> Result<(), SessionError> {
        if durability == Durability::NoSync || targets.is_empty() {
            return Ok(());
        }
        let lanes = targets.len().min(SYNC_LANES);
        let lane = |n: usize| targets.iter().skip(n).step_by(lanes);
        if lanes == 1 {
            return sync_each(lane(0));
        }
        let threads = match pass {
            Pass::Waited => self.threads.get_or_init(|| start_threads(Pass::Waited)),
            Pass::Background => self
                .background
                .get_or_init(|| start_threads(Pass::Background)),
        };
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

/// Starts the sync threads for `pass` (as many as can be had, up to `SYNC_LANES - 1`).
fn start_threads(pass: Pass) -> Vec<SyncSender<Lane>> {
    let name = match pass {
        Pass::Waited => "tau-sync",
        Pass::Background => "tau-sync-bg",
    };
    (1..SYNC_LANES)
        .map_while(|_| {
            let (queue, lanes) = mpsc::sync_channel::<Lane>(1);
            std::thread::Builder::new()
                .name(name.to_owned())
                .stack_size(STACK)
                .spawn(move || {
                    if pass == Pass::Background {
                        lower_own_priority();
                    }
                    serve(&lanes);
                })
                .ok()
                .map(|_| queue)
        })
        .collect()
}

/// Puts the calling thread below the hub's others ([`BACKGROUND_NICE`]). Best effort: a thread
/// left where it was syncs the same, only sooner.
fn lower_own_priority() {
    #[cfg(target_os = "linux")]
    if let Err(err) =
        rustix::process::setpriority_process(Some(rustix::thread::gettid()), BACKGROUND_NICE)
    {
        tracing::debug!(%err, "cannot lower a background sync thread's priority");
    }
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

    /// The nice value of each of this process's threads named `name` (Linux's `/proc`).
    #[cfg(target_os = "linux")]
    fn nices_of(name: &str) -> Vec<i64> {
        let mut nices = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let task = task.unwrap().path();
            let Ok(comm) = std::fs::read_to_string(task.join("comm")) else {
                continue;
            };
            if comm.trim_end() == name {
                let stat = std::fs::read_to_string(task.join("stat")).unwrap();
                // After the name in brackets: the state is field 3, the nice value field 19.
                let after = &stat[stat.rfind(')').unwrap() + 2..];
                nices.push(after.split(' ').nth(16).unwrap().parse().unwrap());
            }
        }
        nices
    }

    #[test]
    fn a_background_pass_runs_on_threads_of_its_own_below_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let paths = files(dir.path(), 16);
        let pool = SyncPool::default();
        let targets = || paths.iter().cloned().map(SyncTarget::Path).collect();
        pool.sync_targets(targets(), Durability::Full, Pass::Background)
            .unwrap();
        assert!(pool.threads.get().is_none(), "no waited pass's thread");
        assert_eq!(pool.background.get().unwrap().len(), SYNC_LANES - 1);
        pool.sync_targets(targets(), Durability::Full, Pass::Waited)
            .unwrap();
        assert_eq!(pool.threads.get().unwrap().len(), SYNC_LANES - 1);
        #[cfg(target_os = "linux")]
        {
            let own = rustix::process::getpriority_process(None).unwrap();
            let background = nices_of("tau-sync-bg");
            assert!(!background.is_empty());
            assert!(background.iter().all(|&nice| nice == 19), "{background:?}");
            let waited = nices_of("tau-sync");
            assert!(!waited.is_empty());
            assert!(
                waited.iter().all(|&nice| nice == i64::from(own)),
                "{waited:?}"
            );
        }
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
