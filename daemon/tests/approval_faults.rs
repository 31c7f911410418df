//! Seeded fault injection of approvals through the in-process hub core.
//!
//! Each trial starts a tier-2 turn (the demo physical tool, whose output "Simulated: …" is the
//! evidence that it ran) on `terminal`, then races a random mix of: decisions (approve or reject,
//! single, double and concurrent) from the turn's own stream, from a Subscribe stream on the same
//! channel, from a queued turn's stream that was never shown the approval, from another channel and
//! from a forged attachment; CancelTurn; the client dropping its streams; and the approval timeout.
//! It then asserts one truth: exactly one live `ApprovalResolved`, exactly one stored decided
//! `approval` event saying the same, at most one decision answered APPLIED and with that
//! resolution, every later answer naming it, the stored `tool_call` and what the model read
//! agreeing, and the tool ran if and only if a rightful attachment applied APPROVED.
//!
//! Deterministic from a seed (`APPROVAL_FAULT_SEED`, default fixed; `APPROVAL_FAULT_TRIALS`,
//! default 200); every failure names the seed and the trial.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::hub::*;
use taud::hub::{
    ApprovalAnswer, ApprovalOutcome, CoreError, DecideOutcome, EventKind, EventStream, StartTurn,
    TurnStream,
};
use taud::testing::FakeReply;

const DEFAULT_SEED: u64 = 0x7a11_0ca7_2026_1201;
const DEFAULT_TRIALS: usize = 200;

/// splitmix64: small, seedable, good enough to pick faults.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// The turn's own StartTurn stream (rightful).
    Turn,
    /// A Subscribe stream on the same channel (rightful).
    Watcher,
    /// A queued turn's StartTurn stream on the same channel (never shown the approval).
    Queued,
    /// A Subscribe stream on another channel.
    Other,
    /// An attachment id that names nothing.
    Forged,
}

#[derive(Debug, Clone, Copy)]
enum Act {
    Decide(Who, ApprovalAnswer),
    Cancel,
    DropTurn,
    DropWatcher,
}

#[derive(Debug)]
struct Scenario {
    timeout_ms: Option<u64>,
    watcher: bool,
    watcher_before: bool,
    queued: bool,
    other: bool,
    acts: Vec<(u64, Act)>,
}

fn scenario(rng: &mut Rng) -> Scenario {
    let timeout_ms = rng.chance(30).then(|| 1 + rng.below(15));
    let watcher = rng.chance(50);
    let watcher_before = rng.chance(50);
    let queued = rng.chance(50);
    let other = rng.chance(50);
    let mut acts = Vec::new();
    for _ in 0..1 + rng.below(5) {
        let answer = if rng.chance(60) {
            ApprovalAnswer::Approve
        } else {
            ApprovalAnswer::Reject
        };
        let act = match rng.below(10) {
            0..=2 => Act::Decide(Who::Turn, answer),
            3 if watcher => Act::Decide(Who::Watcher, answer),
            4 if queued => Act::Decide(Who::Queued, answer),
            5 if other => Act::Decide(Who::Other, answer),
            6 => Act::Decide(Who::Forged, answer),
            7 => Act::Cancel,
            8 => Act::DropTurn,
            9 if watcher => Act::DropWatcher,
            _ => Act::Decide(Who::Turn, answer),
        };
        // Delays in microseconds, so acts land together, around a timeout, or one after another.
        acts.push((rng.below(4) * rng.below(4000), act));
    }
    Scenario {
        timeout_ms,
        watcher,
        watcher_before,
        queued,
        other,
        acts,
    }
}

/// What one decision answered.
#[derive(Debug, Clone)]
struct Answer {
    who: Who,
    answer: ApprovalAnswer,
    outcome: Result<DecideOutcome, String>,
}

fn stored_status(resolution: ApprovalOutcome) -> &'static str {
    match resolution {
        ApprovalOutcome::Approved => "approved",
        ApprovalOutcome::Rejected | ApprovalOutcome::ChannelClosed => "rejected",
        ApprovalOutcome::Timeout => "timeout",
        ApprovalOutcome::Cancelled | ApprovalOutcome::ExpiredByRestart => "cancelled",
        ApprovalOutcome::Error | ApprovalOutcome::Invalid => {
            panic!("the registry never ends an approval as {resolution:?}")
        }
    }
}

