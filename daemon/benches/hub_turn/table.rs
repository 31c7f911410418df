//! `hub_turn -- table [TURNS]`: every turn target of the hub in one run, beside the disk's floors
//! measured in the same run, each with PASS or FAIL.
//!
//! Naming `file` or `sqlite` runs that store only. The floors' ratio is the disk's own p99 / p50:
//! on a disk shared with other work it is often far above 3×, and no turn's tail can be below it.
//!
//! - Tails and medians: the real `taud` over its Unix socket, one client thread, `TURNS` text and
//!   `TURNS` tool turns per store (2,000 by default) in two long sessions, the kinds taking turns
//!   in blocks of 25, so the file store's checkpoints and the sqlite store's WAL checkpoints fall
//!   inside the sample. Targets: p99 ≤ 3× p50 for each kind; text p50 ≤ 2× the atomic small-file
//!   write measured just before the store's turns.
//! - Parallel sessions: text turns per second of ten sessions at once (ten connections, each one
//!   turn after another) next to one session, over the same socket. Target: ≥ 4×. Beside it, the
//!   ratio the processor allows: the cores over the hub's and this client's processor time per
//!   turn at ten sessions, over one session's rate.
//! - One-shot: `tau ask hello` (each store) and `tau version` (once), the release binaries next to
//!   `taud`, spawned one after another with the hub running. Targets: p50 ≤ 4 ms and ≤ 3 ms.
//!
//! Every hub's files (and the floors') stay on disk until the run's last measurement; then they
//! are removed together ([`settle`]), and a run started within the six minutes for which ext4
//! without a journal holds freed inodes back waits out the rest first ([`await_inode_hold`]), so
//! neither the next store's rows nor the next run pay for them.
//!
//! `TAU_BENCH_TAUD=<path>` runs another `taud` (and the `tau` beside it), e.g. a copy of the
//! build before a change, so before and after meet the same disk minutes apart.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::soak::SoakHub;
use super::{BenchResult, SocketClient, TEXT, TOOL, TURNS_PER_SESSION, TurnPath, percentile};

/// Turns before the measured ones (per kind).
const WARMUP: usize = 50;
/// Runs of each one-shot command.
const SPAWNS: usize = 200;

/// p50, p99 and max of a sample, in milliseconds.
struct Spread {
    p50: f64,
    p99: f64,
    max: f64,
}

impl Spread {
    fn of(samples: &[Duration]) -> Self {
        let mut sorted = samples.to_vec();
        sorted.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Self {
            p50: ms(percentile(&sorted, 0.50)),
            p99: ms(percentile(&sorted, 0.99)),
            max: ms(sorted.last().copied().unwrap_or_default()),
        }
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

/// The two floors: an atomic small-file write (temporary file, fsync, rename, directory fsync)
/// and an append with fdatasync, back to back. The atomic write names a new file each time, as
/// the store does a message: renaming over one name would free an inode a write, and every file
/// the hub then creates skips those for minutes (see [`INODE_HOLD`]). The directory they wrote
/// in is returned, to be removed with the rest of the run's files (see [`settle`]).
fn floors(iterations: usize) -> BenchResult<(Spread, Spread, tempfile::TempDir)> {
    use std::io::Write as _;
    let dir = tempfile::tempdir()?;
    let record = vec![b'x'; 600];
    let mut atomic = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let started = Instant::now();
        let temp = dir.path().join(format!(".record.{i}.tmp"));
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(&record)?;
        file.sync_all()?;
        std::fs::rename(&temp, dir.path().join(format!("record.{i}.json")))?;
        std::fs::File::open(dir.path())?.sync_all()?;
        if i >= WARMUP {
            atomic.push(started.elapsed());
        }
    }
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("log.jsonl"))?;
    let mut appends = Vec::with_capacity(iterations);
    for i in 0..WARMUP + iterations {
        let started = Instant::now();
        log.write_all(&record)?;
        log.sync_data()?;
        if i >= WARMUP {
            appends.push(started.elapsed());
        }
    }
    Ok((Spread::of(&atomic), Spread::of(&appends), dir))
}

