//! Kill -9 loop for every built-in session backend (`harness = false`): this binary re-executes
//! itself as a writer (selected by `TAU_SESSION_CRASH_WRITER=<backend>`) that appends messages and
//! events in a loop and creates a new session now and then; the parent kills it with SIGKILL at a
//! random point, opens the store as a restarted hub would, and counts what it finds:
//!
//! - stale counts: a session whose stored message count (the file backend's `session.json` after
//!   the session was opened, the listing of both backends) differs from the messages it reads;
//! - leftover temporary files once the store was opened and listed (and, for sqlite, any file
//!   beside the database but its WAL and shared memory);
//! - unopenable sessions: a listed session whose record, metadata, events or messages cannot be
//!   read, or whose message ids are not contiguous and whole;
//! - lost messages: one the writer reported as stored (its write returned) that is missing.
//!
//! Every one must be 0. Each cycle resumes the same store after the previous kill. `cargo test`
//! runs 10 cycles per backend; `TAU_KILL_CYCLES=40` (or any number) runs a longer loop.
//!
//! `crash_sqlite_parallel` runs [`PARALLEL_WRITERS`] writer threads at once, each on its own
//! session, so the kill lands while several sessions' writes share one commit (group commit):
//! each session must still read whole, and every message reported stored must be there.
//!
//! The writer flushes the session's record after every second message (a turn of two, as the hub
//! does), so kills also land between a turn's messages and its flush, and inside the flush. Some
//! writes are batches (`append_batch`: a `tool_call` event and two messages, as the hub stores a
//! read-only tool round; two messages and no event, as it stores a text turn whose model answered
//! at once), so kills also land inside one.
//!
//! The crash point: the parent waits for a random number of "stored" reports from the writer (no
//! timing involved), then lets a random 0–2 ms pass so the kill lands anywhere in the next write.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support {
    pub mod store;
}

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use serde_json::json;
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, SessionAgent, SessionMeta, SessionStore, create_fresh_session,
    now_utc,
};

use support::store::{open_backend, user_message};

const WRITER_ENV: &str = "TAU_SESSION_CRASH_WRITER";
const DIR_ENV: &str = "TAU_SESSION_CRASH_DIR";
const SESSION_ENV: &str = "TAU_SESSION_CRASH_SESSION";
const CYCLES_ENV: &str = "TAU_KILL_CYCLES";
/// Kill cycles per backend unless `TAU_KILL_CYCLES` says otherwise.
const DEFAULT_CYCLES: usize = 10;
/// A writer that is never killed stops by itself after this many messages.
const WRITER_LIMIT: u64 = 5_000;
/// How long a round may wait for the writer's reports.
const ROUND_DEADLINE: Duration = Duration::from_secs(20);
/// Writer threads (each on its own session) of the parallel runs.
const PARALLEL_WRITERS: usize = 4;
/// The runs: every built-in backend with one writer, and sqlite's group commit with several.
const RUNS: [(&str, usize); 3] = [("file", 1), ("sqlite", 1), ("sqlite", PARALLEL_WRITERS)];

fn random_below(n: u64) -> u64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    u64::from_le_bytes(bytes) % n
}

fn with_agent(store: &dyn SessionStore) -> String {
    let id = create_fresh_session(store).unwrap().session_id;
    store
        .create_agent(
            &id,
            &SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now_utc()),
        )
        .unwrap();
    id
}

/// The child: one thread per session named by the parent (comma-separated), all on one store,
/// each appending until killed and reporting each stored message as `<session index> <id>`.
fn writer(backend: &str, dir: &Path, session_ids: &str) {
    let store = open_backend(backend, dir);
    std::thread::scope(|scope| {
        for (index, session_id) in session_ids.split(',').enumerate() {
            let store = store.as_ref();
            scope.spawn(move || write_session(store, index, session_id));
        }
    });
}

fn write_session(store: &dyn SessionStore, index: usize, session_id: &str) {
    let start = store
        .list_messages(session_id, DEFAULT_AGENT_ID, None, 0)
        .unwrap()
        .len() as u64;
    let body = "all work and no play makes tau a dull agent. ".repeat(40);
    let mut id = start;
    while id < start + WRITER_LIMIT {
        if id.is_multiple_of(4) {
            let other = with_agent(store);
            store
                .write_meta(
                    &other,
                    &SessionMeta {
                        title: Some(format!("side {id}")),
                        ..SessionMeta::default()
                    },
                )
                .unwrap();
        }
        // Two steps in six are batches as the hub stores them, so kills also land inside one:
        // a read-only tool round (its `tool_call` record and two messages) and a text turn
        // answered at once (its prompt and reply, no record).
        let batch = if id % 6 == 2 || id % 6 == 4 { 2 } else { 1 };
        let messages: Vec<_> = (id..id + batch)
            .map(|id| user_message(id, &format!("{id} {body}")))
            .collect();
        if batch == 1 {
            store
                .create_message(session_id, DEFAULT_AGENT_ID, &messages[0])
                .unwrap();
            store
                .append_event(
                    session_id,
                    &json!({"type": "stored", "id": id, "body": body}),
                )
                .unwrap();
        } else {
            let events = if id % 6 == 2 {
                vec![json!({"type": "tool_call", "id": id, "body": body})]
            } else {
                Vec::new()
            };
            store
                .append_batch(session_id, DEFAULT_AGENT_ID, &events, &messages)
                .unwrap();
        }
        for id in id..id + batch {
            // A turn of two messages, then its flush, as the hub does: the kill lands before,
            // inside or after a flush too.
            if id % 2 == 1 {
                store.flush_session(session_id).unwrap();
            }
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{index} {id}").unwrap();
            stdout.flush().unwrap();
        }
        id += batch;
    }
}

