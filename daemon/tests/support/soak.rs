//! The soak driver shared by the `hub_soak` benchmark and the short `hub_soak` test: starts the real
//! `taud` with the fake model on a temporary installation, drives turns over its Unix socket and
//! samples the hub's resident memory (VmRSS) as it goes.
//!
//! The figure that matters is the slope after warm-up: RSS growth from turn `warmup` to the last turn,
//! scaled to 10,000 turns. A hub that runs for months must keep it near zero.
//!
//! `MALLOC_ARENA_MAX=1` is set on the hub so glibc keeps one arena: growth then means memory the hub
//! holds, not arenas the allocator spreads over threads.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use tonic::transport::Channel;

pub type SoakResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// What one soak run does.
#[derive(Debug, Clone)]
pub struct SoakPlan {
    /// `file` or `sqlite`.
    pub backend: &'static str,
    /// The user text of every turn: `hello` is a text turn, `what time is it` a tool turn.
    pub text: String,
    /// Turns in all.
    pub turns: usize,
    /// Turns before the baseline sample.
    pub warmup: usize,
    /// Sessions the turns are spread over, round robin.
    pub sessions: usize,
    /// Samples taken after warm-up (evenly spaced).
    pub samples: usize,
}

/// What a soak run measured.
#[derive(Debug, Clone)]
pub struct SoakReport {
    /// (turns done, VmRSS in KiB).
    pub rss: Vec<(usize, u64)>,
    /// VmRSS before the first turn.
    pub idle_kib: u64,
    /// Each turn's time.
    pub turn_times: Vec<Duration>,
    /// The hub's threads at the end.
    pub threads: u64,
}

impl SoakReport {
    /// RSS growth after warm-up, scaled to 10,000 turns, in MiB.
    pub fn slope_mib_per_10k(&self) -> f64 {
        let (Some(first), Some(last)) = (self.rss.first(), self.rss.last()) else {
            return 0.0;
        };
        let turns = last.0.saturating_sub(first.0);
        if turns == 0 {
            return 0.0;
        }
        let grown = last.1 as f64 - first.1 as f64;
        grown / 1024.0 * 10_000.0 / turns as f64
    }

    /// RSS growth after warm-up, in MiB.
    pub fn growth_mib(&self) -> f64 {
        match (self.rss.first(), self.rss.last()) {
            (Some(first), Some(last)) => (last.1 as f64 - first.1 as f64) / 1024.0,
            _ => 0.0,
        }
    }

    /// The p-th percentile of the turn times, in milliseconds.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        let mut sorted = self.turn_times.clone();
        sorted.sort();
        if sorted.is_empty() {
            return 0.0;
        }
        let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1e3
    }
}

/// The hub's stderr, in its installation's root.
const STDERR_FILE: &str = "taud.stderr";

/// How much of the hub's stderr a failure prints.
const STDERR_TAIL_LINES: usize = 40;

/// The hub under test; killed on drop, before its installation is removed.
pub struct SoakHub {
    child: Killed,
    root: tempfile::TempDir,
}

