//! The start-up scan for approvals an earlier hub left pending reads only the sessions the mark
//! names (a v2 mark: the sessions approvals were asked in, whatever the clock said; an old v1
//! mark: those updated since its scan minus the margin), through a store double that counts reads
//! and ages chosen sessions; without a mark (or with one of another store) it reads them all. An
//! approval expired by restart answers EXPIRED after any number of restarts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::hooked_store::{Hooked, StoreHooks};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};
use taud::hub::scan_mark::{SCAN_MARGIN, ScanJournal};
use taud::hub::{
    ApprovalAnswer, ApprovalOutcome, CoreOptions, DecideOutcome, DemoModelFactory, EventKind,
    HubCore, ModelFactory, SharedModelFactory, StartTurn,
};
use taud::store::{
    Durability, FileSessionStore, SessionError, SessionInfo, SessionStore, create_fresh_session,
};
use taud::testing::{FakeModel, FakeReply};

/// Hooks under which a file store's `list_sessions` shows the `aged` sessions as updated `age` ago,
/// and which count `read_events` per session.
struct Aging {
    aged: HashSet<String>,
    age: SignedDuration,
    reads: Mutex<HashMap<String, usize>>,
    /// Sessions whose events cannot be read (a failing disk).
    unreadable: Mutex<HashSet<String>>,
}

/// The file store with [`Aging`]'s hooks.
type AgingStore = Hooked<Aging>;

impl Aging {
    fn reads_of(&self, session_id: &str) -> usize {
        self.reads
            .lock()
            .unwrap()
            .get(session_id)
            .copied()
            .unwrap_or(0)
    }
}

impl StoreHooks for Aging {
    fn list_sessions(&self, inner: &FileSessionStore) -> Result<Vec<SessionInfo>, SessionError> {
        let mut sessions = inner.list_sessions()?;
        for info in &mut sessions {
            if self.aged.contains(&info.session_id) {
                info.updated_at = info.updated_at.checked_sub(self.age).unwrap();
            }
        }
        sessions.sort_by_key(|info| std::cmp::Reverse(info.updated_at));
        Ok(sessions)
    }
    fn read_events(
        &self,
        inner: &FileSessionStore,
        session_id: &str,
    ) -> Result<Vec<Value>, SessionError> {
        *self
            .reads
            .lock()
            .unwrap()
            .entry(session_id.to_owned())
            .or_insert(0) += 1;
        if self.unreadable.lock().unwrap().contains(session_id) {
            return Err(SessionError::Io {
                path: "events.jsonl".into(),
                source: std::io::Error::other("bad sector"),
            });
        }
        inner.read_events(session_id)
    }
}

struct Stored {
    mark: std::path::PathBuf,
    store: Arc<AgingStore>,
    old: String,
    new: String,
    /// Declared last, so dropped last: what writes into it is gone first.
    _dir: crate::support::temp::TestDir,
}

/// Two sessions with an approval left pending each; `old` shows as updated three hours ago.
fn stored() -> Stored {
    let dir = crate::support::temp::dir();
    let inner = FileSessionStore::open(dir.path().join("sessions"), Durability::NoSync).unwrap();
    let mut ids = Vec::new();
    for n in 0..2 {
        let session = create_fresh_session(&inner).unwrap();
        let id = session.session_id;
        inner
            .append_event(
                &id,
                &json!({"type": "approval", "approval_id": format!("apr-{n}"), "status": "pending", "tool": "demo_physical_action"}),
            )
            .unwrap();
        ids.push(id);
    }
    let (old, new) = (ids[0].clone(), ids[1].clone());
    let store = Arc::new(Hooked {
        inner,
        hooks: Aging {
            aged: HashSet::from([old.clone()]),
            age: SignedDuration::from_hours(3),
            reads: Mutex::new(HashMap::new()),
            unreadable: Mutex::new(HashSet::new()),
        },
    });
    Stored {
        mark: dir.path().join("approval-scan.json"),
        _dir: dir,
        store,
        old,
        new,
    }
}

fn core(stored: &Stored) -> HubCore {
    core_with(stored, Arc::new(DemoModelFactory))
}

fn core_with(stored: &Stored, factory: Arc<dyn ModelFactory>) -> HubCore {
    let options = CoreOptions {
        approval_scan_mark: Some(stored.mark.clone()),
        ..CoreOptions::default()
    };
    HubCore::new(
        Arc::clone(&stored.store) as Arc<dyn SessionStore>,
        options,
        factory,
    )
    .unwrap()
}

async fn start(stored: &Stored) -> Vec<String> {
    let core = core(stored);
    let expired = core.start().await.unwrap();
    core.shutdown().await;
    expired.into_iter().map(|e| e.approval_id).collect()
}

/// Writes an old (v1) mark, as an earlier hub did, from the kept fixture, with its scan at `at`.
fn old_mark(stored: &Stored, backend: &str, at: Timestamp) {
    let fixture = include_str!("fixtures/approval-scan-v1.json");
    let mut value: Value = serde_json::from_str(fixture).unwrap();
    value["backend"] = json!(backend);
    value["scan_started_at"] = json!(at.to_string());
    std::fs::write(&stored.mark, value.to_string()).unwrap();
}

