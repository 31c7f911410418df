//! Attaching to the hub (`tau chat`, `tau tui`, `tau hub start`): connect, and when no hub answers
//! (and starting is allowed) start `taud` in the background and wait until it answers.
//!
//! Invariants:
//! - A started `taud` is detached from its starter: its own process group (so Ctrl-C in the chat
//!   never reaches it), stdin from /dev/null, stdout and stderr appended to a log file; it outlives
//!   the command that started it.
//! - The wait for a started hub has a deadline and ends early when the child exits for good (an
//!   exit with "already running" keeps waiting: another hub is starting and will answer).
//! - Only the `taud` binary the caller found ([`find_taud`]) is ever executed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tau_api::proto::v1 as pb;

use tau_client::connect::NotRunning;

use super::{HubAddress, HubClient, connect};

/// How long one health check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How often a starting hub is checked.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// `taud`'s exit code when another hub holds the lock.
const EXIT_ALREADY_RUNNING: i32 = 1;

/// How to start a hub when none answers.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// The `taud` binary; `None` when none was found (only an error when a hub must be started).
    pub taud: Option<PathBuf>,
    /// Where the started hub's stdout and stderr go (appended).
    pub log_file: PathBuf,
    /// Variables to export to it (TAU_LANG, TAU_PROFILE from tau's command line).
    pub child_env: Vec<(&'static str, OsString)>,
    /// How long to wait for it to answer.
    pub deadline: Duration,
}

/// A hub that answers.
pub struct Attached {
    /// The client.
    pub client: HubClient,
    /// The pid of the hub this call started, when it started one.
    pub started: Option<u32>,
}

/// Why no hub could be attached.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// No hub answers and starting one was not allowed.
    #[error(transparent)]
    NotRunning(NotRunning),
    /// No `taud` next to `tau` or on PATH.
    #[error("cannot find taud next to tau or on PATH")]
    NoTaud,
    /// `taud` could not be started.
    #[error("cannot start {}: {source}", taud.display())]
    Spawn {
        taud: PathBuf,
        source: std::io::Error,
    },
    /// The log file for the started hub could not be opened.
    #[error("cannot open {}: {source}", file.display())]
    Log {
        file: PathBuf,
        source: std::io::Error,
    },
    /// The started hub exited before it answered.
    #[error("taud exited ({status}){detail}; see {}", log.display())]
    Exited {
        status: String,
        detail: String,
        log: PathBuf,
    },
    /// The started hub did not answer in time.
    #[error("no answer from the hub within {seconds} s; see {}", log.display())]
    Timeout { seconds: u64, log: PathBuf },
}

/// Connects and checks that the hub answers a status call.
pub async fn check(address: &HubAddress) -> Result<HubClient, NotRunning> {
    let mut client = connect(address).await?;
    let not_running = |reason: String| NotRunning {
        socket: PathBuf::from(address.describe()),
        reason,
    };
    match tokio::time::timeout(CHECK_TIMEOUT, client.get_status(pb::GetStatusRequest {})).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(status)) => Err(not_running(status.message().to_owned())),
        Err(_) => Err(not_running("timed out".to_owned())),
    }
}

