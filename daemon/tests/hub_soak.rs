//! The soak benchmark's short form, run by `cargo test`: the real `taud` on the fake model serves
//! 1,500 turns (text turns on the file store, tool turns on sqlite) and its resident memory may not
//! keep growing after warm-up. The full run is `cargo bench -p taud --bench hub_soak`.
//!
//! A hub that kept something per turn grew by tens of MiB per 1,000 turns here (34 KiB per text
//! turn, 70 KiB per tool turn); the bound below leaves room for allocator noise and caches that
//! fill up once, and none for that.

use crate::support;

use support::soak::{SoakHub, SoakPlan};

/// Growth allowed over the 1,000 turns after warm-up.
const MAX_GROWTH_MIB: f64 = 4.0;

async fn soak(backend: &'static str, text: &str) {
    let taud = std::path::Path::new(env!("CARGO_BIN_EXE_taud"));
    let mut hub = match SoakHub::start(taud, backend) {
        Ok(hub) => hub,
        Err(error) => panic!("{backend}: the hub did not start: {error}"),
    };
    let plan = SoakPlan {
        backend,
        text: text.into(),
        turns: 1_500,
        warmup: 500,
        sessions: 1,
        samples: 4,
    };
    let report = match hub.run(&plan).await {
        Ok(report) => report,
        Err(error) => panic!(
            "{backend} {text:?}: the soak failed: {error}; {}",
            hub.trace()
        ),
    };
    let growth = report.growth_mib();
    println!(
        "{backend} {text:?}: RSS {:?} KiB; growth after warm-up {growth:.2} MiB ({:+.1} MiB per 10k turns)",
        report.rss,
        report.slope_mib_per_10k()
    );
    assert!(
        growth <= MAX_GROWTH_MIB,
        "{backend} {text:?}: RSS grew {growth:.2} MiB over 1,000 turns after warm-up (samples {:?})",
        report.rss
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_turns_on_the_file_store_keep_memory_flat() {
    soak("file", "hello").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_turns_on_sqlite_keep_memory_flat() {
    soak("sqlite", "what time is it").await;
}
