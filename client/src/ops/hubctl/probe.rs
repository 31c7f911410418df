//! Is a hub running? The authority is the hub's flock on `hub.lock`: held means running, whatever
//! `state.json` says. The probe takes the lock for an instant when it is free, and the hub retries a
//! briefly contended lock, so a probe never makes a starting hub refuse to start.
//!
//! Invariants: read-only apart from that instant; unreadable or unknown-version files are reported
//! as problems, never guessed at.

use std::fs::File;
use std::io::{self, Read};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use tau_api::hub_files::{self, CrashReport, HubPaths, HubState};

/// What the hub's files say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HubProbe {
    /// A process holds the hub lock.
    pub running: bool,
    /// The running hub's pid (from the lock file, else state.json).
    pub pid: Option<u32>,
    /// `state.json`, if readable.
    pub state: Option<HubState>,
    /// `last_crash.json`, if any.
    pub last_crash: Option<CrashReport>,
    /// Files that exist but could not be read.
    pub problems: Vec<String>,
}

/// Whether the lock at `paths.lock_file` is held, and the pid written in it.
pub fn lock_holder(paths: &HubPaths) -> io::Result<Option<Option<u32>>> {
    let mut file = match File::open(&paths.lock_file) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => {
            drop(lock);
            Ok(None)
        }
        Err((_, Errno::EWOULDBLOCK)) => Ok(Some(text.trim().parse().ok())),
        Err((_, errno)) => Err(io::Error::from(errno)),
    }
}

fn read<T>(path: &std::path::Path, problems: &mut Vec<String>) -> Option<T>
where
    T: for<'de> serde::Deserialize<'de> + hub_files::Versioned,
{
    match std::fs::read_to_string(path) {
        Ok(text) => match hub_files::parse(path, &text) {
            Ok(value) => Some(value),
            Err(e) => {
                problems.push(e.to_string());
                None
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            problems.push(format!("{}: {e}", path.display()));
            None
        }
    }
}

/// Probes the hub's files.
pub fn probe(paths: &HubPaths) -> io::Result<HubProbe> {
    let holder = lock_holder(paths)?;
    let mut problems = Vec::new();
    let state: Option<HubState> = read(&paths.state_file, &mut problems);
    let last_crash = read(&paths.last_crash_file, &mut problems);
    let pid = holder.map(|pid| pid.or_else(|| state.as_ref().map(|s| s.pid)));
    Ok(HubProbe {
        running: holder.is_some(),
        pid: pid.flatten(),
        state,
        last_crash,
        problems,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;

    /// Holds the lock the way taud does.
    pub(crate) fn hold_lock(paths: &HubPaths, pid: u32) -> Flock<File> {
        std::fs::create_dir_all(&paths.dir).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&paths.lock_file)
            .unwrap();
        writeln!(file, "{pid}").unwrap();
        Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap()
    }

    #[test]
    fn no_files_means_not_running() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = HubPaths::in_dir(tmp.path().join("hub"));
        assert_eq!(probe(&paths).unwrap(), HubProbe::default());
    }

    #[test]
    fn a_held_lock_means_running_with_its_pid_and_a_free_one_does_not() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = HubPaths::in_dir(tmp.path().join("hub"));
        let lock = hold_lock(&paths, 4321);
        let found = probe(&paths).unwrap();
        assert!(found.running);
        assert_eq!(found.pid, Some(4321));
        drop(lock);
        let found = probe(&paths).unwrap();
        assert!(!found.running);
        assert_eq!(found.pid, None);
    }

    #[test]
    fn a_bad_state_file_is_a_problem_not_a_guess() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = HubPaths::in_dir(tmp.path().join("hub"));
        std::fs::create_dir_all(&paths.dir).unwrap();
        std::fs::write(&paths.state_file, "{\"version\": 9}").unwrap();
        let found = probe(&paths).unwrap();
        assert_eq!(found.state, None);
        assert_eq!(found.problems.len(), 1, "{:?}", found.problems);
    }
}