/// A child process killed (and waited for) on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl SoakHub {
    /// Starts `taud` (the binary at `taud`) on a fresh installation using `backend`, with one
    /// malloc arena (see the module doc).
    pub fn start(taud: &Path, backend: &str) -> SoakResult<Self> {
        Self::start_with(taud, backend, true)
    }

    /// Starts `taud` like [`SoakHub::start`], with the allocator's default arenas (for latency).
    pub fn start_plain(taud: &Path, backend: &str) -> SoakResult<Self> {
        Self::start_with(taud, backend, false)
    }

    /// Starts `taud` like [`SoakHub::start_plain`], with `env` added to its environment.
    pub fn start_with_env(taud: &Path, backend: &str, env: &[(&str, &str)]) -> SoakResult<Self> {
        Self::start_full(taud, backend, false, env, "")
    }

    /// Starts `taud` with the allocator's default arenas (as a hub runs in production) and `toml`
    /// appended to its tau.toml (whole tables, e.g. `[hub]` keys).
    pub fn start_configured(taud: &Path, backend: &str, toml: &str) -> SoakResult<Self> {
        Self::start_full(taud, backend, false, &[], toml)
    }

    fn start_with(taud: &Path, backend: &str, one_arena: bool) -> SoakResult<Self> {
        Self::start_full(taud, backend, one_arena, &[], "")
    }

    fn start_full(
        taud: &Path,
        backend: &str,
        one_arena: bool,
        env: &[(&str, &str)],
        toml: &str,
    ) -> SoakResult<Self> {
        let root = tempfile::tempdir()?;
        let home = root.path().join("home");
        std::fs::create_dir_all(home.join("persona"))?;
        std::fs::create_dir_all(root.path().join("user"))?;
        std::fs::write(
            home.join("tau.toml"),
            format!("[sessions]\nbackend = \"{backend}\"\n{toml}"),
        )?;
        // An installation with a tau.toml needs its persona, or taud refuses to start (exit 78).
        std::fs::write(
            home.join("persona/persona.md"),
            include_str!("../../../persona/persona.md"),
        )?;
        let mut command = Command::new(taud);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root.path().join("user"))
            .env("TAU_HOME", &home)
            .env("TAU_DATA_DIR", root.path().join("data"))
            // The hub picks a free port itself: one picked here and released could be taken by
            // another test before the hub binds it, and a hub that cannot listen stops.
            .env("TAU_HUB_PORT", "0");
        if one_arena {
            command.env("MALLOC_ARENA_MAX", "1");
        }
        command.envs(env.iter().copied());
        // Kept in the installation, so a hub that stops mid-run leaves a trace (see `trace`).
        let stderr = std::fs::File::create(root.path().join(STDERR_FILE))?;
        let child = command
            .current_dir(root.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()?;
        let mut hub = Self {
            child: Killed(child),
            root,
        };
        let started = Instant::now();
        // Ready once state.json says every service started (`ready_at`): it is first written
        // before the services start, when the socket may not be listening yet.
        while !(hub.socket().exists() && hub.ready()) {
            if let Ok(Some(status)) = hub.child.0.try_wait() {
                return Err(
                    format!("taud exited ({status}) before it came up; {}", hub.trace()).into(),
                );
            }
            if started.elapsed() > Duration::from_secs(30) {
                return Err(format!("the hub did not come up within 30 s; {}", hub.trace()).into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(hub)
    }

    /// What a failed run should print beside its error: whether the hub is still running (or how
    /// it ended) and the last lines it wrote to stderr.
    pub fn trace(&mut self) -> String {
        let state = match self.child.0.try_wait() {
            Ok(Some(status)) => format!("taud exited ({status})"),
            Ok(None) => "taud is still running".to_owned(),
            Err(error) => format!("taud's state is unknown ({error})"),
        };
        let stderr = std::fs::read_to_string(self.root.path().join(STDERR_FILE))
            .unwrap_or_else(|error| format!("<unreadable: {error}>"));
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n");
        format!("{state}; the last lines of its stderr:\n{tail}")
    }

    /// Whether the hub's state.json says it is ready (every service started).
    fn ready(&self) -> bool {
        std::fs::read(self.root.path().join("data/hub/state.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<tau_api::hub_files::HubState>(&bytes).ok())
            .is_some_and(|state| state.ready_at.is_some())
    }

    /// A gRPC client on the hub's Unix socket.
    pub async fn client(&self) -> SoakResult<TauClient<Channel>> {
        connect(self.socket()).await
    }

    /// Stops the hub and hands over its installation, removed when the guard returned is dropped:
    /// a benchmark removes every hub's files after its last measurement (see `hub_turn/table.rs`).
    pub fn stop(self) -> tempfile::TempDir {
        drop(self.child);
        self.root
    }

    /// The installation's root: `home/` is its TAU_HOME, `data/` its TAU_DATA_DIR.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn socket(&self) -> PathBuf {
        self.root.path().join("data/hub/taud.sock")
    }

    /// The hub's VmRSS in KiB.
    pub fn rss_kib(&self) -> SoakResult<u64> {
        self.status_field("VmRSS:")
    }

    /// How many threads the hub runs.
    pub fn threads(&self) -> SoakResult<u64> {
        self.status_field("Threads:")
    }

    /// How many file descriptors the hub has open.
    pub fn fds(&self) -> SoakResult<u64> {
        let entries = std::fs::read_dir(format!("/proc/{}/fd", self.child.0.id()))?;
        Ok(entries.count() as u64)
    }

    /// The hub's process id.
    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    fn status_field(&self, name: &str) -> SoakResult<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.0.id()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| format!("no {name} in /proc/<pid>/status").into())
    }

    /// Runs `plan` against this hub.
    pub async fn run(&self, plan: &SoakPlan) -> SoakResult<SoakReport> {
        let mut client = self.client().await?;
        // Let the hub settle after start before the idle sample.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle_kib = self.rss_kib()?;
        let mut sessions = Vec::with_capacity(plan.sessions);
        for _ in 0..plan.sessions.max(1) {
            sessions.push(new_session(&mut client).await?);
        }
        let after_warmup = plan.turns.saturating_sub(plan.warmup);
        let every = (after_warmup / plan.samples.max(1)).max(1);
        let mut rss = Vec::new();
        let mut turn_times = Vec::with_capacity(plan.turns);
        for i in 0..plan.turns {
            if i >= plan.warmup && (i - plan.warmup).is_multiple_of(every) {
                rss.push((i, self.rss_kib()?));
            }
            let session = &sessions[i % sessions.len()];
            let started = Instant::now();
            turn(&mut client, session, &plan.text).await?;
            turn_times.push(started.elapsed());
        }
        rss.push((plan.turns, self.rss_kib()?));
        Ok(SoakReport {
            rss,
            idle_kib,
            turn_times,
            threads: self.threads()?,
        })
    }
}

/// A gRPC client on the Unix socket at `socket` (its own connection).
pub async fn connect(socket: PathBuf) -> SoakResult<TauClient<Channel>> {
    let channel = tau_client::connect::unix_channel(&socket, Duration::from_secs(10)).await?;
    Ok(TauClient::new(channel))
}

/// Opens a new session on channel `soak` and returns its id.
pub async fn new_session(client: &mut TauClient<Channel>) -> SoakResult<String> {
    let opened = client
        .open_session(pb::OpenSessionRequest {
            target: Some(pb::open_session_request::Target::NewSession(true)),
            channel: "soak".into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    opened
        .session
        .map(|s| s.session_id)
        .ok_or_else(|| "OpenSession returned no session".into())
}

/// Runs one turn of `text` on `session` (channel `soak`) and reads its stream to `TurnEnded`.
pub async fn turn(client: &mut TauClient<Channel>, session: &str, text: &str) -> SoakResult<()> {
    let mut stream = client
        .start_turn(pb::StartTurnRequest {
            session_id: session.to_owned(),
            text: text.to_owned(),
            channel: "soak".into(),
            idempotency_key: String::new(),
            new_session: false,
        })
        .await?
        .into_inner();
    let mut ended = false;
    while let Some(message) = stream.message().await? {
        if let Some(pb::start_turn_response::Kind::Event(event)) = message.kind {
            ended |= matches!(event.kind, Some(pb::session_event::Kind::TurnEnded(_)));
        }
    }
    if ended {
        Ok(())
    } else {
        Err("a turn's stream closed before TurnEnded".into())
    }
}
