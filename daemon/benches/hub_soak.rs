//! Soak benchmarks of the real `taud` (fake model, Unix socket) on the `file` and `sqlite` stores.
//!
//! The multi-session soak (the default) opens N sessions (10), each watched by M subscribers (5),
//! and serves them text, tool and approved tier-2 turns round robin (the approval decided by a
//! scripted client), optionally with a routine firing; it prints the hub's RSS, open files and
//! threads as it goes, then per store the RSS at start, after warm-up and at the end and the
//! least-squares slope per 10,000 turns after warm-up. The budget (DESIGN.md): ≤ 5 MiB per
//! 10,000 turns after warm-up with 10 sessions and 5 subscribers. The hub runs with the
//! allocator's default arenas, as installed.
//!
//! ```text
//! cargo bench -p taud --bench hub_soak [-- OPTIONS]
//!   --sessions N      open sessions (10)             --subscribers M   per session (5)
//!   --turns T         turns per store (10,000)       --warmup W        turns before the slope (T/5, at most 1,000)
//!   --store S         file or sqlite (both)          --rate R          turns per second (unpaced)
//!   --routine         a prompt routine every minute, and run by hand every 500 turns
//!   --idle-close S    `[hub] idle_session_close = S` (seconds); after the turns, drop the
//!                     subscribers and wait for the sessions to close: RSS before and after;
//!                     then the same load again on new sessions, and RSS at its end
//!   --long            100,000 turns (also TAU_SOAK_LONG=1), for a manual run
//!   --short           3,000 turns per store, warm-up 1,000; exits 1 over the budget (a CI check:
//!                     `cargo bench --profile dev -p taud --bench hub_soak -- --short`, about 40 s
//!                     with the debug build the tests made)
//!   --quiet           no line per sample
//! cargo bench -p taud --bench hub_soak -- single [TURNS [SESSIONS]]
//! ```
//!
//! `single` is the earlier one-session soak: text and tool turns in separate runs on both stores,
//! with `MALLOC_ARENA_MAX=1`, printing idle, after-warm-up and final RSS, the slope per 10,000 turns
//! after the first 1,000 and turn p50/p99 (default 10,000 turns over 1 session; a first argument
//! that is a number also selects it). Its budget: ≤ 10 MiB per 10,000 turns.
//!
//! `TAU_SOAK_TAUD` runs another `taud` binary (a debug build, or a wrapper under a heap profiler).

#[path = "../tests/support/multi_soak.rs"]
mod multi_soak;
#[path = "../tests/support/soak.rs"]
mod soak;

use std::path::PathBuf;

use std::time::Duration;

use multi_soak::{IdleClose, MultiPlan, MultiReport};
use soak::{SoakHub, SoakPlan, SoakResult};

/// The slope budget after warm-up, MiB per 10,000 turns (10 sessions, 5 subscribers).
const SLOPE_BUDGET_MIB: f64 = 5.0;
const LONG_TURNS: usize = 100_000;
const SHORT_TURNS: usize = 3_000;
const SHORT_WARMUP: usize = 1_000;
/// How often the routine is run by hand with `--routine`.
const ROUTINE_EVERY: usize = 500;

fn main() -> SoakResult<()> {
    // `cargo bench` passes `--bench`; it means nothing here.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let taud = std::env::var_os("TAU_SOAK_TAUD")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_taud")), PathBuf::from);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match args.first().map(String::as_str) {
        Some("single") => single(&runtime, &taud, &args[1..]),
        Some(first) if first.parse::<usize>().is_ok() => single(&runtime, &taud, &args),
        _ => multi(&runtime, &taud, &args),
    }
}

/// The options of the multi-session soak.
struct Options {
    plan: MultiPlan,
    stores: Vec<&'static str>,
    check: bool,
    /// `[hub] idle_session_close`, seconds, and the idle phase after the turns.
    idle_close: Option<u64>,
}

fn parse(args: &[String]) -> SoakResult<Options> {
    let long = std::env::var_os("TAU_SOAK_LONG").is_some_and(|v| v == "1");
    let mut plan = MultiPlan {
        sessions: 10,
        subscribers: 5,
        turns: if long { LONG_TURNS } else { 10_000 },
        warmup: 0,
        sample_every: 0,
        rate: None,
        routine_every: None,
        verbose: true,
    };
    let mut warmup = None;
    let mut stores = vec!["file", "sqlite"];
    let mut check = false;
    let mut idle_close = None;
    let mut rest = args.iter();
    let number = |value: Option<&String>, name: &str| -> SoakResult<usize> {
        value
            .and_then(|v| v.replace(['_', ','], "").parse().ok())
            .ok_or_else(|| format!("{name} needs a whole number").into())
    };
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--sessions" => plan.sessions = number(rest.next(), arg)?.max(1),
            "--subscribers" => plan.subscribers = number(rest.next(), arg)?,
            "--turns" => plan.turns = number(rest.next(), arg)?,
            "--warmup" => warmup = Some(number(rest.next(), arg)?),
            "--rate" => {
                let rate: f64 = rest
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|r: &f64| *r > 0.0)
                    .ok_or("--rate needs turns per second")?;
                plan.rate = Some(rate);
            }
            "--store" => {
                stores = match rest.next().map(String::as_str) {
                    Some("file") => vec!["file"],
                    Some("sqlite") => vec!["sqlite"],
                    _ => return Err("--store takes file or sqlite".into()),
                }
            }
            "--routine" => plan.routine_every = Some(ROUTINE_EVERY),
            "--idle-close" => idle_close = Some(number(rest.next(), arg)? as u64),
            "--long" => plan.turns = LONG_TURNS,
            "--short" => {
                plan.turns = SHORT_TURNS;
                warmup = Some(SHORT_WARMUP);
                check = true;
            }
            "--quiet" => plan.verbose = false,
            other => {
                return Err(format!("unknown option {other:?} (see the benchmark's doc)").into());
            }
        }
    }
    plan.warmup = warmup.unwrap_or((plan.turns / 5).min(1_000));
    plan.sample_every = (plan.turns / 40).max(50);
    Ok(Options {
        plan,
        stores,
        check,
        idle_close,
    })
}