/// How long ext4 without a journal holds a freed inode back from reuse: 60 s after it was freed,
/// 300 s more while its inode table block is dirty (the kernel's `RECENTCY_MIN` and
/// `RECENTCY_DIRTY`, `fs/ext4/ialloc.c`), which a new run's own files make it again; and a margin.
const INODE_HOLD: Duration = Duration::from_secs(365);

/// Where the last run noted when it removed its files (seconds since the Unix epoch).
fn removal_note() -> PathBuf {
    std::env::temp_dir().join("tau-bench-table-removed-at")
}

/// Removes the run's files, all at once after its last measurement, syncs, and notes when, so
/// the next run can wait out [`INODE_HOLD`] first ([`await_inode_hold`]). Every file created
/// on that file system within the hold skips each inode just freed, one inode table lookup
/// apiece, and a `file` run frees thousands: a run that started soon after another's removal
/// paid twice the hub's processor per turn.
fn settle(kept: Vec<tempfile::TempDir>) {
    drop(kept);
    nix::unistd::sync();
    // A bench's note: a run that cannot write it only loses the next run's wait.
    let _ = std::fs::write(removal_note(), unix_seconds().to_string());
    println!(
        "(removed this run's files; a run started within {} s waits for the rest)",
        INODE_HOLD.as_secs()
    );
}

/// Seconds since the Unix epoch (0 on a clock set before it).
fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Waits until [`INODE_HOLD`] has passed since the last run removed its files (see [`settle`]).
fn await_inode_hold() {
    let Some(removed) = std::fs::read_to_string(removal_note())
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
    else {
        return;
    };
    let now = unix_seconds();
    let since = Duration::from_secs(now.saturating_sub(removed));
    if let Some(rest) = INODE_HOLD.checked_sub(since) {
        println!(
            "(the last run removed its files {} s ago; waiting {} s so this run's new files do not skip the inodes they freed)",
            since.as_secs(),
            rest.as_secs()
        );
        std::thread::sleep(rest);
    }
}

/// The floors' rows; their ratio is the disk's own p99 / p50, the tail no turn can beat.
fn print_floors(atomic: &Spread, append: &Spread) {
    for (name, s) in [
        ("floor: atomic write", atomic),
        ("floor: append+fdatasync", append),
    ] {
        println!(
            "| {name:<26} | {:>6.3} | {:>6.3} | {:>7.3} | {:.2}× | |",
            s.p50,
            s.p99,
            s.max,
            s.p99 / s.p50.max(f64::MIN_POSITIVE)
        );
    }
}

/// Text and tool turns on two long sessions, in blocks of [`TURNS_PER_SESSION`].
async fn long_sessions(client: &mut SocketClient, turns: usize) -> BenchResult<[Vec<Duration>; 2]> {
    let sessions = [client.new_session().await?, client.new_session().await?];
    let mut samples = [Vec::with_capacity(turns), Vec::with_capacity(turns)];
    let total = WARMUP + turns;
    let mut done = 0;
    while done < total {
        let block = TURNS_PER_SESSION.min(total - done);
        for (kind, text) in [TEXT, TOOL].into_iter().enumerate() {
            for n in done..done + block {
                let elapsed = client.turn(&sessions[kind], text).await?;
                if n >= WARMUP {
                    samples[kind].push(elapsed);
                }
            }
        }
        done += block;
    }
    Ok(samples)
}

/// utime + stime of process `pid` (`self` for this one), in seconds.
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After the name: state is field 3 of the whole line, utime 14 and stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let per_second = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100);
    Some((utime + stime) as f64 / per_second as f64)
}

/// The processor time the hub and this client spent on [`parallel`]'s turns, in µs per turn.
#[derive(Clone, Copy, Default)]
struct TurnCpu {
    hub_us: f64,
    client_us: f64,
}

/// Text turns per second over `clients` connections, one session each, `turns` turns each.
async fn parallel(hub: &SoakHub, clients: usize, turns: usize) -> BenchResult<f64> {
    Ok(parallel_cpu(hub, clients, turns).await?.0)
}