/// Attaches to the hub at `address`, starting one with `start` when none answers.
pub async fn attach(
    address: &HubAddress,
    start: Option<&StartOptions>,
) -> Result<Attached, AttachError> {
    let not_running = match check(address).await {
        Ok(client) => {
            return Ok(Attached {
                client,
                started: None,
            });
        }
        Err(not_running) => not_running,
    };
    let Some(start) = start else {
        return Err(AttachError::NotRunning(not_running));
    };
    let mut child = spawn(start)?;
    let pid = child.id();
    let until = Instant::now() + start.deadline;
    // The child exited with "already running": another hub is starting; keep checking for it.
    let mut other_hub_starting = false;
    loop {
        if let Ok(client) = check(address).await {
            return Ok(Attached {
                client,
                started: Some(pid),
            });
        }
        if !other_hub_starting && let Ok(Some(status)) = child.try_wait() {
            if status.code() != Some(EXIT_ALREADY_RUNNING) {
                return Err(AttachError::Exited {
                    status: status.to_string(),
                    detail: last_line(&start.log_file)
                        .map(|line| format!(": {line}"))
                        .unwrap_or_default(),
                    log: start.log_file.clone(),
                });
            }
            other_hub_starting = true;
        }
        if Instant::now() >= until {
            return Err(AttachError::Timeout {
                seconds: start.deadline.as_secs(),
                log: start.log_file.clone(),
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Starts `taud` detached from this process.
fn spawn(start: &StartOptions) -> Result<std::process::Child, AttachError> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    use std::os::unix::process::CommandExt;
    let taud = start.taud.as_ref().ok_or(AttachError::NoTaud)?;
    let log_error = |source| AttachError::Log {
        file: start.log_file.clone(),
        source,
    };
    if let Some(dir) = start.log_file.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(log_error)?;
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&start.log_file)
        .map_err(log_error)?;
    let log_err = log.try_clone().map_err(log_error)?;
    let mut command = Command::new(taud);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .process_group(0);
    for (key, value) in &start.child_env {
        command.env(key, value);
    }
    command.spawn().map_err(|source| AttachError::Spawn {
        taud: taud.clone(),
        source,
    })
}

/// The last non-empty line of `file`, cut short; `None` when unreadable or empty.
fn last_line(file: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().rev().find(|line| !line.trim().is_empty())?;
    Some(tau_client::sanitize::one_line(line, 300))
}

/// The absolute path of `taud`: in `exe_dir` (the directory of the running `tau`), else the first
/// executable `taud` in an absolute directory of `path_var`.
pub fn find_taud(exe_dir: Option<&Path>, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let beside = exe_dir.map(|d| d.join("taud"));
    let on_path = path_var
        .into_iter()
        .flat_map(std::env::split_paths)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("taud"));
    beside
        .into_iter()
        .chain(on_path)
        .find(|p| is_executable(p))
        .map(|p| p.canonicalize().unwrap_or(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[tokio::test]
    async fn without_start_options_a_missing_hub_is_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let address = HubAddress::Unix(dir.path().join("taud.sock"));
        let error = attach(&address, None).await.err().unwrap();
        assert!(matches!(error, AttachError::NotRunning(_)), "{error}");
    }

    #[tokio::test]
    async fn a_hub_that_exits_at_once_is_reported_with_its_last_log_line() {
        let dir = tempfile::tempdir().unwrap();
        let taud = dir.path().join("taud");
        std::fs::write(
            &taud,
            "#!/bin/sh\necho 'taud: bad config in tau.toml' >&2\nexit 78\n",
        )
        .unwrap();
        std::fs::set_permissions(&taud, std::fs::Permissions::from_mode(0o755)).unwrap();
        let start = StartOptions {
            taud: Some(taud),
            log_file: dir.path().join("logs/taud.out"),
            child_env: Vec::new(),
            deadline: Duration::from_secs(30),
        };
        let address = HubAddress::Unix(dir.path().join("taud.sock"));
        let error = attach(&address, Some(&start)).await.err().unwrap();
        let text = error.to_string();
        assert!(matches!(error, AttachError::Exited { .. }), "{text}");
        assert!(text.contains("bad config in tau.toml"), "{text}");
    }

    #[tokio::test]
    async fn without_taud_a_missing_hub_cannot_be_started() {
        let dir = tempfile::tempdir().unwrap();
        let start = StartOptions {
            taud: None,
            log_file: dir.path().join("logs/taud.out"),
            child_env: Vec::new(),
            deadline: Duration::from_secs(30),
        };
        let address = HubAddress::Unix(dir.path().join("taud.sock"));
        let error = attach(&address, Some(&start)).await.err().unwrap();
        assert!(matches!(error, AttachError::NoTaud), "{error}");
    }
}