fn multi(
    runtime: &tokio::runtime::Runtime,
    taud: &std::path::Path,
    args: &[String],
) -> SoakResult<()> {
    let Options {
        plan,
        stores,
        check,
        idle_close,
    } = parse(args)?;
    let toml = idle_close.map_or_else(String::new, |s| {
        format!("[hub]\nidle_session_close = {s}\n")
    });
    println!(
        "multi-session soak: {} sessions × {} subscribers, {} turns per store (text, tool, text, tier 2 approved), warm-up {}{}{}",
        plan.sessions,
        plan.subscribers,
        plan.turns,
        plan.warmup,
        plan.rate
            .map_or_else(String::new, |r| format!(", {r} turns/s")),
        if plan.routine_every.is_some() {
            ", with a routine"
        } else {
            ""
        },
    );
    let mut over = Vec::new();
    let mut reports = Vec::new();
    for backend in stores {
        println!("{backend}:");
        let hub = SoakHub::start_configured(taud, backend, &toml)?;
        let report: SoakResult<(MultiReport, Option<(IdleClose, MultiReport)>)> =
            runtime.block_on(async {
                let mut running = multi_soak::open(&hub, &plan).await?;
                let report = multi_soak::run(&hub, &plan, &running).await?;
                let closed = match idle_close {
                    Some(seconds) => {
                        // The reaper looks every half the idle time (at most 60 s).
                        let limit = Duration::from_secs(seconds + seconds.min(120) / 2 + 30);
                        let closed = multi_soak::idle_close(&hub, &mut running, limit).await?;
                        // The same load again on new sessions: does it reuse what the first
                        // sessions left?
                        let mut again = multi_soak::open(&hub, &plan).await?;
                        let second = multi_soak::run(&hub, &plan, &again).await?;
                        again.drop_subscribers().await;
                        Some((closed, second))
                    }
                    None => {
                        running.drop_subscribers().await;
                        None
                    }
                };
                Ok((report, closed))
            });
        let (report, closed) = report?;
        if let Some((closed, second)) = &closed {
            idle_summary(backend, closed);
            println!(
                "{backend:<6} the same load again on {} new sessions: RSS {:.1} → {:.1} MiB",
                plan.sessions,
                second.idle.rss_kib as f64 / 1024.0,
                second.last().map_or(0.0, |s| s.rss_kib as f64 / 1024.0),
            );
        }
        if report.slope_mib_per_10k() > SLOPE_BUDGET_MIB {
            over.push(backend);
        }
        reports.push((backend, report));
    }
    for (backend, report) in &reports {
        summary(backend, &plan, report);
    }
    if check && !over.is_empty() {
        return Err(format!(
            "RSS grew faster than {SLOPE_BUDGET_MIB} MiB per 10,000 turns after warm-up on: {}",
            over.join(", ")
        )
        .into());
    }
    Ok(())
}

fn summary(backend: &str, plan: &MultiPlan, report: &MultiReport) {
    let mib = |s: Option<multi_soak::Sample>| s.map_or(0.0, |s| s.rss_kib as f64 / 1024.0);
    let last = report.last();
    println!(
        "{backend:<6} {}×{}: RSS idle {:.1} → warm-up {:.1} → end {:.1} MiB; slope {:+.2} MiB/10k turns (end to end {:+.2}); fds {} → {}; threads {} → {}; turn p50 {:.2} ms p99 {:.2} ms; {} approvals, {} events to subscribers, {} resubscribed",
        plan.sessions,
        plan.subscribers,
        mib(Some(report.idle)),
        mib(report.at_warmup()),
        mib(last),
        report.slope_mib_per_10k(),
        report.end_to_end_mib_per_10k(),
        report.idle.fds,
        last.map_or(0, |s| s.fds),
        report.idle.threads,
        last.map_or(0, |s| s.threads),
        report.percentile_ms(0.5),
        report.percentile_ms(0.99),
        report.approvals_decided,
        report.events_seen,
        report.resubscribed,
    );
}

fn idle_summary(backend: &str, closed: &IdleClose) {
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "{backend:<6} idle close: RSS {:.1} → {:.1} MiB after the {} sessions closed ({:.1} s): {:.1} KiB per session given back; their agents held {} messages, {:.1} KiB encoded per session",
        mib(closed.before.rss_kib),
        mib(closed.after.rss_kib),
        closed.sessions,
        closed.waited.as_secs_f64(),
        closed.freed_per_session_kib(),
        closed.held_messages,
        closed.held_per_session_kib(),
    );
}

/// The one-session soak (see the module doc).
fn single(
    runtime: &tokio::runtime::Runtime,
    taud: &std::path::Path,
    args: &[String],
) -> SoakResult<()> {
    let mut numbers = args.iter().filter_map(|a| a.parse::<usize>().ok());
    let turns = numbers.next().unwrap_or(10_000);
    let sessions = numbers.next().unwrap_or(1);
    let warmup = 1_000.min(turns / 5);
    println!("soak: {turns} turns per run over {sessions} session(s), warm-up {warmup}");
    for backend in ["file", "sqlite"] {
        for (kind, text) in [("text", "hello"), ("tool", "what time is it")] {
            let hub = SoakHub::start(taud, backend)?;
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
