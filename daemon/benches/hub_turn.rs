//! Turn latency through the hub with the fake (demo) model, on the durable `file` and `sqlite`
//! session stores: over the Unix socket against the real `taud` binary, and in-process through the
//! hub core (no gRPC). A text turn ("hello") and a tool turn ("what time is it", `current_time`,
//! tier 0). Text and tool turns take turns in blocks of 25 (one session each), so both meet the
//! same disk, whose speed drifts within a run; consecutive turns stay in one session, as a chat's
//! do (turns alternating between sessions cost the `file` store more fsync time here). Prints
//! p50/p99 per store, path and kind and the tool/text ratio of the medians, after the disk's floor
//! measured in the same run (an atomic small-file write; an append with fsync, back to back and
//! 0.5 ms apart), and the text turns per second of ten busy sessions in one hub next to one.
//!
//! The socket's client runs on a current-thread runtime, as `tau chat` and `tau ask` do (a
//! multi-thread client adds its own thread hand-offs, about 0.2 ms a turn here, to the hub's time).
//!
//! `table` runs every turn target instead, each with PASS or FAIL (see `hub_turn/table.rs`):
//! `cargo bench -p taud --bench hub_turn -- table [TURNS] [file|sqlite]`; `scale [ROUNDS]
//! [file|sqlite]` runs its parallel row alone, several times (see `hub_turn/table.rs`).
//!
//! Run: `cargo bench -p taud --bench hub_turn [-- ITERATIONS] [file] [sqlite] [socket] [in-process]
//! [nosync] [stages]` (default 300 iterations, both stores, both paths; naming a store or a path
//! runs only those). `nosync` runs the in-process stores without fsync: the hub's own cost, disk
//! aside. `stages` shows where a socket text turn's time goes instead: a unary call's round trip,
//! then the time to the StartTurn response's headers, its first event, `TurnEnded` and its end.

#[path = "../tests/support/soak.rs"]
mod soak;
#[path = "hub_turn/table.rs"]
mod table;

use std::sync::Arc;
use std::time::{Duration, Instant};

use taud::hub::{
    CoreOptions, CoreSetup, DemoModelFactory, EventKind, HubCore, OpenTarget, StartTurn,
};
use taud::store::{Durability, SessionBackends, SessionStoreConfig};

use soak::SoakHub;

type BenchResult<T> = soak::SoakResult<T>;

const WARMUP: usize = 30;
/// Turns per session before a fresh one is opened (so the history stays small).
const TURNS_PER_SESSION: usize = 25;
const TEXT: &str = "hello";
const TOOL: &str = "what time is it";
/// The pause before each paced floor write (about a text turn's time between its two writes).
const FLOOR_PAUSE: Duration = Duration::from_micros(500);

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

// ---- the disk's floor ---------------------------------------------------------------------

/// What the disk under the temporary directory allows, measured in the same run: an atomic
/// durable write of a new small file (temporary file, fsync, rename, directory fsync) and an append
/// with fsync, back to back and paced. A durable text turn stores two messages, so its floor is
/// about two atomic writes (`file`'s seed layout) or two appends.
fn disk_floor(iterations: usize) -> BenchResult<()> {
    use std::io::Write as _;
    let dir = tempfile::tempdir()?;
    let record = vec![b'x'; 600];
    let sync_dir = || std::fs::File::open(dir.path())?.sync_all();
    let mut atomic = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let started = Instant::now();
        let temp = dir.path().join(format!(".record.{i}.tmp"));
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(&record)?;
        file.sync_all()?;
        std::fs::rename(&temp, dir.path().join(format!("record.{i}.json")))?;
        sync_dir()?;
        if i >= WARMUP {
            atomic.push(started.elapsed());
        }
    }
    report("floor: atomic small write", atomic);
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("log.jsonl"))?;
    report(
        "floor: append + fsync",
        timed_appends(&mut log, &record, iterations, None)?,
    );
    // The same append after a short pause, as the hub meets the disk: a turn's writes come between
    // other work, never back to back, and on some disks (a virtual machine's, notably) a sync after
    // a pause costs several times one in a tight loop.
    report(
        "floor: append + fsync, paced",
        timed_appends(&mut log, &record, iterations, Some(FLOOR_PAUSE))?,
    );
    Ok(())
}

/// The times of `iterations` appends of `record` to `log`, each synced, after a warm-up; with
/// `pause`, each after sleeping that long.
fn timed_appends(
    log: &mut std::fs::File,
    record: &[u8],
    iterations: usize,
    pause: Option<Duration>,
) -> BenchResult<Vec<Duration>> {
    use std::io::Write as _;
    let mut times = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
        let started = Instant::now();
        log.write_all(record)?;
        log.sync_data()?;
        if i >= WARMUP {
            times.push(started.elapsed());
        }
    }
    Ok(times)
}

