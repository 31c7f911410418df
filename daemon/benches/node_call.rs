//! The overhead of a tier-0 call on a node over the same call run locally: `current_time` as a
//! `NodeTool` (the hub's side of the link in this process, TLS 1.3 over loopback to a real
//! `taud` running as a node) against `CurrentTime` called in this process, p50/p99; and the
//! node's idle RSS once its link is up, split into its own (anonymous) memory, the pages of the
//! `taud` executable and those of the shared libraries it maps (see `resident/mod.rs`).
//!
//! Run: `cargo bench -p taud --bench node_call [-- ITERATIONS]` (default 2000). The node is the
//! `taud` this benchmark was built with, or `TAU_BENCH_TAUD=<path>` (e.g. a node-only build,
//! `cargo build --profile node -p taud --no-default-features`); the report names the binary, its
//! size and its `--version` (a node-only build says so).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tau_api::proto::v1 as pb;
use taud::host::{Hub, HubOptions, HubService};
use taud::link::NodeListener;
use taud::node::NodeRegistry;
use taud::tool::builtin::{CurrentTime, SystemClock};
use taud::tool::{ProgressReporter, Tool, ToolContext};
use tokio_util::sync::CancellationToken;

mod resident;

const WARMUP: usize = 200;

type BoxError = Box<dyn std::error::Error>;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn context() -> ToolContext {
    ToolContext {
        tool_use_id: "bench".into(),
        session_id: "bench".into(),
        channel: "bench".into(),
        cancel: CancellationToken::new(),
        progress: ProgressReporter::disabled(),
    }
}

async fn time_calls(tool: &dyn Tool, iterations: usize) -> Result<Vec<Duration>, BoxError> {
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let started = Instant::now();
        tool.call(json!({}), context())
            .await
            .map_err(|e| e.to_string())?;
        if i >= WARMUP {
            samples.push(started.elapsed());
        }
    }
    Ok(samples)
}

async fn uds_nodes(
    socket: &Path,
) -> Result<pb::nodes_client::NodesClient<tonic::transport::Channel>, BoxError> {
    let socket = socket.to_owned();
    let channel = tonic::transport::Endpoint::try_from("http://localhost")?
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await?;
    Ok(pb::nodes_client::NodesClient::new(channel))
}

async fn wait<T>(what: &str, mut cond: impl FnMut() -> Option<T>) -> Result<T, BoxError> {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = cond() {
            return Ok(value);
        }
        if Instant::now() > end {
            return Err(format!("timed out waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let iterations: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    let dir = tempfile::tempdir()?;

    // The hub's side, in this process: a registry and its node listener.
    let listen = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let config = tau_api::config::Config::from_toml_str(
        &format!("[nodes]\nlisten = \"{listen}\"\n[nodes.pi.tools.current_time]\ntier = 0\n"),
        Path::new("bench.toml"),
        &tau_api::env::Env::new(),
        &tau_api::config::KnownNames::builtin(),
    )?;
    let hub_dir = dir.path().join("hub-data/hub");
    std::fs::create_dir_all(&hub_dir)?;
    let registry = Arc::new(NodeRegistry::open(&hub_dir, config.nodes)?);
    let hub = Hub::new(HubOptions::new(dir.path().join("hub-data")), None);
    let listener = NodeListener::new(Arc::clone(&registry));
    listener.start(&hub).await?;

    // The node: a real taud with TAU_ROLE=node.
    let home = dir.path().join("node-home");
    let data = dir.path().join("node-data");
    std::fs::create_dir_all(&home)?;
    std::fs::write(home.join("tau.toml"), "[hub]\nrole = \"node\"\n")?;
    let taud = resident::taud_binary(env!("CARGO_BIN_EXE_taud"));
    let mut node = Command::new(&taud)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("TAU_HOME", &home)
        .env("TAU_DATA_DIR", &data)
        .env("TAU_HUB_PORT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let socket = data.join("hub/taud.sock");
    wait("the node's socket", || socket.exists().then_some(())).await?;
    let (code, _) = registry.issue_code("pi")?;
    let mut nodes = uds_nodes(&socket).await?;
    nodes
        .join_hub(pb::JoinHubRequest {
            address: listen.to_string(),
            code,
        })
        .await?;
    wait("the node's link", || {
        (registry.live_names() == ["pi"]).then_some(())
    })
    .await?;
    let remote = wait("the node's tool", || {
        registry
            .tools()
            .into_iter()
            .find(|t| t.spec().name == "node__pi__current_time")
    })
    .await?;
    let local = CurrentTime::new(Arc::new(SystemClock));

    let mut local_samples = time_calls(&local, iterations).await?;
    let mut remote_samples = time_calls(remote.as_ref(), iterations).await?;
    let (l50, l99) = (
        percentile(&mut local_samples, 0.5),
        percentile(&mut local_samples, 0.99),
    );
    let (r50, r99) = (
        percentile(&mut remote_samples, 0.5),
        percentile(&mut remote_samples, 0.99),
    );
    println!("node call, {iterations} calls of current_time after {WARMUP} warm-up:");
    println!("  node binary: {}", resident::describe(&taud));
    println!(
        "  local call:  p50 {:>8.3} ms   p99 {:>8.3} ms",
        l50.as_secs_f64() * 1e3,
        l99.as_secs_f64() * 1e3
    );
    println!(
        "  node call:   p50 {:>8.3} ms   p99 {:>8.3} ms",
        r50.as_secs_f64() * 1e3,
        r99.as_secs_f64() * 1e3
    );
    println!(
        "  overhead:    p50 {:>8.3} ms   (target <= 1 ms on loopback)",
        r50.saturating_sub(l50).as_secs_f64() * 1e3
    );

    // Idle: a few heartbeats with nothing else to do.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pid = node.id();
    match resident::Resident::of(pid, &taud) {
        Some(rss) => println!("  node idle RSS (target <= 10 MiB): {}", rss.line()),
        None => println!("  node idle RSS: n/a"),
    }
    let _ = node.kill();
    let _ = node.wait();
    listener.stop().await?;
    Ok(())
}
