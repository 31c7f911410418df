//! Crash test for every built-in session backend (`harness = false`): this binary re-executes itself
//! as a writer (selected by `TAU_SESSION_CRASH_WRITER=<backend>`) that appends messages and events in
//! a loop and creates a new session now and then; the parent kills it with SIGKILL at a random point
//! and checks that the store still opens and lists, that every listed message parses, that message
//! ids are contiguous, and that every message the writer reported as stored is there. Several rounds
//! per backend, each resuming the same store after the previous crash.
//!
//! The crash point: the parent waits for a random number of "stored" reports from the writer (no
//! timing involved), then lets a random 0–2 ms pass so the kill lands anywhere in the next write.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use serde_json::json;
use taud::session::{
    ContextMode, DEFAULT_AGENT_ID, SessionAgent, SessionMeta, SessionStore, create_fresh_session,
    now_utc,
};

use support::{BACKENDS, open_backend, user_message};

const WRITER_ENV: &str = "TAU_SESSION_CRASH_WRITER";
const DIR_ENV: &str = "TAU_SESSION_CRASH_DIR";
const SESSION_ENV: &str = "TAU_SESSION_CRASH_SESSION";
const ROUNDS: usize = 4;
/// A writer that is never killed stops by itself after this many messages.
const WRITER_LIMIT: u64 = 5_000;
/// How long a round may wait for the writer's reports.
const ROUND_DEADLINE: Duration = Duration::from_secs(20);

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

/// The child: append to the session named by the parent until killed, reporting each stored message.
fn writer(backend: &str, dir: &Path, session_id: &str) {
    let store = open_backend(backend, dir);
    let start = store
        .list_messages(session_id, DEFAULT_AGENT_ID, None, 0)
        .unwrap()
        .len() as u64;
    let body = "all work and no play makes tau a dull agent. ".repeat(40);
    let mut stdout = std::io::stdout().lock();
    for id in start..start + WRITER_LIMIT {
        if id.is_multiple_of(4) {
            let other = with_agent(store.as_ref());
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
        store
            .create_message(
                session_id,
                DEFAULT_AGENT_ID,
                &user_message(id, &format!("{id} {body}")),
            )
            .unwrap();
        store
            .append_event(
                session_id,
                &json!({"type": "stored", "id": id, "body": body}),
            )
            .unwrap();
        writeln!(stdout, "{id}").unwrap();
        stdout.flush().unwrap();
    }
}

/// Every listed session reads, and the messages of each agent are whole and contiguous from 0.
/// Returns the message count of `main`.
fn check_store(store: &dyn SessionStore, main: &str) -> u64 {
    let sessions = store.list_sessions().unwrap();
    assert!(
        sessions.iter().any(|s| s.session_id == main),
        "the session is not listed"
    );
    let mut main_count = None;
    for info in &sessions {
        let id = &info.session_id;
        assert!(store.read_session(id).unwrap().is_some());
        store.read_meta(id).unwrap();
        store.read_events(id).unwrap();
        let Some(_agent) = store.read_agent(id, DEFAULT_AGENT_ID).unwrap() else {
            assert_eq!(info.message_count, 0);
            continue;
        };
        let messages = store.list_messages(id, DEFAULT_AGENT_ID, None, 0).unwrap();
        for (expected, message) in messages.iter().enumerate() {
            assert_eq!(
                message.message_id, expected as u64,
                "ids are not contiguous in {id}"
            );
            assert!(
                message
                    .message
                    .text()
                    .starts_with(&format!("{expected} all work"))
            );
        }
        let n = messages.len() as u64;
        // The file backend may count one message less after a crash between its two writes.
        assert!(
            info.message_count == n || info.message_count + 1 == n,
            "{id}: listed {} messages, {n} stored",
            info.message_count
        );
        if id == main {
            main_count = Some(n);
        }
    }
    main_count.unwrap()
}

fn crash_round(backend: &str, dir: &Path, main: &str, round: usize) -> u64 {
    let reports_wanted = 1 + random_below(12);
    let delay = Duration::from_micros(random_below(2_000));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(WRITER_ENV, backend)
        .env(DIR_ENV, dir)
        .env(SESSION_ENV, main)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Reports arrive through a channel so waiting for them has a deadline.
    let (tx, rx) = std::sync::mpsc::sync_channel::<u64>(64);
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line.parse().unwrap()).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + ROUND_DEADLINE;
    let mut last_reported = None;
    for _ in 0..reports_wanted {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(id) => last_reported = Some(id),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                child.kill().unwrap();
                panic!("the writer reported nothing within {ROUND_DEADLINE:?}");
            }
        }
    }
    std::thread::sleep(delay);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    drop(rx);
    reader.join().unwrap();
    println!(
        "  {backend} round {round}: killed after {reports_wanted} reports + {delay:?} ({status})"
    );

    let store = open_backend(backend, dir);
    let count = check_store(store.as_ref(), main);
    if let Some(last) = last_reported {
        assert!(
            count > last,
            "message {last} was reported stored but is missing ({count} stored)"
        );
    }
    count
}

fn crash_backend(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let main = with_agent(open_backend(backend, dir.path()).as_ref());
    let mut previous = 0;
    for round in 0..ROUNDS {
        let count = crash_round(backend, dir.path(), &main, round);
        assert!(count >= previous, "messages disappeared");
        previous = count;
    }
}

fn main() -> ExitCode {
    if let Ok(backend) = std::env::var(WRITER_ENV) {
        let dir = std::env::var_os(DIR_ENV).unwrap();
        let session = std::env::var(SESSION_ENV).unwrap();
        writer(&backend, Path::new(&dir), &session);
        return ExitCode::SUCCESS;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<String> = BACKENDS.iter().map(|b| format!("crash_{b}")).collect();
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
    for (backend, name) in BACKENDS.iter().zip(&names) {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        println!("test {name} ...");
        let started = Instant::now();
        match std::panic::catch_unwind(|| crash_backend(backend)) {
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
