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
//! For the file backend, each kill is followed by damage: one line of the session's
//! `journal.jsonl` (its first, a middle or its last, in turn) is replaced with garbage before the
//! store is opened. A damaged record loses at most itself: the messages that line held may be
//! missing, every other acknowledged message must be there, and the writer goes on past the
//! highest id listed and the store's `message_id_floor`, as the hub does (so the ids of a
//! damaged last line, which nothing can read any more, may be given again). At least one kill of
//! the run must have found a journal line to damage.
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
    pub mod temp;
}

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use serde_json::json;
use support::store::{open_backend, user_message};
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, SessionAgent, SessionMeta, SessionStore, create_fresh_session,
    now_utc,
};

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
    // Past the last stored id and the store's floor, as the hub goes on (a damaged journal line
    // may leave a gap).
    let start = store
        .list_messages_before(session_id, DEFAULT_AGENT_ID, None, 1)
        .unwrap()
        .last()
        .map_or(0, |m| m.message_id + 1)
        .max(
            store
                .message_id_floor(session_id, DEFAULT_AGENT_ID)
                .unwrap(),
        );
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
    /// Journal lines the test damaged.
    damaged: usize,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.stale_counts += other.stale_counts;
        self.leftover_temps += other.leftover_temps;
        self.unopenable += other.unopenable;
        self.lost += other.lost;
        self.cleaned += other.cleaned;
        self.damaged += other.damaged;
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

/// The message ids of one session, read whole and contiguous from 0 but for the ids in
/// `may_lose` (held by a journal line the test damaged), or why not.
fn read_whole(
    store: &dyn SessionStore,
    id: &str,
    may_lose: &BTreeSet<u64>,
) -> Result<BTreeSet<u64>, String> {
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
        return Ok(BTreeSet::new());
    }
    let messages = store
        .list_messages(id, DEFAULT_AGENT_ID, None, 0)
        .map_err(|e| e.to_string())?;
    let mut expected = 0u64;
    for message in &messages {
        let found = message.message_id;
        if found < expected {
            return Err(format!("message {found} is listed twice or out of order"));
        }
        if let Some(missing) = (expected..found).find(|n| !may_lose.contains(n)) {
            return Err(format!("message {missing} is missing"));
        }
        if !message
            .message
            .text()
            .starts_with(&format!("{found} all work"))
        {
            return Err(format!("message {found} has the wrong text"));
        }
        expected = found + 1;
    }
    Ok(messages.iter().map(|m| m.message_id).collect())
}

/// Replaces one line of each main session's `journal.jsonl` with garbage (the first, a middle or
/// the last line, by `round`), as a damaged disk might; adds the message ids that line held to
/// `may_lose`. A journal with no whole line is left alone. Returns how many lines it damaged.
fn damage_journals(
    dir: &Path,
    mains: &[String],
    round: usize,
    may_lose: &mut HashMap<String, BTreeSet<u64>>,
) -> usize {
    let mut damaged_lines = 0;
    for main in mains {
        let path = dir.join("sessions").join(main).join("journal.jsonl");
        let Ok(bytes) = std::fs::read(&path) else {
            println!("    {main}: no journal to damage");
            continue;
        };
        // Whole lines only: a torn tail is left as the kill left it.
        let whole = bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        let lines: Vec<&[u8]> = bytes[..whole].split_inclusive(|&b| b == b'\n').collect();
        if lines.is_empty() {
            println!("    {main}: no whole journal line to damage");
            continue;
        }
        let (which, at) = match round % 3 {
            0 => ("first", 0),
            1 => ("middle", lines.len() / 2),
            _ => ("last", lines.len() - 1),
        };
        let held: Vec<u64> = serde_json::from_slice::<serde_json::Value>(lines[at])
            .ok()
            .and_then(|line| line.get("messages").and_then(|m| m.as_array()).cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|m| m["message_id"].as_u64())
            .collect();
        let mut damaged = Vec::with_capacity(bytes.len());
        for (n, line) in lines.iter().enumerate() {
            if n == at {
                damaged.extend_from_slice(b"garbage where a record was\n");
            } else {
                damaged.extend_from_slice(line);
            }
        }
        damaged.extend_from_slice(&bytes[whole..]);
        std::fs::write(&path, damaged).unwrap();
        println!(
            "    {main}: damaged the {which} of {} journal lines (messages {held:?})",
            lines.len()
        );
        may_lose.entry(main.clone()).or_default().extend(held);
        damaged_lines += 1;
    }
    damaged_lines
}

