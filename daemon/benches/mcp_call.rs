//! The overhead of a tier-0 MCP call through the hub's tool path (tier gate, MCP adapter, rmcp
//! client, result conversion) over the fake server's own time (a bare JSON-RPC round trip over a
//! pipe to the same fake server), p50/p99; and the process's RSS before and with three servers
//! connected.
//!
//! Run: `cargo bench -p taud --bench mcp_call [-- ITERATIONS]` (default 2000). Needs python3.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use taud::gate::{CallContext, GateCall, TierGate, ToolCallStatus, Verdict};
use taud::mcp::{McpManager, McpServerSpec, Phase, hub_catalog};
use taud::tool::Tier;
use taud::tool::builtin::SystemClock;
use tokio_util::sync::CancellationToken;

const WARMUP: usize = 200;

type BoxError = Box<dyn std::error::Error>;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_mcp.py")
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

/// Bare round trips to a fresh fake server: write one `tools/call` line, read one line.
fn raw_round_trips(iterations: usize) -> Result<Vec<Duration>, BoxError> {
    let mut child = Command::new("python3")
        .arg("-u")
        .arg(script())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    )?;
    stdout.read_line(&mut line)?;
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )?;
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let request = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": "read_state", "arguments": {}}});
        line.clear();
        let started = Instant::now();
        writeln!(stdin, "{request}")?;
        stdin.flush()?;
        stdout.read_line(&mut line)?;
        let elapsed = started.elapsed();
        if !line.contains("read_state ok") {
            return Err(format!("unexpected answer: {line}").into());
        }
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    drop(stdin);
    child.wait()?;
    Ok(samples)
}

async fn run(iterations: usize) -> Result<(), BoxError> {
    let before = rss_kib();
    let env = tau_api::env::Env::from_process();
    let specs: Vec<McpServerSpec> = ["one", "two", "three"]
        .iter()
        .map(|key| {
            let mut spec =
                McpServerSpec::new(*key, "python3", &env).tool("read_state", Tier::Read, None);
            spec.args = vec!["-u".into(), script().display().to_string()];
            spec
        })
        .collect();
    let manager = McpManager::new(specs);
    manager.start();
    let deadline = Instant::now() + Duration::from_secs(30);
    while manager.status().iter().any(|s| s.state != Phase::Ready) {
        if Instant::now() > deadline {
            return Err(format!("servers not ready: {:?}", manager.status()).into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let with_servers = rss_kib();
    let catalog = hub_catalog(Arc::new(SystemClock), &[], &manager)?;
    let gate = TierGate::builder(Arc::new(catalog)).build();
    let ctx = CallContext {
        session_id: "bench".into(),
        channel: "bench".into(),
        cancel: CancellationToken::new(),
    };
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let call = GateCall {
            tool_use_id: format!("u{i}"),
            tool: "mcp__two__read_state".into(),
            arguments: json!({}),
        };
        let started = Instant::now();
        let Verdict::Allowed(permit) = gate.check(call, &ctx).await else {
            return Err("the gate refused a tier-0 call".into());
        };
        let record = permit.run(ctx.clone()).await;
        let elapsed = started.elapsed();
        if record.status != ToolCallStatus::Success {
            return Err(format!("call failed: {record:?}").into());
        }
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    manager.stop(Duration::from_secs(5)).await;
    let mut raw =
        tokio::task::block_in_place(|| raw_round_trips(iterations).map_err(|e| e.to_string()))?;
    let (hub50, hub99) = (
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    );
    let (raw50, raw99) = (percentile(&mut raw, 0.5), percentile(&mut raw, 0.99));
    println!(
        "tier-0 MCP call through gate + adapter + rmcp: p50 {hub50:?}, p99 {hub99:?} ({iterations} calls)"
    );
    println!("bare JSON-RPC round trip to the same fake server: p50 {raw50:?}, p99 {raw99:?}");
    println!(
        "overhead: p50 {:?}, p99 {:?}",
        hub50.saturating_sub(raw50),
        hub99.saturating_sub(raw99)
    );
    println!(
        "RSS: {} KiB before, {} KiB with three servers connected (+{} KiB)",
        before,
        with_servers,
        with_servers.saturating_sub(before)
    );
    Ok(())
}

fn main() -> Result<(), BoxError> {
    let iterations = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2000);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(iterations))
}
