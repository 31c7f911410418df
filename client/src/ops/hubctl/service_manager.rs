//! The service managers `tau hub install` / `uninstall` / `status` talk to, behind traits so tests
//! use fakes: [`Launchctl`] (macOS, `launchctl` in the user's GUI domain) and [`Systemctl`]
//! (Linux, `systemctl --user`).
//!
//! Invariants: the real implementations only run the system tools with fixed arguments (no shell)
//! and give each call a deadline; their stdout and stderr are read while they run (so any amount
//! of output is fine); a tool that is missing or fails is an error value, never a panic.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `launchctl` or `systemctl` call may take.
const TOOL_DEADLINE: Duration = Duration::from_secs(30);

/// A service manager call failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{command}` failed: {message}")]
pub struct ToolError {
    /// The command line (for the message).
    pub command: String,
    /// What went wrong (its stderr, or why it could not run).
    pub message: String,
}

/// `launchctl`, in the user's GUI domain (`gui/<uid>`).
pub trait Launchctl {
    /// `launchctl bootstrap <domain> <plist>`.
    fn bootstrap(&self, domain: &str, plist: &Path) -> Result<(), ToolError>;
    /// `launchctl bootout <domain>/<label>`.
    fn bootout(&self, target: &str) -> Result<(), ToolError>;
    /// `launchctl enable <domain>/<label>`.
    fn enable(&self, target: &str) -> Result<(), ToolError>;
    /// `launchctl print <domain>/<label>`; `Ok(None)` when the service is not loaded.
    fn print(&self, target: &str) -> Result<Option<String>, ToolError>;
}

/// `systemctl --user`.
pub trait Systemctl {
    /// `systemctl --user daemon-reload`.
    fn daemon_reload(&self) -> Result<(), ToolError>;
    /// `systemctl --user enable --now <unit>`.
    fn enable_now(&self, unit: &str) -> Result<(), ToolError>;
    /// `systemctl --user disable --now <unit>`.
    fn disable_now(&self, unit: &str) -> Result<(), ToolError>;
    /// `systemctl --user is-enabled <unit>` (enabled, disabled, not-found, …).
    fn is_enabled(&self, unit: &str) -> Result<String, ToolError>;
    /// `systemctl --user is-active <unit>` (active, inactive, failed, …).
    fn is_active(&self, unit: &str) -> Result<String, ToolError>;
}

#[derive(Debug)]
struct Output {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs `program args` with [`TOOL_DEADLINE`], capturing its output.
fn run_tool(program: &str, args: &[&str]) -> Result<Output, ToolError> {
    run_tool_within(program, args, TOOL_DEADLINE)
}

/// Reads a child's pipe to its end on a thread of its own, so a child that writes more than a
/// pipe holds is never blocked by a parent waiting for it to exit.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::sync::mpsc::Receiver<String> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    if let Some(mut pipe) = pipe {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            let _ = sender.send(String::from_utf8_lossy(&bytes).into_owned());
        });
    }
    receiver
}

/// Runs `program args` with a deadline, capturing stdout and stderr while it runs.
fn run_tool_within(program: &str, args: &[&str], deadline: Duration) -> Result<Output, ToolError> {
    let command = format!("{program} {}", args.join(" "));
    let fail = |message: String| ToolError {
        command: command.clone(),
        message,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let end = Instant::now() + deadline;
    let timed_out = || fail(format!("no answer within {}s", deadline.as_secs()));
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(timed_out());
            }
            Err(e) => return Err(fail(e.to_string())),
        }
    };
    // A grandchild may still hold a pipe open: its readers get what is left of the deadline.
    let rest = || end.saturating_duration_since(Instant::now());
    let stdout = stdout.recv_timeout(rest()).unwrap_or_default();
    let stderr = stderr.recv_timeout(rest()).unwrap_or_default();
    Ok(Output {
        success: status.success(),
        stdout,
        stderr,
    })
}

fn checked(program: &str, args: &[&str]) -> Result<(), ToolError> {
    let out = run_tool(program, args)?;
    if out.success {
        Ok(())
    } else {
        Err(ToolError {
            command: format!("{program} {}", args.join(" ")),
            message: first_line(&out.stderr, &out.stdout),
        })
    }
}