/// Opens the store as a restarted hub would (the written sessions first, then the listing) and
/// counts what is wrong (a gap is wrong unless `may_lose` names it). Returns the tally and the
/// message ids of each of `mains`.
fn check_store(
    backend: &str,
    dir: &Path,
    mains: &[String],
    may_lose: &HashMap<String, BTreeSet<u64>>,
) -> (Tally, Vec<BTreeSet<u64>>) {
    let none = BTreeSet::new();
    let may_lose_in = |id: &str| may_lose.get(id).unwrap_or(&none);
    let mut tally = Tally {
        cleaned: leftover_files(backend, dir).len(),
        ..Tally::default()
    };
    let store = open_backend(backend, dir);
    let sessions = store.list_sessions().unwrap();
    let mut counts = Vec::with_capacity(mains.len());
    for main in mains {
        // Opening the session alone brings its record in line.
        let main_ids = match read_whole(store.as_ref(), main, may_lose_in(main)) {
            Ok(ids) => ids,
            Err(why) => {
                println!("    {main} cannot be opened: {why}");
                tally.unopenable += 1;
                BTreeSet::new()
            }
        };
        let main_count = main_ids.len() as u64;
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
        counts.push(main_ids);
    }
    // Listed again: opening the sessions above may have brought their records in line.
    let sessions = store.list_sessions().unwrap();
    for info in &sessions {
        let id = &info.session_id;
        let n = match read_whole(store.as_ref(), id, may_lose_in(id)) {
            Ok(ids) => ids.len() as u64,
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

fn crash_round(
    backend: &str,
    dir: &Path,
    mains: &[String],
    round: usize,
    may_lose: &mut HashMap<String, BTreeSet<u64>>,
) -> (Tally, Vec<BTreeSet<u64>>) {
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

    let damaged = if backend == "file" {
        damage_journals(dir, mains, round, may_lose)
    } else {
        0
    };
    let (mut tally, ids) = check_store(backend, dir, mains, may_lose);
    tally.damaged = damaged;
    for ((main, ids), last) in mains.iter().zip(&ids).zip(&last_reported) {
        let Some(last) = *last else { continue };
        let lost: Vec<u64> = (0..=last)
            .filter(|id| !ids.contains(id) && !may_lose.get(main).is_some_and(|l| l.contains(id)))
            .collect();
        if !lost.is_empty() {
            println!(
                "    {main}: messages {lost:?} were reported stored but are missing ({} stored)",
                ids.len()
            );
            tally.lost += 1;
        }
    }
    let counts: Vec<usize> = ids.iter().map(BTreeSet::len).collect();
    println!(
        "  {backend} cycle {round}: killed after {reports_wanted} reports + {delay:?} ({status}); \
         {counts:?} messages, {} temporary files cleaned",
        tally.cleaned
    );
    (tally, ids)
}

fn crash_backend(backend: &str, writers: usize, cycles: usize) {
    let dir = crate::support::temp::dir();
    let mains: Vec<String> = {
        let store = open_backend(backend, dir.path());
        (0..writers).map(|_| with_agent(store.as_ref())).collect()
    };
    let mut previous = vec![BTreeSet::new(); writers];
    let mut total = Tally::default();
    let mut may_lose = HashMap::new();
    for round in 0..cycles {
        let (tally, ids) = crash_round(backend, dir.path(), &mains, round, &mut may_lose);
        for (before, now) in previous.iter().zip(&ids) {
            let gone: Vec<&u64> = before.difference(now).collect();
            if !gone.is_empty() {
                println!("    messages disappeared since the last cycle: {gone:?}");
                total.lost += 1;
            }
        }
        previous = ids;
        total.add(tally);
    }
    println!(
        "  {backend}: {cycles} kills, {} stale counts, {} leftover temporary files ({} cleaned on \
         opening), {} unopenable sessions, {} lost acknowledged messages, {} journal lines \
         damaged",
        total.stale_counts,
        total.leftover_temps,
        total.cleaned,
        total.unopenable,
        total.lost,
        total.damaged
    );
    assert!(total.clean(), "{backend}: {total:?}");
    assert!(
        backend != "file" || cycles == 0 || total.damaged > 0,
        "{backend}: no kill found a journal line to damage"
    );
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