async fn start(f: &Fixture, id: &str, channel: &str, text: &str) -> TurnStream {
    f.core
        .start_turn(StartTurn {
            session_id: id.to_owned(),
            text: text.to_owned(),
            channel: channel.to_owned(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
}

/// Reads the observer until turn `turn_id` ends; returns the resolutions published for `approval`.
async fn resolutions_until_end(
    observer: &mut EventStream,
    turn_id: &str,
    approval: &str,
    why: &str,
) -> Vec<ApprovalOutcome> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(DEADLINE, observer.next())
            .await
            .unwrap_or_else(|_| panic!("{why}: the turn did not end in time"))
            .unwrap_or_else(|_| panic!("{why}: the observer lagged"))
            .unwrap_or_else(|| panic!("{why}: the observer's stream ended"));
        match &event.kind {
            EventKind::ApprovalResolved {
                approval_id,
                resolution,
                ..
            } if approval_id == approval => seen.push(*resolution),
            EventKind::TurnEnded(_) if event.turn_id.as_deref() == Some(turn_id) => return seen,
            _ => {}
        }
    }
}

/// Reads the turn's events up to its approval; `None` when the turn ended without asking one (its
/// timeout ran out before the question could be asked).
async fn approval_or_end(turn: &mut TurnStream, why: &str) -> Option<String> {
    loop {
        let event = next_turn_event(turn)
            .await
            .unwrap_or_else(|| panic!("{why}: the turn's stream ended early"));
        match &event.kind {
            EventKind::ApprovalRequested(info) => return Some(info.request.approval_id.clone()),
            EventKind::TurnEnded(_) => return None,
            _ => {}
        }
    }
}

async fn trial(s: Scenario, why: String) {
    let mut options = options();
    options.approval_timeout = s.timeout_ms.map(Duration::from_millis);
    let replies = vec![lamp(), FakeReply::text("after"), FakeReply::text("queued")];
    let f = fixture_with("file", replies, options).await;
    let id = f.new_session().await;
    let mut observer = f.core.subscribe(&id, None, "observer").await.unwrap();
    let mut watcher = None;
    if s.watcher && s.watcher_before {
        watcher = Some(f.core.subscribe(&id, None, "terminal").await.unwrap());
    }
    let mut turn = start(&f, &id, "terminal", "turn on the lamp").await;
    let turn_id = turn.accepted().turn_id.clone();
    let Some(approval) = approval_or_end(&mut turn, &why).await else {
        // Timed out before it was asked: recorded as a timeout, never run, nothing pending.
        assert!(s.timeout_ms.is_some(), "{why}: ended without a question");
        let stored = f.core.read_events(&id).await.unwrap();
        let statuses: Vec<&str> = stored
            .iter()
            .filter(|e| e["type"] == "approval")
            .filter_map(|e| e["status"].as_str())
            .collect();
        assert_eq!(statuses, vec!["pending", "timeout"], "{why}");
        assert!(f.core.registry().list_pending(None).is_empty(), "{why}");
        f.core.shutdown().await;
        return;
    };
    if s.watcher && !s.watcher_before {
        watcher = Some(f.core.subscribe(&id, None, "terminal").await.unwrap());
    }
    let queued = if s.queued {
        Some(start(&f, &id, "terminal", "and then this").await)
    } else {
        None
    };
    let other = if s.other {
        Some(f.core.subscribe(&id, None, "telegram").await.unwrap())
    } else {
        None
    };
    let ids = |who: Who| -> String {
        match who {
            Who::Turn => turn.attachment_id().to_owned(),
            Who::Watcher => watcher
                .as_ref()
                .map(|w| w.snapshot().attachment_id.clone())
                .unwrap_or_default(),
            Who::Queued => queued
                .as_ref()
                .map(|q| q.attachment_id().to_owned())
                .unwrap_or_default(),
            Who::Other => other
                .as_ref()
                .map(|o| o.snapshot().attachment_id.clone())
                .unwrap_or_default(),
            Who::Forged => "att-forged".to_owned(),
        }
    };
    let attachment_ids: Vec<(Who, String)> = [
        Who::Turn,
        Who::Watcher,
        Who::Queued,
        Who::Other,
        Who::Forged,
    ]
    .into_iter()
    .map(|who| (who, ids(who)))
    .collect();
    let attachment_of = |who: Who| -> String {
        attachment_ids
            .iter()
            .find(|(w, _)| *w == who)
            .unwrap()
            .1
            .clone()
    };

    // The streams a drop act ends, handed to the task that drops them.
    let mut turn_slot = Some(turn);
    let mut watcher_slot = watcher;
    let mut tasks = Vec::new();
    for (delay_us, act) in s.acts.clone() {
        let core = f.core.clone();
        let approval = approval.clone();
        let session = id.clone();
        let turn_id = turn_id.clone();
        let dropping_turn = matches!(act, Act::DropTurn)
            .then(|| turn_slot.take())
            .flatten();
        let dropping_watcher = matches!(act, Act::DropWatcher)
            .then(|| watcher_slot.take())
            .flatten();
        let attachment = match act {
            Act::Decide(who, _) => attachment_of(who),
            _ => String::new(),
        };
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_micros(delay_us)).await;
            match act {
                Act::Decide(who, answer) => {
                    let outcome = core
                        .decide(&approval, answer, &attachment)
                        .await
                        .map_err(|e: CoreError| e.to_string());
                    Some(Answer {
                        who,
                        answer,
                        outcome,
                    })
                }
                Act::Cancel => {
                    let _ = core.cancel_turn(&session, Some(&turn_id)).await;
                    None
                }
                Act::DropTurn => {
                    drop(dropping_turn);
                    None
                }
                Act::DropWatcher => {
                    drop(dropping_watcher);
                    None
                }
            }
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        if let Some(answer) = task.await.unwrap() {
            answers.push(answer);
        }
    }
    // Whatever is still pending ends when the clients go.
    drop(turn_slot);
    drop(watcher_slot);
    let live = resolutions_until_end(&mut observer, &turn_id, &approval, &why).await;
    drop(queued);
    drop(other);

    // One live resolution.
    assert_eq!(live.len(), 1, "{why}: live resolutions {live:?}");
    let winner = live[0];
    assert_eq!(
        f.core.registry().resolution_of(&approval),
        Some(winner),
        "{why}"
    );
    // One stored decision, saying the same.
    let stored = f.core.read_events(&id).await.unwrap();
    let decided: Vec<&str> = stored
        .iter()
        .filter(|e| e["type"] == "approval" && e["approval_id"] == approval.as_str())
        .filter_map(|e| e["status"].as_str())
        .filter(|status| *status != "pending")
        .collect();
    assert_eq!(decided, vec![stored_status(winner)], "{why}: {answers:?}");
    // Every answer agrees with the winner; at most one applied.
    let mut applied = Vec::new();
    for answer in &answers {
        match &answer.outcome {
            Ok(DecideOutcome::Applied(r)) => {
                assert!(
                    matches!(answer.who, Who::Turn | Who::Watcher),
                    "{why}: a decision from {:?} counted",
                    answer.who
                );
                applied.push(answer.clone());
                assert_eq!(*r, winner, "{why}: applied {answer:?} but {winner:?} won");
            }
            Ok(DecideOutcome::AlreadyDecided(r) | DecideOutcome::Expired(r)) => {
                assert_eq!(*r, winner, "{why}: {answer:?} but {winner:?} won");
            }
            Ok(DecideOutcome::NotFound) => panic!("{why}: {answer:?} found nothing"),
            Err(_) => {}
        }
    }
    assert!(applied.len() <= 1, "{why}: applied twice: {applied:?}");
    let approved_by_rightful = applied
        .iter()
        .any(|a| a.answer == ApprovalAnswer::Approve && matches!(a.who, Who::Turn | Who::Watcher));
    // The tool ran if and only if a rightful attachment applied APPROVED.
    let call: &Value = stored
        .iter()
        .find(|e| e["type"] == "tool_call" && e["tool"] == "demo_physical_action")
        .unwrap_or_else(|| panic!("{why}: no tool_call stored"));
    let ran = call["result_summary"]
        .as_str()
        .unwrap_or_default()
        .starts_with("Simulated:");
    assert_eq!(ran, approved_by_rightful, "{why}: {call} {answers:?}");
    assert_eq!(ran, winner == ApprovalOutcome::Approved, "{why}: {call}");
    assert_eq!(call["approval"], stored_status(winner), "{why}: {call}");
    // What the model read, when the turn went on to ask it again.
    let tool_use_id = call["tool_use_id"].as_str().unwrap().to_owned();
    let read = f.model.requests().into_iter().find_map(|request| {
        request
            .messages
            .iter()
            .map(|m| format!("{m:?}"))
            .find(|m| m.contains(&tool_use_id) && m.contains("ToolResult"))
    });
    if let Some(read) = read {
        assert_eq!(
            read.contains("Simulated:"),
            ran,
            "{why}: the model read {read}"
        );
    }
    f.core.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_under_seeded_faults_report_one_truth() {
    let seed = std::env::var("APPROVAL_FAULT_SEED")
        .ok()
        .and_then(|s| {
            let s = s.trim_start_matches("0x");
            u64::from_str_radix(s, 16).ok()
        })
        .unwrap_or(DEFAULT_SEED);
    let trials = std::env::var("APPROVAL_FAULT_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_TRIALS);
    println!("approval fault injection: seed {seed:#x}, {trials} trials");
    let mut rng = Rng(seed);
    let started = std::time::Instant::now();
    for n in 0..trials {
        let s = scenario(&mut rng);
        let why = format!("seed {seed:#x} trial {n}: {s:?}");
        if let Err(failure) = tokio::spawn(trial(s, why.clone())).await {
            panic!("{why} failed (rerun with APPROVAL_FAULT_SEED={seed:#x}): {failure}");
        }
    }
    println!(
        "approval fault injection: {trials} trials in {:?}",
        started.elapsed()
    );
}