/// What one check of a store after a kill found; every field but `cleaned` must stay 0.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    stale_counts: usize,
    leftover_temps: usize,
    unopenable: usize,
    lost: usize,
    /// Temporary files the kill left, before the store was opened.
    cleaned: usize,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.stale_counts += other.stale_counts;
        self.leftover_temps += other.leftover_temps;
        self.unopenable += other.unopenable;
        self.lost += other.lost;
        self.cleaned += other.cleaned;
    }

    fn clean(&self) -> bool {
        self.stale_counts == 0 && self.leftover_temps == 0 && self.unopenable == 0 && self.lost == 0
    }
}

/// Whether `name` has the file backend's temporary pattern `.<record>.<8 hex>.tmp`.
fn is_temp_name(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .and_then(|n| n.rsplit_once('.'))
        .is_some_and(|(record, random)| {
            !record.is_empty() && random.len() == 8 && random.bytes().all(|b| b.is_ascii_hexdigit())
        })
}

/// Files under `dir` that a store must not leave behind: the file backend's temporary files, and
/// beside a sqlite database anything but the database, its WAL and its shared memory.
fn leftover_files(backend: &str, dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else if is_temp_name(&name)
                || (backend == "sqlite"
                    && !matches!(
                        name.as_str(),
                        "sessions.db" | "sessions.db-wal" | "sessions.db-shm"
                    ))
            {
                found.push(entry.path());
            }
        }
    }
    found
}

/// The file backend's stored count of a session (`session.json`); `None` for other backends.
fn file_stored_count(backend: &str, dir: &Path, id: &str) -> Option<u64> {
    if backend != "file" {
        return None;
    }
    let path = dir.join("sessions").join(id).join("session.json");
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    record["message_count"].as_u64()
}

/// The messages of one session read whole and contiguous from 0, or why not.
fn read_whole(store: &dyn SessionStore, id: &str) -> Result<u64, String> {
    store
        .read_session(id)
        .map_err(|e| e.to_string())?
        .ok_or("no record")?;
    store.read_meta(id).map_err(|e| e.to_string())?;
    store.read_events(id).map_err(|e| e.to_string())?;
    if store
        .read_agent(id, DEFAULT_AGENT_ID)
        .map_err(|e| e.to_string())?
        .is_none()
    {
        return Ok(0);
    }
    let messages = store
        .list_messages(id, DEFAULT_AGENT_ID, None, 0)
        .map_err(|e| e.to_string())?;
    for (expected, message) in messages.iter().enumerate() {
        if message.message_id != expected as u64 {
            return Err(format!("message {expected} is missing"));
        }
        if !message
            .message
            .text()
            .starts_with(&format!("{expected} all work"))
        {
            return Err(format!("message {expected} has the wrong text"));
        }
    }
    Ok(messages.len() as u64)
}

/// Opens the store as a restarted hub would (the written sessions first, then the listing) and
/// counts what is wrong. Returns the tally and the message count of each of `mains`.
fn check_store(backend: &str, dir: &Path, mains: &[String]) -> (Tally, Vec<u64>) {
    let mut tally = Tally {
        cleaned: leftover_files(backend, dir).len(),
        ..Tally::default()
    };
    let store = open_backend(backend, dir);
    let sessions = store.list_sessions().unwrap();
    let mut counts = Vec::with_capacity(mains.len());
    for main in mains {
        // Opening the session alone brings its record in line.
        let main_count = match read_whole(store.as_ref(), main) {
            Ok(n) => n,
            Err(why) => {
                println!("    {main} cannot be opened: {why}");
                tally.unopenable += 1;
                0
            }
        };
        if let Some(stored) = file_stored_count(backend, dir, main)
            && stored != main_count
        {
            println!(
                "    {main}: session.json counts {stored}, {main_count} stored (after opening)"
            );
            tally.stale_counts += 1;
        }
        if !sessions.iter().any(|s| &s.session_id == main) {
            println!("    {main} is not listed");
            tally.unopenable += 1;
        }
        counts.push(main_count);
    }
    // Listed again: opening the sessions above may have brought their records in line.
    let sessions = store.list_sessions().unwrap();
    for info in &sessions {
        let id = &info.session_id;
        let n = match read_whole(store.as_ref(), id) {
            Ok(n) => n,
            Err(why) => {
                println!("    {id} cannot be opened: {why}");
                tally.unopenable += 1;
                continue;
            }
        };
        let stored = file_stored_count(backend, dir, id);
        if info.message_count != n || stored.is_some_and(|s| s != n) {
            println!(
                "    {id}: listed {}, stored {stored:?}, {n} readable",
                info.message_count
            );
            tally.stale_counts += 1;
        }
    }
    let left = leftover_files(backend, dir);
    for path in &left {
        println!("    left behind: {}", path.display());
    }
    tally.leftover_temps = left.len();
    (tally, counts)
}

