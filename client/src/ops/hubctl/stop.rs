//! `tau hub stop`: SIGTERM to the running hub, then wait (with a deadline) until it has released
//! the hub lock, which the kernel does the moment the process is gone.
//!
//! Invariants: only the pid recorded by the lock holder is signalled, and only while the lock is
//! held; waiting polls the lock with a deadline and never blocks beyond it.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use tau_api::hub_files::HubPaths;

use super::probe::lock_holder;

/// How often the lock is polled while waiting.
const POLL: Duration = Duration::from_millis(25);

/// Why the hub could not be stopped.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    /// The lock file could not be read.
    #[error("cannot read the hub lock: {0}")]
    Probe(#[from] io::Error),
    /// The lock is held but names no pid.
    #[error("a hub holds {0} but its pid is unknown; stop it with your service manager")]
    UnknownPid(String),
    /// The signal could not be sent.
    #[error("cannot signal the hub (pid {pid}): {source}")]
    Signal {
        /// The hub's pid.
        pid: u32,
        /// What the system said.
        source: io::Error,
    },
    /// The hub did not go away in time.
    #[error(
        "tau hub (pid {pid}) did not stop within {secs}s; it may still be finishing. `kill -9 {pid}` forces it (the next start records a crash)"
    )]
    Timeout {
        /// The hub's pid.
        pid: u32,
        /// The deadline in seconds.
        secs: u64,
    },
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// No hub was running.
    NotRunning,
    /// The hub with this pid stopped.
    Stopped(u32),
}

/// Sends SIGTERM to `pid`.
pub fn sigterm(pid: u32) -> io::Result<()> {
    let pid = i32::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    match nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    ) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => Ok(()),
        Err(errno) => Err(io::Error::from(errno)),
    }
}

/// Stops the hub: `signal` is sent to the lock holder's pid, then the lock is polled until free
/// or `timeout` passes.
pub fn stop(
    paths: &HubPaths,
    timeout: Duration,
    signal: &dyn Fn(u32) -> io::Result<()>,
    out: &mut dyn Write,
) -> Result<Stopped, StopError> {
    let Some(holder) = lock_holder(paths)? else {
        return Ok(Stopped::NotRunning);
    };
    let pid = holder.ok_or_else(|| StopError::UnknownPid(paths.lock_file.display().to_string()))?;
    signal(pid).map_err(|source| StopError::Signal { pid, source })?;
    let _ = writeln!(out, "stopping tau hub (pid {pid})…");
    let end = Instant::now() + timeout;
    loop {
        if lock_holder(paths)?.is_none() {
            return Ok(Stopped::Stopped(pid));
        }
        if Instant::now() >= end {
            return Err(StopError::Timeout {
                pid,
                secs: timeout.as_secs(),
            });
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::hubctl::probe::tests::hold_lock;
    use std::sync::Mutex;

    fn paths(tmp: &tempfile::TempDir) -> HubPaths {
        HubPaths::in_dir(tmp.path().join("hub"))
    }

    #[test]
    fn nothing_to_stop() {
        let tmp = tempfile::tempdir().unwrap();
        let never = |_| -> io::Result<()> { panic!("nothing may be signalled") };
        let got = stop(
            &paths(&tmp),
            Duration::from_secs(1),
            &never,
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(got, Stopped::NotRunning);
    }

    #[test]
    fn the_holder_is_signalled_and_waited_for() {
        let tmp = tempfile::tempdir().unwrap();
        let held = Mutex::new(Some(hold_lock(&paths(&tmp), 4242)));
        let signalled = Mutex::new(Vec::new());
        // The "hub" exits when signalled: its lock goes away.
        let signal = |pid| {
            signalled.lock().unwrap().push(pid);
            held.lock().unwrap().take();
            Ok(())
        };
        let mut out = Vec::new();
        let got = stop(&paths(&tmp), Duration::from_secs(5), &signal, &mut out).unwrap();
        assert_eq!(got, Stopped::Stopped(4242));
        assert_eq!(*signalled.lock().unwrap(), [4242]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "stopping tau hub (pid 4242)…\n"
        );
    }

    #[test]
    fn a_hub_that_does_not_go_away_hits_the_deadline_after_a_real_sigterm() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // The lock is held here, not by the child, so it outlives the signal.
        let _held = hold_lock(&paths(&tmp), child.id());
        let err = stop(
            &paths(&tmp),
            Duration::from_millis(200),
            &sigterm,
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(
            matches!(err, StopError::Timeout { pid, .. } if pid == child.id()),
            "{err}"
        );
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(15), "the child got SIGTERM");
    }
}
