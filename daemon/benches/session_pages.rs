//! Long sessions and many sessions, against the real `taud` on both durable stores: the time from
//! spawn to `/health` with 10,000 sessions on disk (first start, which reads every session's
//! events for approvals left pending because no approval scan mark exists yet, and a later start
//! with the mark), and `GetSession` over the Unix socket on a 10,000-message session: the newest
//! 100 messages (a page), the summary only, and the whole session for comparison. Prints p50/p99.
//! Then taud's resident memory with 100 sessions of 200 messages open at once.
//!
//! Run: `cargo bench -p taud --bench session_pages [-- SESSIONS]` (default 10000). Seeding writes
//! without fsync; the hub under test runs with its normal durable store.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use taud::message::Message;
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, Durability, SessionAgent, SessionBackends, SessionMessage,
    SessionMeta, SessionStoreConfig, create_fresh_complete_session, now_utc, open_session_store,
};
use tonic::transport::Channel;

const LONG_SESSION: u64 = 10_000;
const PAGE: u32 = 100;
const ITERATIONS: usize = 200;
/// The memory part: this many sessions of this many messages, all open at once.
const OPEN_SESSIONS: usize = 100;
const OPEN_MESSAGES: u64 = 200;
const DEADLINE: Duration = Duration::from_secs(120);

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Install {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    user: PathBuf,
    data: PathBuf,
}

impl Install {
    fn new(backend: &str) -> anyhow::Result<Self> {
        let tmp = tempfile::tempdir()?;
        let home = tmp.path().join("home");
        let user = tmp.path().join("user");
        std::fs::create_dir_all(home.join("persona"))?;
        std::fs::create_dir_all(&user)?;
        std::fs::write(
            home.join("tau.toml"),
            format!("[sessions]\nbackend = \"{backend}\"\n"),
        )?;
        // An installation with a tau.toml needs its persona, or taud refuses to start (exit 78).
        std::fs::write(
            home.join("persona/persona.md"),
            include_str!("../../persona/persona.md"),
        )?;
        let data = tmp.path().join("data");
        Ok(Self {
            _tmp: tmp,
            home,
            user,
            data,
        })
    }

