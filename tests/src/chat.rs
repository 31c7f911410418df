//! Helpers for driving `tau chat` end to end: a free loopback port, a `taud` the test owns, `tau
//! chat` on a pseudo-terminal, and a read-only look at a session through the hub's gRPC API.
//!
//! Invariants: every hub a helper starts (or finds started by `tau chat`) is stopped when its guard
//! drops; every wait polls a condition with a deadline; nothing here approves anything (the tests
//! type the answers a person would).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rexpect::session::PtySession;
use tau_api::proto::v1 as pb;
use tau_api::proto::v1::tau_client::TauClient;
use tonic::transport::Channel;

use crate::Sandbox;

/// How long `exp_*` calls on a chat wait before failing.
pub const EXPECT_TIMEOUT_MS: u64 = 30_000;

/// How long a hub may take to start or stop.
const HUB_DEADLINE: Duration = Duration::from_secs(30);

/// A port on 127.0.0.1 that nothing listened on a moment ago.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("binding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Polls `condition` every 50 ms until it holds or `deadline` passes.
pub fn wait_until(
    deadline: Duration,
    what: &str,
    mut condition: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let until = Instant::now() + deadline;
    loop {
        if condition() {
            return Ok(());
        }
        if Instant::now() >= until {
            bail!("timed out after {deadline:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A sandbox with its own hub port: the commands it builds all agree on TAU_HUB_PORT.
pub struct ChatSandbox {
    /// The isolated installation.
    pub sandbox: Sandbox,
    /// TAU_HUB_PORT for every process of this test.
    pub port: u16,
}

impl ChatSandbox {
    /// A fresh sandbox and a free port.
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            sandbox: Sandbox::new()?,
            port: free_port()?,
        })
    }

    /// A command for a workspace binary with the sandbox's environment and port.
    pub fn command(&self, name: &str) -> anyhow::Result<Command> {
        let mut command = self.sandbox.command(name)?;
        command
            .env("TAU_HUB_PORT", self.port.to_string())
            .env("TERM", "xterm");
        Ok(command)
    }

    /// The hub's Unix socket.
    pub fn socket(&self) -> PathBuf {
        self.sandbox.data_dir().join("hub").join("taud.sock")
    }

    /// Starts `taud` and waits until its socket accepts connections.
    pub fn start_hub(&self) -> anyhow::Result<HubGuard> {
        let log = std::fs::File::create(self.sandbox.home().join("taud.test.log"))?;
        let child = self
            .command("taud")?
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .context("starting taud")?;
        let guard = HubGuard::Child(child);
        let socket = self.socket();
        wait_until(HUB_DEADLINE, "the hub's socket", || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        })?;
        Ok(guard)
    }

    /// `tau chat <args>` on a pseudo-terminal.
    pub fn chat(&self, args: &[&str]) -> anyhow::Result<PtySession> {
        let mut command = self.command("tau")?;
        command.arg("chat").args(args);
        Ok(rexpect::session::spawn_command(
            command,
            Some(EXPECT_TIMEOUT_MS),
        )?)
    }

    /// Runs `f` with a gRPC client on the hub's socket.
    pub fn with_client<T>(
        &self,
        f: impl AsyncFnOnce(&mut TauClient<Channel>) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let socket = self.socket();
        runtime.block_on(async move {
            let channel =
                tau_client::connect::unix_channel(&socket, Duration::from_secs(10)).await?;
            let mut client = TauClient::new(channel);
            f(&mut client).await
        })
    }

    /// A session's metadata and stored messages.
    pub fn session(&self, id: &str) -> anyhow::Result<pb::GetSessionResponse> {
        let id = id.to_owned();
        self.with_client(async move |client| {
            Ok(client
                .get_session(pb::GetSessionRequest {
                    session_id: id,
                    include_messages: true,
                    ..Default::default()
                })
                .await?
                .into_inner())
        })
    }

    /// A session's stored agent events.
    pub fn events(&self, id: &str) -> anyhow::Result<Vec<pb::StoredEvent>> {
        let id = id.to_owned();
        self.with_client(async move |client| {
            Ok(client
                .read_events(pb::ReadEventsRequest { session_id: id })
                .await?
                .into_inner()
                .events)
        })
    }
}

/// The text of every text block of a stored message.
pub fn message_text(message: &pb::StoredMessage) -> String {
    message
        .content
        .iter()
        .filter_map(|block| match &block.block {
            Some(pb::content_block::Block::Text(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Stops a hub when dropped: SIGTERM, then SIGKILL if it has not gone by the deadline.
pub enum HubGuard {
    /// A `taud` this test spawned.
    Child(Child),
    /// A `taud` someone else spawned (`tau chat`), by pid.
    Pid(i32),
}

impl HubGuard {
    fn pid(&self) -> Option<Pid> {
        match self {
            HubGuard::Child(child) => i32::try_from(child.id()).ok().map(Pid::from_raw),
            HubGuard::Pid(pid) => Some(Pid::from_raw(*pid)),
        }
    }

    fn gone(&mut self) -> bool {
        match self {
            HubGuard::Child(child) => !matches!(child.try_wait(), Ok(None)),
            HubGuard::Pid(pid) => kill(Pid::from_raw(*pid), None).is_err() || is_zombie(*pid),
        }
    }
}

/// Whether `pid` has exited but was not reaped (its parent, `tau chat`, is gone and nothing reaps
/// orphans in this container). Linux only; elsewhere `false`.
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // pid (comm) state …: the state follows the last ')'.
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|s| s == "Z"))
        })
        .unwrap_or(false)
}

impl Drop for HubGuard {
    fn drop(&mut self) {
        let Some(pid) = self.pid() else {
            return;
        };
        let _ = kill(pid, Signal::SIGTERM);
        if wait_until(HUB_DEADLINE, "the hub to stop", || self.gone()).is_err() {
            let _ = kill(pid, Signal::SIGKILL);
            if let HubGuard::Child(child) = self {
                let _ = child.wait();
            }
        }
    }
}