/// [`parallel`], and the processor time its turns cost the hub and the client.
async fn parallel_cpu(hub: &SoakHub, clients: usize, turns: usize) -> BenchResult<(f64, TurnCpu)> {
    let mut sessions = Vec::with_capacity(clients);
    for _ in 0..clients {
        let mut client = hub.client().await?;
        let session = client.new_session().await?;
        // A few turns first, so the session is open and warm.
        for _ in 0..3 {
            client.turn(&session, TEXT).await?;
        }
        sessions.push((client, session));
    }
    let hub_pid = hub.pid().to_string();
    let cpu_before = (cpu_seconds(&hub_pid), cpu_seconds("self"));
    let started = Instant::now();
    let runs = sessions
        .into_iter()
        .map(|(mut client, session)| async move {
            for _ in 0..turns {
                client.turn(&session, TEXT).await?;
            }
            BenchResult::Ok(())
        });
    for done in futures::future::join_all(runs).await {
        done?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let total = (clients * turns) as f64;
    let per_turn = |before: Option<f64>, after: Option<f64>| {
        before
            .zip(after)
            .map_or(0.0, |(b, a)| (a - b) * 1e6 / total)
    };
    let cpu = TurnCpu {
        hub_us: per_turn(cpu_before.0, cpu_seconds(&hub_pid)),
        client_us: per_turn(cpu_before.1, cpu_seconds("self")),
    };
    Ok((total / elapsed, cpu))
}

/// What the processor allows the ten sessions: every core busy with turns that each cost what
/// they cost the hub and this client at ten sessions, over one session's rate. Below 4× the
/// target cannot be met on this machine whatever the disk does; other work on the machine takes
/// cores too, so the ceiling only holds on a quiet one.
fn processor_ceiling(one: f64, ten_cpu: TurnCpu) -> String {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let per_turn_us = ten_cpu.hub_us + ten_cpu.client_us;
    if per_turn_us <= 0.0 || one <= 0.0 {
        return format!("{cores} cores, processor time not measured");
    }
    let ceiling = cores as f64 * 1e6 / per_turn_us / one;
    format!(
        "{cores} free cores at {per_turn_us:.0} µs a turn, hub + client, would allow {ceiling:.2}×"
    )
}

/// Runs `command` with `args` `SPAWNS` times against `hub`'s installation; its wall times.
fn spawn_times(hub: &SoakHub, command: &Path, args: &[&str]) -> BenchResult<Vec<Duration>> {
    let mut times = Vec::with_capacity(SPAWNS);
    for i in 0..SPAWNS + 10 {
        let started = Instant::now();
        let status = std::process::Command::new(command)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", hub.root().join("user"))
            .env("TAU_HOME", hub.root().join("home"))
            .env("TAU_DATA_DIR", hub.root().join("data"))
            .current_dir(hub.root())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()?;
        let elapsed = started.elapsed();
        if !status.success() {
            return Err(format!("{} {args:?} exited with {status}", command.display()).into());
        }
        if i >= 10 {
            times.push(elapsed);
        }
    }
    Ok(times)
}

/// The `taud` to run: `TAU_BENCH_TAUD` when set (a copy of an earlier build, with its `tau` beside
/// it, so one run can measure before and after), else the one this benchmark was built with.
fn taud_binary() -> PathBuf {
    std::env::var_os("TAU_BENCH_TAUD")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_taud")), PathBuf::from)
}

/// Runs the whole table (see the module documentation).
pub fn run(turns: usize, backends: &[&str]) -> BenchResult<()> {
    let taud = taud_binary();
    let taud = taud.as_path();
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!("| what | p50 ms | p99 ms | max ms | ratio | target |");
    println!("|---|---|---|---|---|---|");
    let mut failed = 0;
    let mut check = |line: String, pass: bool| {
        failed += usize::from(!pass);
        println!("{line} {} |", verdict(pass));
    };
    await_inode_hold();
    let mut kept = Vec::with_capacity(backends.len() * 2);
    for &backend in backends {
        let (atomic, append, floors_dir) = floors(500)?;
        kept.push(floors_dir);
        print_floors(&atomic, &append);
        let hub = SoakHub::start_plain(taud, backend)?;
        let (text, tool, one, ten) = client_runtime.block_on(async {
            let mut client = hub.client().await?;
            let [text, tool] = long_sessions(&mut client, turns).await?;
            let per_session = (turns / 10).clamp(50, 200);
            let one = parallel(&hub, 1, per_session * 3).await?;
            let ten = parallel_cpu(&hub, 10, per_session).await?;
            BenchResult::Ok((Spread::of(&text), Spread::of(&tool), one, ten))
        })?;
        for (kind, s) in [("text", &text), ("tool", &tool)] {
            let ratio = s.p99 / s.p50.max(f64::MIN_POSITIVE);
            check(
                format!(
                    "| {backend} {kind} turn, socket, p99/p50 | {:>6.3} | {:>6.3} | {:>7.3} | {ratio:.2}× | ≤ 3×",
                    s.p50, s.p99, s.max
                ),
                ratio <= 3.0,
            );
        }
        let floor_ratio = text.p50 / atomic.p50.max(f64::MIN_POSITIVE);
        check(
            format!(
                "| {backend} text p50 / atomic write p50 | {:>6.3} | | | {floor_ratio:.2}× | ≤ 2×",
                text.p50
            ),
            floor_ratio <= 2.0,
        );
        let (ten, ten_cpu) = ten;
        let scale = ten / one.max(f64::MIN_POSITIVE);
        check(
            format!(
                "| {backend} 10 sessions vs 1, turns/s | {ten:.0} vs {one:.0} | | | {scale:.2}× | ≥ 4× ({})",
                processor_ceiling(one, ten_cpu)
            ),
            scale >= 4.0,
        );
        let dir = taud.parent().ok_or("taud has no directory")?;
        let tau = dir.join("tau");
        if tau.exists() {
            // `tau version` does not reach the hub: once is enough.
            let one_shots: &[(&[&str], f64)] = if backend == "file" {
                &[(&["ask", "hello"], 4.0), (&["version"], 3.0)]
            } else {
                &[(&["ask", "hello"], 4.0)]
            };
            for &(args, target) in one_shots {
                let s = Spread::of(&spawn_times(&hub, &tau, args)?);
                check(
                    format!(
                        "| {backend} `tau {}`, process start to exit | {:>6.3} | {:>6.3} | {:>7.3} | | p50 ≤ {target} ms",
                        args.join(" "),
                        s.p50,
                        s.p99,
                        s.max
                    ),
                    s.p50 <= target,
                );
            }
        } else {
            println!(
                "| one-shot | not measured: build `cargo build --release -p tau-cli` | | | | |"
            );
        }
        kept.push(hub.stop());
    }
    println!("{failed} target(s) failed");
    settle(kept);
    Ok(())
}

/// `hub_turn -- scale [ROUNDS] [file|sqlite]`: the parallel row alone, `ROUNDS` times (5 by
/// default) on one hub per store, one session and then ten taking turns, each round's ratio
/// printed with their range: the row's spread within one run, and the processor time a turn cost
/// the hub and the client (utime + stime, which load on the machine distorts far less than the
/// turns per second). With `TMPDIR` on a tmpfs the
/// hub's syncs cost nothing, so the same rows show what the processor alone allows.
pub fn scale(rounds: usize, backends: &[&str]) -> BenchResult<()> {
    let taud = taud_binary();
    let taud = taud.as_path();
    let client_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    await_inode_hold();
    let mut kept = Vec::with_capacity(backends.len());
    for &backend in backends {
        let hub = SoakHub::start_plain(taud, backend)?;
        let ratios = client_runtime.block_on(async {
            let mut ratios = Vec::with_capacity(rounds);
            for round in 1..=rounds {
                let (one, one_cpu) = parallel_cpu(&hub, 1, 600).await?;
                let (ten, ten_cpu) = parallel_cpu(&hub, 10, 200).await?;
                let ratio = ten / one.max(f64::MIN_POSITIVE);
                println!(
                    "{backend} round {round}: 10 sessions {ten:.0} turns/s, 1 session {one:.0} turns/s, {ratio:.2}×; \
                     CPU per turn, hub + client: 1 session {:.0} + {:.0} µs, 10 sessions {:.0} + {:.0} µs",
                    one_cpu.hub_us, one_cpu.client_us, ten_cpu.hub_us, ten_cpu.client_us
                );
                ratios.push(ratio);
            }
            BenchResult::Ok(ratios)
        })?;
        let low = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let high = ratios.iter().copied().fold(0.0, f64::max);
        println!(
            "{backend}: 10 sessions vs 1, {low:.2}–{high:.2}× over {rounds} rounds (target ≥ 4×)"
        );
        kept.push(hub.stop());
    }
    settle(kept);
    Ok(())
}