// ---- in-process ---------------------------------------------------------------------------

async fn core_for(
    dir: &std::path::Path,
    backend: &str,
    durability: Durability,
) -> BenchResult<HubCore> {
    let setup = CoreSetup {
        options: CoreOptions::default(),
        backend: backend.to_owned(),
        store: SessionStoreConfig {
            sessions_dir: dir.join("sessions"),
            sqlite_path: dir.join("sessions.db"),
            durability,
        },
        backends: SessionBackends::builtin(),
        factory: Arc::new(DemoModelFactory),
    };
    Ok(setup.start().await?)
}

/// The hub core in-process (no gRPC).
impl TurnPath for &HubCore {
    async fn new_session(&mut self) -> BenchResult<String> {
        let opened = self
            .open_session(OpenTarget::New, None, "bench", None)
            .await?;
        Ok(opened.session.session_id)
    }

    async fn turn(&mut self, session: &str, text: &str) -> BenchResult<Duration> {
        let started = Instant::now();
        let mut stream = self
            .start_turn(StartTurn {
                session_id: session.to_owned(),
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
        if ended {
            Ok(elapsed)
        } else {
            Err("a turn did not end".into())
        }
    }
}

/// Text turns per second through one hub core: `sessions` sessions, each running `turns` turns
/// one after another, all sessions at once.
async fn throughput(core: &HubCore, sessions: usize, turns: usize) -> BenchResult<f64> {
    let mut ids = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let opened = core
            .open_session(OpenTarget::New, None, "bench", None)
            .await?;
        ids.push(opened.session.session_id);
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for id in ids {
        let core = core.clone();
        tasks.spawn(async move {
            for _ in 0..turns {
                let mut stream = core
                    .start_turn(StartTurn {
                        session_id: id.clone(),
                        text: TEXT.to_owned(),
                        channel: "bench".into(),
                        idempotency_key: String::new(),
                    })
                    .await?;
                while stream.next().await?.is_some() {}
            }
            BenchResult::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok((sessions * turns) as f64 / started.elapsed().as_secs_f64())
}

async fn report_throughput(core: &HubCore, backend: &str, iterations: usize) -> BenchResult<()> {
    let per_session = (iterations / 10).clamp(TURNS_PER_SESSION, 100);
    let one = throughput(core, 1, per_session * 3).await?;
    let ten = throughput(core, 10, per_session).await?;
    println!(
        "{:<28} 1 session {one:>7.0} turns/s, 10 sessions {ten:>7.0} turns/s ({:.2}x)",
        format!("{backend} in-process parallel"),
        ten / one
    );
    Ok(())
}

// ---- over the Unix socket (the real taud, driven like the soak benchmark) -----------------

/// A client of the real `taud` over its socket.
type SocketClient = tau_api::proto::v1::tau_client::TauClient<tonic::transport::Channel>;

/// The real `taud` over its socket.
impl TurnPath for SocketClient {
    async fn new_session(&mut self) -> BenchResult<String> {
        soak::new_session(self).await
    }

    async fn turn(&mut self, session: &str, text: &str) -> BenchResult<Duration> {
        let started = Instant::now();
        soak::turn(self, session, text).await?;
        Ok(started.elapsed())
    }
}

// ---- where a socket turn's time goes --------------------------------------------------------

/// A unary call's round trip (the transport's own cost), then text turns over the socket, each
/// timed at four points: the StartTurn response's headers, its first event, `TurnEnded`, its end.
async fn socket_stages(client: &mut SocketClient, iterations: usize) -> BenchResult<()> {
    use tau_api::proto::v1 as pb;
    let mut round_trips = Vec::with_capacity(iterations);
    for n in 0..WARMUP + iterations {
        let started = Instant::now();
        client
            .list_pending_approvals(pb::ListPendingApprovalsRequest::default())
            .await?;
        if n >= WARMUP {
            round_trips.push(started.elapsed());
        }
    }
    report("unary ListPendingApprovals", round_trips);
    let mut stages: [Vec<Duration>; 4] = Default::default();
    let mut session = String::new();
    for n in 0..WARMUP + iterations {
        if n % TURNS_PER_SESSION == 0 {
            session = soak::new_session(client).await?;
        }
        let started = Instant::now();
        let mut stream = client
            .start_turn(pb::StartTurnRequest {
                session_id: session.clone(),
                text: TEXT.to_owned(),
                channel: "bench".into(),
                idempotency_key: String::new(),
                new_session: false,
            })
            .await?
            .into_inner();
        let headers = started.elapsed();
        let (mut first, mut ended) = (None, None);
        while let Some(message) = stream.message().await? {
            if let Some(pb::start_turn_response::Kind::Event(event)) = message.kind {
                first.get_or_insert_with(|| started.elapsed());
                if matches!(event.kind, Some(pb::session_event::Kind::TurnEnded(_))) {
                    ended = Some(started.elapsed());
                }
            }
        }
        let end = started.elapsed();
        let (Some(first), Some(ended)) = (first, ended) else {
            return Err("a turn's stream closed before TurnEnded".into());
        };
        if n >= WARMUP {
            for (stage, time) in stages.iter_mut().zip([headers, first, ended, end]) {
                stage.push(time);
            }
        }
    }
    let names = ["headers", "first event", "TurnEnded", "stream end"];
    for (name, samples) in names.into_iter().zip(stages) {
        report(&format!("socket text: {name}"), samples);
    }
    Ok(())
}

// ---- both paths ---------------------------------------------------------------------------

/// How the benchmark reaches a hub: in-process or over the socket.
trait TurnPath {
    async fn new_session(&mut self) -> BenchResult<String>;
    /// One turn of `text` on `session`, read to its end; its latency.
    async fn turn(&mut self, session: &str, text: &str) -> BenchResult<Duration>;
}

/// Text and tool turns in blocks of [`TURNS_PER_SESSION`], each block on a new session, the kinds
/// taking turns, so both meet the same disk.
async fn in_blocks(path: &mut impl TurnPath, iterations: usize) -> BenchResult<[Vec<Duration>; 2]> {
    let mut samples = [
        Vec::with_capacity(iterations),
        Vec::with_capacity(iterations),
    ];
    let total = WARMUP + iterations;
    let mut done = 0;
    while done < total {
        let block = TURNS_PER_SESSION.min(total - done);
        for (kind, text) in [TEXT, TOOL].into_iter().enumerate() {
            let session = path.new_session().await?;
            for n in done..done + block {
                let elapsed = path.turn(&session, text).await?;
                if n >= WARMUP {
                    samples[kind].push(elapsed);
                }
            }
        }
        done += block;
    }
    Ok(samples)
}

/// Reports a text and a tool sample set, and the ratio of their medians.
fn report_pair(label: &str, [text, tool]: [Vec<Duration>; 2]) {
    let p50 = |samples: &[Duration]| {
        let mut sorted = samples.to_vec();
        sorted.sort();
        percentile(&sorted, 0.50).as_secs_f64()
    };
    let ratio = p50(&tool) / p50(&text).max(f64::MIN_POSITIVE);
    report(&format!("{label} text"), text);
    report(&format!("{label} tool"), tool);
    println!(
        "{:<28} tool p50 / text p50 = {ratio:.2}x",
        format!("{label} ratio")
    );
}

/// The words of `args` that are among `known`, or all of `known` when none is.
fn chosen<'a>(args: &[String], known: &[&'a str]) -> Vec<&'a str> {
    let named: Vec<&str> = known
        .iter()
        .copied()
        .filter(|word| args.iter().any(|a| a == word))
        .collect();
    if named.is_empty() {
        known.to_vec()
    } else {
        named
    }
}

fn main() -> BenchResult<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "scale") {
        let rounds = args.iter().find_map(|a| a.parse().ok()).unwrap_or(5);
        return table::scale(rounds, &chosen(&args, &["file", "sqlite"]));
    }
    if args.iter().any(|a| a == "table") {
        let turns = args.iter().find_map(|a| a.parse().ok()).unwrap_or(2000);
        return table::run(turns, &chosen(&args, &["file", "sqlite"]));
    }
    let iterations: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(300);
    let backends = chosen(&args, &["file", "sqlite"]);
    let paths = chosen(&args, &["socket", "in-process"]);
    let stages = args.iter().any(|a| a == "stages");
    let (durability, in_process_label) = if args.iter().any(|a| a == "nosync") {
        (Durability::NoSync, "in-process nosync")
    } else {
        (Durability::Full, "in-process")
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    disk_floor(iterations)?;
    for backend in backends {
        if paths.contains(&"socket") {
            let taud = std::path::Path::new(env!("CARGO_BIN_EXE_taud"));
            let hub = SoakHub::start_plain(taud, backend)?;
            // One thread, like the real clients (see the module doc).
            let client_runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            client_runtime.block_on(async {
                let mut client = hub.client().await?;
                if stages {
                    return socket_stages(&mut client, iterations).await;
                }
                let pair = in_blocks(&mut client, iterations).await?;
                report_pair(&format!("{backend} socket"), pair);
                BenchResult::Ok(())
            })?;
        }
        if paths.contains(&"in-process") && !stages {
            let dir = tempfile::tempdir()?;
            runtime.block_on(async {
                let core = core_for(dir.path(), backend, durability).await?;
                let pair = in_blocks(&mut &core, iterations).await?;
                report_pair(&format!("{backend} {in_process_label}"), pair);
                report_throughput(&core, backend, iterations).await?;
                core.shutdown().await;
                BenchResult::Ok(())
            })?;
        }
    }
    Ok(())
}