fn first_line(primary: &str, fallback: &str) -> String {
    primary
        .lines()
        .chain(fallback.lines())
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("exited with an error")
        .to_owned()
}

/// The system's `launchctl`.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemLaunchctl;

impl Launchctl for SystemLaunchctl {
    fn bootstrap(&self, domain: &str, plist: &Path) -> Result<(), ToolError> {
        let plist = plist.to_string_lossy();
        checked("launchctl", &["bootstrap", domain, &plist])
    }

    fn bootout(&self, target: &str) -> Result<(), ToolError> {
        checked("launchctl", &["bootout", target])
    }

    fn enable(&self, target: &str) -> Result<(), ToolError> {
        checked("launchctl", &["enable", target])
    }

    fn print(&self, target: &str) -> Result<Option<String>, ToolError> {
        let out = run_tool("launchctl", &["print", target])?;
        Ok(out.success.then_some(out.stdout))
    }
}

/// The system's `systemctl --user`.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemSystemctl;

impl Systemctl for SystemSystemctl {
    fn daemon_reload(&self) -> Result<(), ToolError> {
        checked("systemctl", &["--user", "daemon-reload"])
    }

    fn enable_now(&self, unit: &str) -> Result<(), ToolError> {
        checked("systemctl", &["--user", "enable", "--now", unit])
    }

    fn disable_now(&self, unit: &str) -> Result<(), ToolError> {
        checked("systemctl", &["--user", "disable", "--now", unit])
    }

    fn is_enabled(&self, unit: &str) -> Result<String, ToolError> {
        query("is-enabled", unit)
    }

    fn is_active(&self, unit: &str) -> Result<String, ToolError> {
        query("is-active", unit)
    }
}

/// `is-enabled` / `is-active` exit non-zero for "disabled" / "inactive", so the answer is the
/// first line of stdout, whatever the exit status; no stdout at all is an error.
fn query(verb: &str, unit: &str) -> Result<String, ToolError> {
    let out = run_tool("systemctl", &["--user", verb, unit])?;
    match out.stdout.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(answer) => Ok(answer.to_owned()),
        None => Err(ToolError {
            command: format!("systemctl --user {verb} {unit}"),
            message: first_line(&out.stderr, ""),
        }),
    }
}

/// What `launchctl print` says about a loaded agent.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LaunchdState {
    /// `state = …` (running, waiting, …).
    pub state: Option<String>,
    /// `pid = …` while running.
    pub pid: Option<u32>,
    /// `last exit code = …`.
    pub last_exit: Option<String>,
}

/// Picks the few lines of `launchctl print` that matter.
pub fn parse_launchctl_print(text: &str) -> LaunchdState {
    let mut state = LaunchdState::default();
    for line in text.lines() {
        let Some((key, value)) = line.trim().split_once(" = ") else {
            continue;
        };
        match key {
            "state" if state.state.is_none() => state.state = Some(value.trim().to_owned()),
            "pid" if state.pid.is_none() => state.pid = value.trim().parse().ok(),
            "last exit code" if state.last_exit.is_none() => {
                state.last_exit = Some(value.trim().to_owned());
            }
            _ => {}
        }
    }
    state
}

#[cfg(test)]
pub mod fakes {
    //! Fakes that record every call and answer from a script.

    use super::*;
    use std::sync::{Arc, Mutex};

    /// A shared call log.
    pub type Calls = Arc<Mutex<Vec<String>>>;

    /// A scripted `launchctl`.
    #[derive(Default)]
    pub struct FakeLaunchctl {
        pub calls: Calls,
        /// What `print` answers (None: not loaded).
        pub loaded: Option<String>,
        /// Make `bootout` fail (as it does for an agent that is not loaded).
        pub bootout_fails: bool,
    }