fn last_status(store: &AgingStore, id: &str) -> String {
    let events = store.inner.read_events(id).unwrap();
    events.last().unwrap()["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_start_reads_only_sessions_updated_since_the_last_scan() {
    let stored = stored();
    // An old mark whose scan began just now: sessions updated since the margin before it are read.
    assert!(SCAN_MARGIN < SignedDuration::from_hours(3));
    old_mark(&stored, "file", Timestamp::now());
    let started = Timestamp::now();
    let expired = start(&stored).await;
    assert_eq!(expired, vec!["apr-1".to_owned()]);
    assert_eq!(
        stored.store.reads_of(&stored.old),
        0,
        "the old one is not read"
    );
    assert_eq!(stored.store.reads_of(&stored.new), 1);
    assert_eq!(
        last_status(&stored.store, &stored.new),
        "expired_by_restart"
    );
    assert_eq!(last_status(&stored.store, &stored.old), "pending");
    // The mark now names this scan, in the current format, with no session asked since.
    let mark: Value =
        serde_json::from_str(&std::fs::read_to_string(&stored.mark).unwrap()).unwrap();
    assert_eq!(mark["v"], 2);
    assert_eq!(mark["asked_in"], json!([]));
    assert_eq!(mark["backend"], "file");
    let recorded: Timestamp = mark["scan_started_at"].as_str().unwrap().parse().unwrap();
    assert!(recorded >= started, "{recorded} < {started}");
}

#[tokio::test]
async fn without_a_mark_or_with_another_stores_mark_every_session_is_read() {
    for mark in [None, Some("sqlite")] {
        let stored = stored();
        if let Some(backend) = mark {
            old_mark(&stored, backend, Timestamp::now());
        }
        let mut expired = start(&stored).await;
        expired.sort();
        assert_eq!(
            expired,
            vec!["apr-0".to_owned(), "apr-1".to_owned()],
            "{mark:?}"
        );
        assert_eq!(stored.store.reads_of(&stored.old), 1);
        assert_eq!(
            last_status(&stored.store, &stored.old),
            "expired_by_restart"
        );
    }
}

#[tokio::test]
async fn a_clock_stepped_back_hides_no_session_an_approval_was_asked_in() {
    let stored = stored();
    // The last hub noted both sessions when it asked their approvals; `old` shows as updated three
    // hours before the mark's scan (its clock was stepped back by more than the margin).
    let journal = ScanJournal::new(&stored.mark, "file");
    journal.record_scan(Timestamp::now(), &[]);
    journal.note(&stored.old).unwrap();
    let mut expired = start(&stored).await;
    expired.sort();
    assert_eq!(expired, vec!["apr-0".to_owned()], "only the noted session");
    assert_eq!(stored.store.reads_of(&stored.old), 1);
    assert_eq!(stored.store.reads_of(&stored.new), 0, "not noted: not read");
    assert_eq!(
        last_status(&stored.store, &stored.old),
        "expired_by_restart"
    );
}

#[tokio::test]
async fn an_approval_expired_by_restart_answers_expired_after_any_number_of_restarts() {
    let stored = stored();
    for restart in 1..=3 {
        let core = core(&stored);
        let expired = core.start().await.unwrap();
        assert_eq!(expired.is_empty(), restart > 1, "restart {restart}");
        let stream = core.subscribe(&stored.old, None, "terminal").await.unwrap();
        let attachment = stream.snapshot().attachment_id.clone();
        assert_eq!(
            core.decide("apr-0", ApprovalAnswer::Approve, &attachment)
                .await
                .unwrap(),
            DecideOutcome::Expired(ApprovalOutcome::ExpiredByRestart),
            "restart {restart}"
        );
        assert_eq!(
            core.decide("apr-never", ApprovalAnswer::Approve, &attachment)
                .await
                .unwrap(),
            DecideOutcome::NotFound
        );
        drop(stream);
        core.shutdown().await;
    }
}

#[tokio::test]
async fn an_approval_a_hub_left_pending_is_found_though_its_clock_was_stepped_back() {
    let stored = stored();
    let lamp = FakeReply::tool_call(
        "demo_physical_action",
        json!({"action": "turn on the lamp"}),
    );
    let model = Arc::new(FakeModel::scripted([lamp]));
    let first = core_with(&stored, Arc::new(SharedModelFactory(model as _)));
    assert_eq!(first.start().await.unwrap().len(), 2, "no mark yet: all");
    // A turn in `old` (listed as updated three hours ago: the hub's clock was stepped back) asks
    // an approval, and the hub dies with it pending (it is never shut down).
    let mut turn = first
        .start_turn(StartTurn {
            session_id: stored.old.clone(),
            text: "turn on the lamp".into(),
            channel: "terminal".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap();
    let approval = loop {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), turn.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let EventKind::ApprovalRequested(info) = &event.kind {
            break info.request.approval_id.clone();
        }
    };
    let expired: Vec<String> = {
        let next = core(&stored);
        let expired = next.start().await.unwrap();
        next.shutdown().await;
        expired.into_iter().map(|e| e.approval_id).collect()
    };
    assert_eq!(expired, vec![approval], "found at the next start");
    drop(turn);
    first.shutdown().await;
}

#[tokio::test]
async fn a_session_the_scan_could_not_read_is_read_again_at_the_next_start() {
    let stored = stored();
    let journal = ScanJournal::new(&stored.mark, "file");
    journal.record_scan(Timestamp::now(), &[]);
    journal.note(&stored.old).unwrap();
    stored
        .store
        .unreadable
        .lock()
        .unwrap()
        .insert(stored.old.clone());
    assert!(
        start(&stored).await.is_empty(),
        "unreadable: nothing expired"
    );
    stored.store.unreadable.lock().unwrap().clear();
    assert_eq!(start(&stored).await, vec!["apr-0".to_owned()]);
    assert_eq!(stored.store.reads_of(&stored.new), 0);
}
