//! Starting a server process: no shell, a cleared environment, its own process group, stdin and
//! stdout for JSON-RPC and stderr drained into a bounded tail and the log; and killing the whole
//! group.
//!
//! Invariants: stderr is read continuously from spawn on (an unread pipe would block the server),
//! and at most [`TAIL_LINES`] lines of at most [`MAX_LINE`] bytes are kept; a group is always
//! signalled by its pgid (the server's pid), never by name, SIGTERM first, SIGKILL after the grace;
//! the direct child is always reaped.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::McpError;
use super::server_spec::McpServerSpec;

/// Lines of stderr kept per server.
pub const TAIL_LINES: usize = 40;
/// Longest stderr line kept (longer ones are cut).
pub const MAX_LINE: usize = 2048;

/// The last lines a server wrote to stderr.
#[derive(Debug, Default)]
pub struct StderrTail {
    lines: Mutex<VecDeque<String>>,
}

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// The last `n` lines joined with ` | `, for an error message.
    pub fn summary(&self, n: usize) -> String {
        let lines = self.lines();
        let start = lines.len().saturating_sub(n);
        lines[start..].join(" | ")
    }
}

/// A started server process.
pub struct Launched {
    pub child: Child,
    pub pid: u32,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    /// The stderr reader; it ends when every holder of the pipe is gone.
    pub drain: tokio::task::JoinHandle<()>,
}

/// Starts `spec`'s command in a new process group and starts draining its stderr into `tail`.
pub fn launch(spec: &McpServerSpec, tail: &Arc<StderrTail>) -> Result<Launched, McpError> {
    let mut command = Command::new(&spec.command);
    command
        .args(&spec.args)
        .env_clear()
        .envs(&spec.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().map_err(|e| McpError::Spawn {
        command: spec.command.clone(),
        reason: if e.kind() == std::io::ErrorKind::NotFound {
            "command not found".to_owned()
        } else {
            e.to_string()
        },
    })?;
    let pid = child.id().ok_or_else(|| McpError::Spawn {
        command: spec.command.clone(),
        reason: "the process exited at once".to_owned(),
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(McpError::Spawn {
            command: spec.command.clone(),
            reason: "no pipes".to_owned(),
        });
    };
    let drain = tokio::spawn(drain(spec.key.clone(), stderr, Arc::clone(tail)));
    Ok(Launched {
        child,
        pid,
        stdin,
        stdout,
        drain,
    })
}

/// Reads stderr to its end, keeping whole lines (cut at [`MAX_LINE`]) in `tail`.
async fn drain(server: String, mut stderr: ChildStderr, tail: Arc<StderrTail>) {
    let mut buf = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &buf[..n] {
            if byte == b'\n' {
                emit(&server, &tail, &line);
                line.clear();
            } else if line.len() < MAX_LINE {
                line.push(byte);
            }
        }
    }
    if !line.is_empty() {
        emit(&server, &tail, &line);
    }
}

fn emit(server: &str, tail: &StderrTail, line: &[u8]) {
    let text = String::from_utf8_lossy(line).trim_end().to_owned();
    tracing::debug!(server, "mcp stderr: {text}");
    tail.push(text);
}

/// Signals the process group `pgid`: SIGTERM, then SIGKILL after `grace` unless the leader is gone
/// and nothing else of the group is left; then reaps `child`.
pub async fn kill_group(pgid: u32, child: &mut Child, grace: Duration) {
    let Ok(raw) = i32::try_from(pgid) else {
        return;
    };
    let group = Pid::from_raw(raw);
    if killpg(group, Signal::SIGTERM).is_err() {
        // No process of the group is left.
        let _ = child.wait().await;
        return;
    }
    let _ = tokio::time::timeout(grace, child.wait()).await;
    // Grandchildren may ignore SIGTERM or outlive the leader: whatever is left is killed.
    let deadline = tokio::time::Instant::now() + grace;
    while killpg(group, None).is_ok() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.kill().await;
}