    impl Launchctl for FakeLaunchctl {
        fn bootstrap(&self, domain: &str, plist: &Path) -> Result<(), ToolError> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("bootstrap {domain} {}", plist.display()));
            Ok(())
        }

        fn bootout(&self, target: &str) -> Result<(), ToolError> {
            self.calls.lock().unwrap().push(format!("bootout {target}"));
            if self.bootout_fails {
                return Err(ToolError {
                    command: format!("launchctl bootout {target}"),
                    message: "Boot-out failed: 3: No such process".into(),
                });
            }
            Ok(())
        }

        fn enable(&self, target: &str) -> Result<(), ToolError> {
            self.calls.lock().unwrap().push(format!("enable {target}"));
            Ok(())
        }

        fn print(&self, target: &str) -> Result<Option<String>, ToolError> {
            self.calls.lock().unwrap().push(format!("print {target}"));
            Ok(self.loaded.clone())
        }
    }

    /// A scripted `systemctl --user`.
    #[derive(Default)]
    pub struct FakeSystemctl {
        pub calls: Calls,
        pub enabled: String,
        pub active: String,
        /// Make every call fail (no user bus, as in a container).
        pub unavailable: bool,
    }

    impl FakeSystemctl {
        fn call(&self, what: String) -> Result<(), ToolError> {
            self.calls.lock().unwrap().push(what.clone());
            if self.unavailable {
                return Err(ToolError {
                    command: format!("systemctl --user {what}"),
                    message: "Failed to connect to bus: No medium found".into(),
                });
            }
            Ok(())
        }
    }

    impl Systemctl for FakeSystemctl {
        fn daemon_reload(&self) -> Result<(), ToolError> {
            self.call("daemon-reload".into())
        }

        fn enable_now(&self, unit: &str) -> Result<(), ToolError> {
            self.call(format!("enable --now {unit}"))
        }

        fn disable_now(&self, unit: &str) -> Result<(), ToolError> {
            self.call(format!("disable --now {unit}"))
        }

        fn is_enabled(&self, unit: &str) -> Result<String, ToolError> {
            self.call(format!("is-enabled {unit}"))?;
            Ok(self.enabled.clone())
        }

        fn is_active(&self, unit: &str) -> Result<String, ToolError> {
            self.call(format!("is-active {unit}"))?;
            Ok(self.active.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_larger_than_a_pipe_is_read_while_the_tool_runs() {
        let script =
            "head -c 300000 /dev/zero | tr '\\0' x; head -c 200000 /dev/zero | tr '\\0' y >&2";
        let out = run_tool_within("sh", &["-c", script], Duration::from_secs(20)).unwrap();
        assert!(out.success);
        assert_eq!(out.stdout.len(), 300_000);
        assert!(out.stdout.bytes().all(|b| b == b'x'));
        assert_eq!(out.stderr.len(), 200_000);
    }

    #[test]
    fn a_tool_that_hangs_is_stopped_at_its_deadline() {
        let error = run_tool_within("sleep", &["30"], Duration::from_millis(200)).unwrap_err();
        assert_eq!(error.command, "sleep 30");
        assert!(error.message.starts_with("no answer within"), "{error}");
        let missing = run_tool("/nonexistent/tau-no-such-tool", &[]).unwrap_err();
        assert!(!missing.message.is_empty());
    }

    #[test]
    fn launchctl_print_is_parsed() {
        let text = "gui/501/dev.tau.taud = {\n\tactive count = 1\n\tstate = running\n\n\tprogram = /x/taud\n\tpid = 4242\n\tlast exit code = 0\n\tsubsystem = {\n\t\tstate = other\n\t}\n}\n";
        assert_eq!(
            parse_launchctl_print(text),
            LaunchdState {
                state: Some("running".into()),
                pid: Some(4242),
                last_exit: Some("0".into()),
            }
        );
        assert_eq!(parse_launchctl_print(""), LaunchdState::default());
    }

    #[test]
    fn a_missing_tool_is_an_error_not_a_panic() {
        let err = run_tool("/nonexistent/launchctl-for-tau-tests", &["print"])
            .err()
            .unwrap();
        assert!(err.command.contains("launchctl-for-tau-tests"));
    }

    #[test]
    fn checked_reports_the_first_stderr_line() {
        let err = checked("sh", &["-c", "echo >&2; echo 'it broke' >&2; exit 3"]).unwrap_err();
        assert_eq!(err.message, "it broke");
        checked("sh", &["-c", "exit 0"]).unwrap();
    }
}