    /// Starts taud and waits for `/health`; returns the hub and how long that took.
    fn start(&self) -> anyhow::Result<(Killed, u16, Duration)> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let started = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_taud"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.user)
            .env("TAU_HOME", &self.home)
            .env("TAU_DATA_DIR", &self.data)
            .env("TAU_HUB_PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut hub = Killed(child);
        loop {
            if health(port) {
                return Ok((hub, port, started.elapsed()));
            }
            if let Some(status) = hub.0.try_wait()? {
                anyhow::bail!("taud exited ({status}) before it answered /health");
            }
            if started.elapsed() > DEADLINE {
                anyhow::bail!("taud did not answer /health within {DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits for the hub's Unix socket (it may come up just after `/health`) and connects.
    async fn client(&self) -> anyhow::Result<TauClient<Channel>> {
        let socket = self.data.join("hub/taud.sock");
        let started = Instant::now();
        loop {
            match connect(socket.clone()).await {
                Ok(client) => return Ok(client),
                Err(err) if started.elapsed() > DEADLINE => {
                    return Err(err).context("connecting to the hub's socket");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }

    /// `sessions` short sessions and one of [`LONG_SESSION`] messages; returns the long one's id.
    fn seed(&self, backend: &str, sessions: usize) -> anyhow::Result<String> {
        let mut ids = self.seed_sessions(backend, sessions, 2)?;
        ids.extend(self.seed_sessions(backend, 1, LONG_SESSION)?);
        ids.pop().context("no session was made")
    }

    /// `sessions` sessions of `messages` messages each; returns their ids.
    fn seed_sessions(
        &self,
        backend: &str,
        sessions: usize,
        messages: u64,
    ) -> anyhow::Result<Vec<String>> {
        let config = SessionStoreConfig {
            sessions_dir: self.data.join("sessions"),
            sqlite_path: self.data.join("sessions.db"),
            durability: Durability::NoSync,
        };
        std::fs::create_dir_all(&self.data)?;
        let store = open_session_store(&SessionBackends::builtin(), backend, &config)?;
        let session = |messages: u64| -> anyhow::Result<String> {
            let agent = SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now_utc());
            let messages = (0..messages)
                .map(|n| {
                    let message = if n % 2 == 0 {
                        Message::user_text(format!("question {n}: what is the time now?"))
                    } else {
                        Message::assistant_text(format!("answer {n}: it is a quarter past ten."))
                    };
                    SessionMessage::new(n, message, now_utc())
                })
                .collect();
            let meta = SessionMeta {
                channel: Some("bench".into()),
                ..SessionMeta::default()
            };
            Ok(create_fresh_complete_session(
                store.as_ref(),
                agent,
                messages,
                meta,
            )?)
        };
        (0..sessions).map(|_| session(messages)).collect()
    }
}

fn health(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let request = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    let mut out = String::new();
    s.write_all(request).is_ok()
        && s.read_to_string(&mut out).is_ok()
        && out.starts_with("HTTP/1.1 200")
}

async fn connect(socket: PathBuf) -> anyhow::Result<TauClient<Channel>> {
    let channel = tau_client::connect::unix_channel(&socket, Duration::from_secs(10)).await?;
    Ok(TauClient::new(channel))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{label:<44} n={:<4} p50={:>9.3} ms  p99={:>9.3} ms",
        samples.len(),
        percentile(&samples, 0.50).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
    );
}

async fn get_session(
    client: &mut TauClient<Channel>,
    request: &pb::GetSessionRequest,
    iterations: usize,
    expected: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let started = Instant::now();
        let response = client.get_session(request.clone()).await?.into_inner();
        samples.push(started.elapsed());
        anyhow::ensure!(
            response.messages.len() == expected,
            "{} messages instead of {expected}",
            response.messages.len()
        );
    }
    Ok(samples)
}

fn bench(backend: &str, sessions: usize) -> anyhow::Result<()> {
    let install = Install::new(backend)?;
    let seeding = Instant::now();
    let long = install.seed(backend, sessions)?;
    println!(
        "{backend}: seeded {sessions} sessions and one of {LONG_SESSION} messages in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );
    let (hub, _, first) = install.start()?;
    println!(
        "{backend} start → /health, no scan mark (reads every session's events): {:>8.1} ms",
        first.as_secs_f64() * 1e3
    );
    drop(hub);
    let mut starts = Vec::new();
    for _ in 0..5 {
        let (hub, _, ready) = install.start()?;
        starts.push(ready);
        drop(hub);
    }
    report(
        &format!("{backend} start → /health, {sessions} sessions"),
        starts,
    );

    let (_hub, _, _) = install.start()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut client = install.client().await?;
        let page = pb::GetSessionRequest {
            session_id: long.clone(),
            page: Some(pb::MessagePage {
                size: PAGE,
                before_index: None,
            }),
            ..Default::default()
        };
        let cold = get_session(&mut client, &page, 1, PAGE as usize).await?;
        report(&format!("{backend} GetSession newest {PAGE}, first"), cold);
        let warm = get_session(&mut client, &page, ITERATIONS, PAGE as usize).await?;
        report(
            &format!("{backend} GetSession newest {PAGE} of {LONG_SESSION}"),
            warm,
        );
        let summary = pb::GetSessionRequest {
            session_id: long.clone(),
            ..Default::default()
        };
        let summary = get_session(&mut client, &summary, ITERATIONS, 0).await?;
        report(
            &format!("{backend} GetSession summary of {LONG_SESSION}"),
            summary,
        );
        let whole = pb::GetSessionRequest {
            session_id: long.clone(),
            include_messages: true,
            ..Default::default()
        };
        let whole = get_session(&mut client, &whole, 10, LONG_SESSION as usize).await?;
        report(&format!("{backend} GetSession all {LONG_SESSION}"), whole);
        anyhow::Ok(())
    })
}

fn vm_rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .context("no VmRSS in /proc/<pid>/status")
}

/// taud's resident memory with [`OPEN_SESSIONS`] sessions of [`OPEN_MESSAGES`] messages open
/// (each with its agent restored), next to the same hub idle.
fn open_sessions_rss(backend: &str) -> anyhow::Result<()> {
    let install = Install::new(backend)?;
    let ids = install.seed_sessions(backend, OPEN_SESSIONS, OPEN_MESSAGES)?;
    let (hub, _, _) = install.start()?;
    let pid = hub.0.id();
    let idle = vm_rss_kib(pid)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let open = runtime.block_on(async {
        let mut client = install.client().await?;
        for id in &ids {
            client
                .open_session(pb::OpenSessionRequest {
                    target: Some(pb::open_session_request::Target::SessionId(id.clone())),
                    channel: "bench".into(),
                    ..Default::default()
                })
                .await?;
        }
        let status = client
            .get_status(pb::GetStatusRequest {})
            .await?
            .into_inner();
        anyhow::Ok(status.sessions_open)
    })?;
    let loaded = vm_rss_kib(pid)?;
    println!(
        "{backend} taud RSS: idle {:.1} MiB, {open} sessions of {OPEN_MESSAGES} messages open {:.1} MiB",
        idle as f64 / 1024.0,
        loaded as f64 / 1024.0
    );
    drop(hub);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let sessions: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000);
    println!(
        "session pages benchmark ({} build)",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    for backend in ["file", "sqlite"] {
        bench(backend, sessions)?;
        open_sessions_rss(backend)?;
    }
    Ok(())
}
