//! Turn latency through the hub with the fake (demo) model, on the durable `file` and `sqlite`
//! session stores: over the Unix socket against the real `taud` binary, and in-process through the
//! hub core (no gRPC). A text turn ("hello") and a tool turn ("what time is it", `current_time`,
//! tier 0). Prints p50/p99 per store, path and kind.
//!
//! Run: `cargo bench -p taud --bench hub_turn [-- ITERATIONS]` (default 300).

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use taud::hubcore::{
    CoreOptions, CoreSetup, DemoModelFactory, EventKind, HubCore, OpenTarget, StartTurn,
};
use taud::session::{Durability, SessionBackends, SessionStoreConfig};
use tonic::transport::{Channel, Endpoint, Uri};

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

const WARMUP: usize = 30;
/// Turns per session before a fresh one is opened (so the history stays small).
const TURNS_PER_SESSION: usize = 25;
const TEXT: &str = "hello";
const TOOL: &str = "what time is it";

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{label:<28} n={:<5} p50={:>8.3} ms  p99={:>8.3} ms",
        samples.len(),
        percentile(&samples, 0.50).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
    );
}

// ---- in-process ---------------------------------------------------------------------------

async fn core_for(dir: &std::path::Path, backend: &str) -> BenchResult<HubCore> {
    let setup = CoreSetup {
        options: CoreOptions::default(),
        backend: backend.to_owned(),
        store: SessionStoreConfig {
            sessions_dir: dir.join("sessions"),
            sqlite_path: dir.join("sessions.db"),
            durability: Durability::Full,
        },
        backends: SessionBackends::builtin(),
        factory: Arc::new(DemoModelFactory),
    };
    Ok(setup.start().await?)
}

async fn in_process(core: &HubCore, text: &str, iterations: usize) -> BenchResult<Vec<Duration>> {
    let mut samples = Vec::with_capacity(iterations);
    let mut session = String::new();
    for i in 0..WARMUP + iterations {
        if i % TURNS_PER_SESSION == 0 {
            let opened = core
                .open_session(OpenTarget::New, None, "bench", None)
                .await?;
            session = opened.session.session_id;
        }
        let started = Instant::now();
        let mut stream = core
            .start_turn(StartTurn {
                session_id: session.clone(),
                text: text.to_owned(),
                channel: "bench".into(),
                idempotency_key: String::new(),
            })
            .await?;
        let mut ended = false;
        while let Some(event) = stream.next().await? {
            ended |= matches!(event.kind, EventKind::TurnEnded(_));
        }
        let elapsed = started.elapsed();
        if !ended {
            return Err("a turn did not end".into());
        }
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    Ok(samples)
}

// ---- over the Unix socket -----------------------------------------------------------------

struct Hub(Child);

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_hub(root: &std::path::Path, backend: &str) -> BenchResult<Hub> {
    let home = root.join("home");
    std::fs::create_dir_all(&home)?;
    std::fs::create_dir_all(root.join("user"))?;
    std::fs::write(
        home.join("tau.toml"),
        format!("[sessions]\nbackend = \"{backend}\"\n"),
    )?;
    // An installation with a tau.toml needs its persona, or taud refuses to start (exit 78).
    std::fs::create_dir_all(home.join("persona"))?;
    std::fs::write(
        home.join("persona/persona.md"),
        include_str!("../../persona/persona.md"),
    )?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_taud"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", root.join("user"))
        .env("TAU_HOME", &home)
        .env("TAU_DATA_DIR", root.join("data"))
        .env("TAU_HUB_PORT", port.to_string())
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut hub = Hub(child);
    let socket = root.join("data/hub/taud.sock");
    let started = Instant::now();
    while !(socket.exists() && root.join("data/hub/state.json").exists()) {
        if let Ok(Some(status)) = hub.0.try_wait() {
            return Err(format!("taud exited ({status}) before it came up").into());
        }
        if started.elapsed() > Duration::from_secs(20) {
            return Err("the hub did not come up".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(hub)
}

async fn connect(socket: std::path::PathBuf) -> BenchResult<TauClient<Channel>> {
    let channel = Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await?;
    Ok(TauClient::new(channel))
}

async fn over_socket(
    client: &mut TauClient<Channel>,
    text: &str,
    iterations: usize,
) -> BenchResult<Vec<Duration>> {
    let mut samples = Vec::with_capacity(iterations);
    let mut session = String::new();
    for i in 0..WARMUP + iterations {
        if i % TURNS_PER_SESSION == 0 {
            let opened = client
                .open_session(pb::OpenSessionRequest {
                    target: Some(pb::open_session_request::Target::NewSession(true)),
                    channel: "bench".into(),
                    ..Default::default()
                })
                .await?
                .into_inner();
            session = opened.session.map(|s| s.session_id).unwrap_or_default();
        }
        let started = Instant::now();
        let mut stream = client
            .start_turn(pb::StartTurnRequest {
                session_id: session.clone(),
                text: text.to_owned(),
                channel: "bench".into(),
                idempotency_key: String::new(),
            })
            .await?
            .into_inner();
        let mut ended = false;
        while let Some(message) = stream.message().await? {
            if let Some(pb::start_turn_response::Kind::Event(event)) = message.kind {
                ended |= matches!(event.kind, Some(pb::session_event::Kind::TurnEnded(_)));
            }
        }
        let elapsed = started.elapsed();
        if !ended {
            return Err("a turn did not end".into());
        }
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    Ok(samples)
}

fn main() -> BenchResult<()> {
    let iterations: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for backend in ["file", "sqlite"] {
        let dir = tempfile::tempdir()?;
        let hub = spawn_hub(dir.path(), backend)?;
        runtime.block_on(async {
            let mut client = connect(dir.path().join("data/hub/taud.sock")).await?;
            let text = over_socket(&mut client, TEXT, iterations).await?;
            report(&format!("{backend} socket text"), text);
            let tool = over_socket(&mut client, TOOL, iterations).await?;
            report(&format!("{backend} socket tool"), tool);
            BenchResult::Ok(())
        })?;
        drop(hub);
        let dir = tempfile::tempdir()?;
        runtime.block_on(async {
            let core = core_for(dir.path(), backend).await?;
            let text = in_process(&core, TEXT, iterations).await?;
            report(&format!("{backend} in-process text"), text);
            let tool = in_process(&core, TOOL, iterations).await?;
            report(&format!("{backend} in-process tool"), tool);
            core.shutdown().await;
            BenchResult::Ok(())
        })?;
    }
    Ok(())
}