fn crash_round(backend: &str, dir: &Path, mains: &[String], round: usize) -> (Tally, Vec<u64>) {
    let reports_wanted = 1 + random_below(12);
    let delay = Duration::from_micros(random_below(2_000));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(WRITER_ENV, backend)
        .env(DIR_ENV, dir)
        .env(SESSION_ENV, mains.join(","))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Reports arrive through a channel so waiting for them has a deadline.
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, u64)>(64);
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let (index, id) = line.split_once(' ').unwrap();
            if tx
                .send((index.parse().unwrap(), id.parse().unwrap()))
                .is_err()
            {
                break;
            }
        }
    });
    let deadline = Instant::now() + ROUND_DEADLINE;
    let mut last_reported: Vec<Option<u64>> = vec![None; mains.len()];
    for _ in 0..reports_wanted {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((index, id)) => last_reported[index] = Some(id),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                child.kill().unwrap();
                panic!("the writer reported nothing within {ROUND_DEADLINE:?}");
            }
        }
    }
    std::thread::sleep(delay);
    // SIGKILL: the writer gets no chance to finish anything.
    child.kill().unwrap();
    let status = child.wait().unwrap();
    // Reports still in the pipe were acknowledged before the kill too; the pipe ends with the
    // writer, and with it the reader and the channel.
    for (index, id) in rx.iter() {
        last_reported[index] = Some(id);
    }
    reader.join().unwrap();

    let (mut tally, counts) = check_store(backend, dir, mains);
    for ((main, count), last) in mains.iter().zip(&counts).zip(&last_reported) {
        if let Some(last) = *last
            && *count <= last
        {
            println!(
                "    {main}: message {last} was reported stored but is missing ({count} stored)"
            );
            tally.lost += 1;
        }
    }
    println!(
        "  {backend} cycle {round}: killed after {reports_wanted} reports + {delay:?} ({status}); \
         {counts:?} messages, {} temporary files cleaned",
        tally.cleaned
    );
    (tally, counts)
}

fn crash_backend(backend: &str, writers: usize, cycles: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mains: Vec<String> = {
        let store = open_backend(backend, dir.path());
        (0..writers).map(|_| with_agent(store.as_ref())).collect()
    };
    let mut previous = vec![0; writers];
    let mut total = Tally::default();
    for round in 0..cycles {
        let (tally, counts) = crash_round(backend, dir.path(), &mains, round);
        for (before, now) in previous.iter().zip(&counts) {
            if now < before {
                println!("    messages disappeared: {before} before, {now} now");
                total.lost += 1;
            }
        }
        previous = counts;
        total.add(tally);
    }
    println!(
        "  {backend}: {cycles} kills, {} stale counts, {} leftover temporary files ({} cleaned on \
         opening), {} unopenable sessions, {} lost acknowledged messages",
        total.stale_counts, total.leftover_temps, total.cleaned, total.unopenable, total.lost
    );
    assert!(total.clean(), "{backend}: {total:?}");
}

fn main() -> ExitCode {
    if let Ok(backend) = std::env::var(WRITER_ENV) {
        let dir = std::env::var_os(DIR_ENV).unwrap();
        let session = std::env::var(SESSION_ENV).unwrap();
        writer(&backend, Path::new(&dir), &session);
        return ExitCode::SUCCESS;
    }
    let cycles = match std::env::var(CYCLES_ENV) {
        Ok(value) => value.parse().unwrap_or_else(|_| {
            panic!("{CYCLES_ENV} must be a number of kill cycles, not {value:?}")
        }),
        Err(_) => DEFAULT_CYCLES,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<String> = RUNS
        .iter()
        .map(|(backend, writers)| match writers {
            1 => format!("crash_{backend}"),
            _ => format!("crash_{backend}_parallel"),
        })
        .collect();
    if args.iter().any(|a| a == "--list") {
        for name in &names {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    // Positional arguments are test-name filters, as with the standard harness.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let mut failed = 0;
    let mut ran = 0;
    for ((backend, writers), name) in RUNS.iter().zip(&names) {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        println!("test {name} ...");
        let started = Instant::now();
        match std::panic::catch_unwind(|| crash_backend(backend, *writers, cycles)) {
            Ok(()) => println!("test {name} ... ok ({:?})", started.elapsed()),
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" },
        ran - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
