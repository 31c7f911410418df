//! Session store benchmark (`cargo bench -p taud --bench session_store [-- append|list|open|create]`),
//! both built-in backends on a temporary directory of the system temp dir's disk (set TMPDIR to
//! measure another):
//!
//! - append one message with full durability: p50 / p99 (the physical floor is one fsync, measured
//!   first for reference);
//! - `list_sessions` over 10,000 sessions, and the `/sessions` listing (top 10 with metadata);
//! - opening a 10,000-message session (reading all its messages);
//! - creating a whole, empty session (`create_complete_session`, what `tau ask` waits for before
//!   its turn): p50 / p99, the two stores taking turns so both meet the same disk.
//!
//! Stores are filled with `Durability::NoSync` (set-up speed only) and reopened fully durable for the
//! measurements. Reads are measured warm (the page cache holds the files), as on a running hub.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use taud::message::{Message, MessageMetadata, Usage};
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, Durability, SessionAgent, SessionBackends, SessionMessage,
    SessionMeta, SessionStore, SessionStoreConfig, create_fresh_complete_session,
    create_fresh_session, now_utc, recent_sessions,
};

const APPENDS: usize = 300;
const CREATES: usize = 300;
const SESSIONS: usize = 10_000;
const MESSAGES: u64 = 10_000;

fn open(backend: &str, dir: &Path, durability: Durability) -> Arc<dyn SessionStore> {
    let config = SessionStoreConfig {
        durability,
        ..SessionStoreConfig::under(dir)
    };
    SessionBackends::builtin()
        .open(backend, &config)
        .unwrap_or_else(|err| panic!("open {backend}: {err}"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// A typical stored message: an assistant reply of a few hundred characters with usage.
fn message(id: u64) -> SessionMessage {
    let mut message = if id.is_multiple_of(2) {
        Message::user_text(format!(
            "question {id}: what is on my calendar for tomorrow morning?"
        ))
    } else {
        Message::assistant_text(format!(
            "answer {id}: {}",
            "You have a stand-up at nine and a dentist appointment at eleven. ".repeat(4)
        ))
    };
    if !id.is_multiple_of(2) {
        message.metadata = Some(MessageMetadata {
            usage: Some(Usage {
                input_tokens: 1200,
                output_tokens: 80,
                total_tokens: 1280,
                ..Usage::default()
            }),
            metrics: None,
        });
    }
    SessionMessage::new(id, message, now_utc())
}

fn session_with_agent(store: &dyn SessionStore) -> String {
    let id = create_fresh_session(store).expect("session").session_id;
    store
        .create_agent(
            &id,
            &SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now_utc()),
        )
        .expect("agent");
    id
}

/// One 1-byte write + fdatasync, the floor of any durable append on this disk.
fn fsync_floor(dir: &Path) -> Duration {
    let path = dir.join("fsync-probe");
    let mut file = std::fs::File::create(&path).expect("probe file");
    let mut samples = Vec::new();
    for _ in 0..100 {
        let started = Instant::now();
        file.write_all(b"x").expect("write");
        file.sync_data().expect("fdatasync");
        samples.push(started.elapsed());
    }
    samples.sort();
    percentile(&samples, 0.5)
}

fn bench_append(backend: &str, dir: &Path) {
    let store = open(backend, dir, Durability::Full);
    let id = session_with_agent(store.as_ref());
    let mut samples = Vec::with_capacity(APPENDS);
    for n in 0..APPENDS as u64 {
        let record = message(n);
        let started = Instant::now();
        store
            .create_message(&id, DEFAULT_AGENT_ID, &record)
            .expect("append");
        samples.push(started.elapsed());
    }
    samples.sort();
    println!(
        "{backend:>6}  append one message (durable, n={APPENDS}): p50 {}  p99 {}",
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.99))
    );
}

