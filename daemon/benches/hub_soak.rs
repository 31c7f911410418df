//! Soak benchmark: many turns against the real `taud` (fake model, Unix socket), text and tool
//! turns, on the `file` and `sqlite` stores, printing the hub's idle RSS, its RSS after warm-up and
//! at the end, the slope per 10,000 turns after the first 1,000, and turn p50/p99.
//!
//! Run: `cargo bench -p taud --bench hub_soak [-- TURNS [SESSIONS]]` (default 10,000 turns over 1
//! session). The budget: ≤ 10 MiB of growth per 10,000 turns after the first 1,000.

#[path = "../tests/support/soak.rs"]
mod soak;

use soak::{SoakHub, SoakPlan, SoakResult};

fn main() -> SoakResult<()> {
    let mut args = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse::<usize>().ok());
    let turns = args.next().unwrap_or(10_000);
    let sessions = args.next().unwrap_or(1);
    let warmup = 1_000.min(turns / 5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // TAU_SOAK_TAUD runs another binary (a debug build, or a wrapper under a heap profiler).
    let taud = std::env::var_os("TAU_SOAK_TAUD").map_or_else(
        || env!("CARGO_BIN_EXE_taud").into(),
        std::path::PathBuf::from,
    );
    println!("soak: {turns} turns per run over {sessions} session(s), warm-up {warmup}");
    for backend in ["file", "sqlite"] {
        for (kind, text) in [("text", "hello"), ("tool", "what time is it")] {
            let hub = SoakHub::start(&taud, backend)?;
            let plan = SoakPlan {
                backend,
                text: text.into(),
                turns,
                warmup,
                sessions,
                samples: 10,
            };
            let report = runtime.block_on(hub.run(&plan))?;
            let mib = |k: u64| k as f64 / 1024.0;
            println!(
                "{backend:<6} {kind:<4} idle {:>6.1} MiB  after warm-up {:>6.1} MiB  end {:>6.1} MiB  slope {:>+7.2} MiB/10k turns  p50 {:.3} ms  p99 {:.3} ms  threads {}",
                mib(report.idle_kib),
                mib(report.rss.first().map_or(0, |s| s.1)),
                mib(report.rss.last().map_or(0, |s| s.1)),
                report.slope_mib_per_10k(),
                report.percentile_ms(0.5),
                report.percentile_ms(0.99),
                report.threads,
            );
        }
    }
    Ok(())
}
