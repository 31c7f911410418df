//! In-process turn latency with the fake model (no hub, no store): a text turn and a tool turn
//! (`current_time`, tier 0). Prints p50/p99 per kind.
//!
//! Run: `cargo bench -p taud --bench agent_turn [-- ITERATIONS]` (default 2000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use taud::agent::TauAgent;
use taud::testing::FakeModel;
use taud::tool::builtin::{FixedClock, shipped_catalog};

const WARMUP: usize = 100;

fn agent() -> Result<TauAgent, Box<dyn std::error::Error>> {
    let clock = Arc::new(FixedClock::from(
        "2026-09-29T12:30:00Z".parse::<jiff::Timestamp>()?,
    ));
    Ok(TauAgent::builder(Arc::new(FakeModel::demo()))
        .catalog(shipped_catalog(clock, &[])?)
        .build())
}

async fn measure(
    prompt: &str,
    iterations: usize,
) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    let mut samples = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        // A fresh agent per turn, so the history does not grow across samples.
        let agent = agent()?;
        let started = Instant::now();
        let text = agent.ask(prompt).await?;
        let elapsed = started.elapsed();
        if text.is_empty() {
            return Err("empty reply".into());
        }
        if i >= WARMUP {
            samples.push(elapsed);
        }
    }
    samples.sort();
    Ok(samples)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn report(kind: &str, samples: &[Duration]) {
    println!(
        "{kind:<10} n={:<6} p50={:>8.1} µs  p99={:>8.1} µs",
        samples.len(),
        percentile(samples, 0.50).as_secs_f64() * 1e6,
        percentile(samples, 0.99).as_secs_f64() * 1e6,
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations = std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with("--"))
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(2000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let text = measure("hello there", iterations).await?;
        report("text turn", &text);
        let tool = measure("What time is it?", iterations).await?;
        report("tool turn", &tool);
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