/// Creates `CREATES` empty sessions in each store, the stores taking turns (one creation each).
fn bench_create(dir: &Path) {
    let stores = ["file", "sqlite"].map(|backend| {
        (
            backend,
            open(
                backend,
                &dir.join(format!("create-{backend}")),
                Durability::Full,
            ),
        )
    });
    let mut samples = [const { Vec::new() }; 2];
    for _ in 0..CREATES {
        for ((_, store), samples) in stores.iter().zip(samples.iter_mut()) {
            let meta = SessionMeta {
                channel: Some("cli".to_owned()),
                ..SessionMeta::default()
            };
            let agent = SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now_utc());
            let started = Instant::now();
            create_fresh_complete_session(store.as_ref(), agent, Vec::new(), meta).expect("create");
            samples.push(started.elapsed());
        }
    }
    for ((backend, _), samples) in stores.iter().zip(samples.iter_mut()) {
        samples.sort();
        println!(
            "{backend:>6}  create an empty session (durable, n={CREATES}): p50 {}  p99 {}",
            ms(percentile(samples, 0.5)),
            ms(percentile(samples, 0.99))
        );
    }
}

fn median_of<F: FnMut()>(runs: usize, mut f: F) -> Duration {
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    samples.sort();
    percentile(&samples, 0.5)
}

fn bench_list(backend: &str, dir: &Path) {
    let started = Instant::now();
    {
        let store = open(backend, dir, Durability::NoSync);
        for n in 0..SESSIONS {
            let id = session_with_agent(store.as_ref());
            if n.is_multiple_of(2) {
                store
                    .create_message(&id, DEFAULT_AGENT_ID, &message(0))
                    .expect("message");
            }
            let meta = SessionMeta {
                channel: Some("terminal".into()),
                title: Some(format!("question {n}")),
                ..SessionMeta::default()
            };
            store.write_meta(&id, &meta).expect("meta");
        }
    }
    let fill = started.elapsed();
    let store = open(backend, dir, Durability::Full);
    // The first listing of a process also reconciles every session with its files (file backend).
    let first_started = Instant::now();
    let listed = store.list_sessions().expect("list");
    let first = first_started.elapsed();
    assert_eq!(listed.len(), SESSIONS);
    let list = median_of(9, || {
        black_box(store.list_sessions().expect("list"));
    });
    let recent = median_of(9, || {
        black_box(recent_sessions(store.as_ref(), 10, None).expect("recent"));
    });
    println!(
        "{backend:>6}  list_sessions over {SESSIONS} sessions: {}, the first of a process {}  (/sessions top 10 with metadata: {}; fill took {:.1} s)",
        ms(list),
        ms(first),
        ms(recent),
        fill.as_secs_f64()
    );
}

fn bench_open(backend: &str, dir: &Path) {
    let id = {
        let store = open(backend, dir, Durability::NoSync);
        let id = session_with_agent(store.as_ref());
        for n in 0..MESSAGES {
            store
                .create_message(&id, DEFAULT_AGENT_ID, &message(n))
                .expect("message");
        }
        id
    };
    let store = open(backend, dir, Durability::Full);
    let open_all = median_of(7, || {
        let messages = store
            .list_messages(&id, DEFAULT_AGENT_ID, None, 0)
            .expect("list");
        assert_eq!(messages.len(), MESSAGES as usize);
        black_box(messages);
    });
    let window = median_of(7, || {
        black_box(
            store
                .list_messages(&id, DEFAULT_AGENT_ID, None, MESSAGES as usize - 60)
                .expect("list"),
        );
    });
    println!(
        "{backend:>6}  open a {MESSAGES}-message session (read all): {}  (last 60 only: {})",
        ms(open_all),
        ms(window)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test` runs benches without --bench; only measure when asked.
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    // Positional arguments pick sections: append, list, open, create (default: all).
    let sections: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(String::as_str)
        .collect();
    let wanted = |name: &str| sections.is_empty() || sections.contains(&name);
    let root = tempfile::tempdir().expect("temp dir");
    println!("session store benchmark in {}", root.path().display());
    if wanted("append") {
        println!(
            "fsync floor (1-byte append + fdatasync): p50 {}",
            ms(fsync_floor(root.path()))
        );
        for backend in ["file", "sqlite"] {
            bench_append(backend, &root.path().join(format!("append-{backend}")));
        }
    }
    if wanted("create") {
        bench_create(root.path());
    }
    if wanted("list") {
        for backend in ["file", "sqlite"] {
            bench_list(backend, &root.path().join(format!("list-{backend}")));
        }
    }
    if wanted("open") {
        for backend in ["file", "sqlite"] {
            bench_open(backend, &root.path().join(format!("open-{backend}")));
        }
    }
}
