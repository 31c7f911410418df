//! The single-instance lock: an exclusive `flock` on `<TAU_DATA_DIR>/hub/hub.lock`, holding the
//! owner's pid.
//!
//! Invariants: at most one process holds the lock; it is taken before any heavy start-up work (no
//! runtime, no sockets), so a refused second start costs next to nothing; the kernel releases it
//! when the holder dies, however it dies. A brief contention (a `tau hub status` probe holding
//! the lock for microseconds) is retried for a short, bounded time before the start is refused.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use tau_api::hub_files::HubPaths;

use super::files::{ensure_private_dir, remove_stale_temp_files};

/// How many times a contended lock is tried before the start is refused.
const ATTEMPTS: u32 = 5;
/// The pause between two attempts (so the whole wait stays under a tenth of a second).
const PAUSE: Duration = Duration::from_millis(20);

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another hub holds it.
    #[error("{}", tau_api::hub_files::already_running_message(*pid))]
    AlreadyRunning {
        /// The holder's pid, when it could be read.
        pid: Option<u32>,
    },
    /// The hub directory or lock file could not be created or locked.
    #[error("cannot lock {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

/// The held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct HubLock {
    _lock: Flock<File>,
}

impl HubLock {
    /// Creates the hub directory (0700) and takes the lock, writing this process's pid into it.
    pub fn acquire(paths: &HubPaths) -> Result<Self, LockError> {
        let io_err = |path: PathBuf| move |source| LockError::Io { path, source };
        ensure_private_dir(&paths.dir).map_err(io_err(paths.dir.clone()))?;
        let path = paths.lock_file.clone();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io_err(path.clone()))?;
        for attempt in 1..=ATTEMPTS {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(mut lock) => {
                    write_pid(&mut lock).map_err(io_err(path.clone()))?;
                    // Only the lock holder writes here: temp files of a hub killed mid-write are
                    // stale. Failing to remove them is no reason not to start.
                    match remove_stale_temp_files(&paths.dir) {
                        Ok(0) => {}
                        Ok(removed) => {
                            tracing::info!(removed, dir = %paths.dir.display(), "removed temporary files a stopped hub left");
                        }
                        Err(error) => {
                            tracing::warn!(dir = %paths.dir.display(), "cannot remove a stopped hub's temporary files: {error}");
                        }
                    }
                    return Ok(Self { _lock: lock });
                }
                Err((back, Errno::EWOULDBLOCK)) => {
                    file = back;
                    if attempt < ATTEMPTS {
                        std::thread::sleep(PAUSE);
                    }
                }
                Err((_, errno)) => return Err(io_err(path)(io::Error::from(errno))),
            }
        }
        Err(LockError::AlreadyRunning {
            pid: read_pid(&mut file),
        })
    }
}

fn write_pid(file: &mut File) -> io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(format!("{}\n", std::process::id()).as_bytes())?;
    file.sync_all()
}

/// The pid written in the lock file; the holder may not have written it yet, so a few reads are
/// tried.
fn read_pid(file: &mut File) -> Option<u32> {
    for attempt in 1..=ATTEMPTS {
        let mut text = String::new();
        if file.seek(SeekFrom::Start(0)).is_ok()
            && file.read_to_string(&mut text).is_ok()
            && let Ok(pid) = text.trim().parse()
        {
            return Some(pid);
        }
        if attempt < ATTEMPTS {
            std::thread::sleep(PAUSE);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_refused_with_the_holders_pid_and_freed_on_drop() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = HubPaths::in_dir(tmp.path().join("hub"));
        let first = HubLock::acquire(&paths).unwrap();
        match HubLock::acquire(&paths) {
            Err(LockError::AlreadyRunning { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected AlreadyRunning, got {other:?}"),
        }
        drop(first);
        HubLock::acquire(&paths).unwrap();
    }

    #[test]
    fn lock_file_holds_the_pid() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = HubPaths::in_dir(tmp.path().join("hub"));
        let _lock = HubLock::acquire(&paths).unwrap();
        let text = std::fs::read_to_string(&paths.lock_file).unwrap();
        assert_eq!(text.trim(), std::process::id().to_string());
    }

    /// A hub killed between writing `state.json.tmp.<pid>` and renaming it left the file behind;
    /// the next hub to take the lock removes it.
    #[test]
    fn taking_the_lock_removes_temp_files_a_killed_hub_left() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = HubPaths::in_dir(tmp.path().join("hub"));
        drop(HubLock::acquire(&paths).unwrap());
        let stale = paths.dir.join("state.json.tmp.999999");
        std::fs::write(&stale, "{").unwrap();
        let _lock = HubLock::acquire(&paths).unwrap();
        assert!(!stale.exists());
        assert!(paths.lock_file.exists());
    }
}
