//! Routines and the tier gate: a tier-2 tool routine is registered only after an approval and
//! refused when rejected; its scheduled firings run exempt, recorded as such with the routine's
//! name; any change to what the question showed (arguments, schedule, catch-up rule, the tool's
//! source) is asked again or refused; what the model proposes is always asked; a manual run is
//! asked every time; an action whose approval does not cover it never runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::json;
use taud::clock::{Clock, FixedClock};
use taud::gate::{
    ApprovalOutcome, ApprovalState, CallApproval, CallContext, TierGate, ToolCallStatus,
};
use taud::routine::{
    CatchUp, Creator, DueFiring, FiringCause, FiringResult, Phase, Routine, RoutineAction,
    RoutineEngine, RoutineError, RoutineRunner, Schedule, fire_tool_action, load_routines,
    register, routines_path, run_by_hand, save_routines, session_id_for,
};
use taud::testing::{MemorySink, ScriptedApprover};
use taud::tool::builtin::shipped_catalog;
use tokio_util::sync::CancellationToken;

fn ts(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// Fires tool routines through the routines' gate, as the hub does.
struct GateRunner {
    approver: Arc<ScriptedApprover>,
    sink: Arc<MemorySink>,
    gate: TierGate,
}

impl GateRunner {
    fn new(approver: ScriptedApprover) -> Self {
        let approver = Arc::new(approver);
        let sink = Arc::new(MemorySink::new());
        let catalog = shipped_catalog(Arc::new(FixedClock(SystemTime::UNIX_EPOCH)), &[]).unwrap();
        let gate = TierGate::builder(Arc::new(catalog))
            .approver(Arc::clone(&approver) as _)
            .sink(Arc::clone(&sink) as _)
            .build();
        Self {
            approver,
            sink,
            gate,
        }
    }

    fn gate(&self) -> TierGate {
        self.gate.clone()
    }
}

#[async_trait]
impl RoutineRunner for GateRunner {
    async fn fire(
        &self,
        routine: &Routine,
        due: &DueFiring,
        cancel: CancellationToken,
    ) -> FiringResult {
        let ctx = CallContext {
            session_id: session_id_for(&routine.name),
            channel: "routine".into(),
            cancel,
        };
        fire_tool_action(&self.gate(), routine, due, &ctx).await
    }
}

struct Setup {
    path: std::path::PathBuf,
    engine: RoutineEngine,
    runner: Arc<GateRunner>,
    clock: Arc<std::sync::Mutex<SystemTime>>,
    /// Declared last, so dropped last: what writes into it is gone first.
    _dir: crate::support::temp::TestDir,
}

fn setup(decisions: Vec<ApprovalOutcome>) -> Setup {
    let dir = crate::support::temp::dir();
    let path = routines_path(dir.path());
    let clock = Arc::new(std::sync::Mutex::new(SystemTime::from(ts(
        "2026-12-02T19:00:00Z",
    ))));
    let hand = Arc::clone(&clock);
    let as_clock: Arc<dyn Clock> = Arc::new(move || *hand.lock().unwrap());
    let runner = Arc::new(GateRunner::new(ScriptedApprover::decisions(decisions)));
    let engine = RoutineEngine::open(&path, as_clock, Arc::clone(&runner) as _).unwrap();
    Setup {
        _dir: dir,
        path,
        engine,
        runner,
        clock,
    }
}

fn lamp_off(action: &str) -> Routine {
    Routine::new(
        "lamp-off",
        Schedule::cron("0 23 * * *").unwrap(),
        RoutineAction::Tool {
            tool: "demo_physical_action".into(),
            arguments: json!({"action": action}),
        },
        CatchUp::Skip,
        ts("2026-12-02T19:00:00Z"),
    )
}

fn cli() -> CallContext {
    CallContext {
        session_id: "s-owner".into(),
        channel: "cli".into(),
        cancel: CancellationToken::new(),
    }
}

#[tokio::test]
async fn a_tier_two_routine_is_stored_only_after_approval_and_refused_when_rejected() {
    let s = setup(vec![ApprovalOutcome::Rejected, ApprovalOutcome::Approved]);
    let gate = s.runner.gate();
    let err = register(
        &gate,
        &s.engine,
        lamp_off("desk lamp off"),
        false,
        &cli(),
        &|_| {},
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&err, RoutineError::NotApproved { outcome, .. } if outcome == "rejected"),
        "{err}"
    );
    assert!(s.engine.list().is_empty());
    assert!(load_routines(&s.path).unwrap().is_empty());

    let view = register(
        &gate,
        &s.engine,
        lamp_off("desk lamp off"),
        false,
        &cli(),
        &|_| {},
    )
    .await
    .unwrap();
    let approval = view.routine.approval.expect("stored with its approval");
    assert_eq!(approval.channel, "cli");
    let shown = approval.shown.expect("bound to what was shown");
    assert_eq!(shown.action, lamp_off("desk lamp off").action);
    assert_eq!(shown.schedule, Schedule::cron("0 23 * * *").unwrap());
    assert_eq!(shown.catch_up, CatchUp::Skip);
    assert_eq!(shown.session_id, "routine-lamp-off");
    let tool = shown.tool.expect("the tool's identity");
    assert_eq!(
        (tool.distribution.as_str(), tool.source_name.as_str()),
        ("taud", "demo_physical_action")
    );
    assert_eq!(view.routine.created_by, Creator::Owner);
    // The question was asked like any tier-2 call: tool, exact arguments, effect, plus the
    // routine's name and schedule, on the registering channel.
    let asked = s.runner.approver.requests();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[1].tool, "demo_physical_action");
    assert_eq!(asked[1].channel, "cli");
    assert_eq!(
        asked[1].formatted_arguments(),
        r#"{"action": "desk lamp off"}"#
    );
    assert!(
        asked[1].effect.starts_with("Demo: simulates"),
        "{}",
        asked[1].effect
    );
    for part in [
        "\"lamp-off\" (cron 0 23 * * *",
        "missed while the hub is down is skipped",
        "session routine-lamp-off",
    ] {
        assert!(
            asked[1].effect.contains(part),
            "{part}: {}",
            asked[1].effect
        );
    }
    let decided: Vec<_> = s
        .runner
        .sink
        .approvals()
        .into_iter()
        .map(|a| a.status)
        .collect();
    assert_eq!(
        decided,
        [
            ApprovalState::Pending,
            ApprovalState::Ended(ApprovalOutcome::Rejected),
            ApprovalState::Pending,
            ApprovalState::Ended(ApprovalOutcome::Approved),
        ]
    );
    assert!(
        s.runner.sink.tool_calls().is_empty(),
        "registering runs nothing"
    );
}

#[tokio::test]
async fn firings_are_exempt_and_recorded_with_the_routine_name() {
    let s = setup(vec![ApprovalOutcome::Approved]);
    let gate = s.runner.gate();
    register(
        &gate,
        &s.engine,
        lamp_off("desk lamp off"),
        false,
        &cli(),
        &|_| {},
    )
    .await
    .unwrap();
    for night in ["2026-12-02T20:00:01Z", "2026-12-03T20:00:01Z"] {
        *s.clock.lock().unwrap() = SystemTime::from(ts(night));
        let fired = s.engine.tick_and_wait(Phase::Running).await;
        assert_eq!(fired.len(), 1);
        assert!(fired[0].1.succeeded, "{:?}", fired[0].1);
    }
    assert_eq!(
        s.runner.approver.requests().len(),
        1,
        "no prompt at any firing"
    );
    let calls = s.runner.sink.tool_calls();
    assert_eq!(calls.len(), 2);
    for (call, number) in calls.iter().zip([1, 2]) {
        assert_eq!(call.approval, CallApproval::Exempt);
        assert_eq!(call.status, ToolCallStatus::Success);
        assert_eq!(call.session_id, "routine-lamp-off");
        assert_eq!(call.channel, "routine");
        assert_eq!(call.tool_use_id, format!("routine-lamp-off-{number}"));
        assert_eq!(call.arguments, json!({"action": "desk lamp off"}));
    }
    let history = s.engine.history("lamp-off").unwrap();
    assert!(
        history[0].detail.contains("(exempt)"),
        "{}",
        history[0].detail
    );
    // The exemption lasted only for the firing: any other call is asked as usual.
    assert_eq!(s.runner.gate().exemption_count(), 0);
}

#[tokio::test]
async fn any_change_to_what_was_shown_is_asked_again_and_no_change_is_not() {
    let s = setup(vec![
        ApprovalOutcome::Approved,
        ApprovalOutcome::Rejected,
        ApprovalOutcome::Rejected,
        ApprovalOutcome::Rejected,
        ApprovalOutcome::Approved,
    ]);
    let gate = s.runner.gate();
    register(
        &gate,
        &s.engine,
        lamp_off("desk lamp off"),
        false,
        &cli(),
        &|_| {},
    )
    .await
    .unwrap();
    // Nothing changed: the approval is kept, nobody is asked.
    register(
        &gate,
        &s.engine,
        lamp_off("desk lamp off"),
        true,
        &cli(),
        &|_| {},
    )
    .await
    .unwrap();
    assert_eq!(s.runner.approver.requests().len(), 1);
    // A new schedule, a new catch-up rule, new arguments: each is asked; each rejection leaves
    // the old routine as it was.
    let mut every_minute = lamp_off("desk lamp off");
    every_minute.schedule = Schedule::every("1m", ts("2026-12-02T19:00:00Z")).unwrap();
    let mut catch_up = lamp_off("desk lamp off");
    catch_up.catch_up = CatchUp::RunOnce;
    for changed in [every_minute, catch_up, lamp_off("all lights off")] {
        let err = register(&gate, &s.engine, changed, true, &cli(), &|_| {})
            .await
            .unwrap_err();
        assert!(matches!(err, RoutineError::NotApproved { .. }), "{err}");
        let kept = s.engine.get("lamp-off").unwrap().routine;
        assert_eq!(kept, s.engine.get("lamp-off").unwrap().routine);
        assert_eq!(kept.schedule, Schedule::cron("0 23 * * *").unwrap());
        assert_eq!(kept.catch_up, CatchUp::Skip);
        assert_eq!(
            kept.approval.unwrap().shown.unwrap().action,
            lamp_off("desk lamp off").action
        );
    }
    assert_eq!(s.runner.approver.requests().len(), 4);
    // Approved: stored with an approval of the new arguments.
    let view = register(
        &gate,
        &s.engine,
        lamp_off("all lights off"),
        true,
        &cli(),
        &|_| {},
    )
    .await
    .unwrap();
    assert_eq!(
        view.routine.approval.unwrap().shown.unwrap().action,
        lamp_off("all lights off").action
    );
    let asked = s.runner.approver.requests();
    assert_eq!(asked.len(), 5);
    assert!(asked[1].effect.contains("every 1m"), "{}", asked[1].effect);
    assert!(
        asked[2].effect.contains("runs once at start"),
        "{}",
        asked[2].effect
    );
    assert_eq!(asked[4].arguments, json!({"action": "all lights off"}));
}

#[tokio::test]
async fn an_action_its_approval_does_not_cover_never_runs() {
    let s = setup(vec![ApprovalOutcome::Approved]);
    let gate = s.runner.gate();
    register(
        &gate,
        &s.engine,
        lamp_off("desk lamp off"),
        false,
        &cli(),
        &|_| {},
    )
    .await
    .unwrap();
    // Someone edits routines.json by hand to open the door instead.
    let mut stored = load_routines(&s.path).unwrap();
    stored[0].action = RoutineAction::Tool {
        tool: "demo_physical_action".into(),
        arguments: json!({"action": "open the front door"}),
    };
    save_routines(&s.path, &stored).unwrap();
    drop(s.engine);
    let hand = Arc::clone(&s.clock);
    *hand.lock().unwrap() = SystemTime::from(ts("2026-12-02T20:00:01Z"));
    let engine = RoutineEngine::open(
        &s.path,
        Arc::new(move || *hand.lock().unwrap()),
        Arc::clone(&s.runner) as _,
    )
    .unwrap();
    let fired = engine.tick_and_wait(Phase::Running).await;
    assert_eq!(fired.len(), 1);
    assert!(!fired[0].1.succeeded);
    assert!(
        fired[0].1.detail.contains("not what its approval showed"),
        "{}",
        fired[0].1.detail
    );
    assert!(s.runner.sink.tool_calls().is_empty(), "the tool never ran");
    assert_eq!(
        s.runner.approver.requests().len(),
        1,
        "nobody was asked at firing"
    );
    assert_eq!(fired[0].0.cause, FiringCause::Scheduled);
}

#[tokio::test]
async fn unknown_tools_and_tier_zero_tools() {
    let s = setup(vec![]);
    let gate = s.runner.gate();
    let mut ghost = lamp_off("x");
    ghost.action = RoutineAction::Tool {
        tool: "no_such_tool".into(),
        arguments: json!({}),
    };
    let err = register(&gate, &s.engine, ghost, false, &cli(), &|_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, RoutineError::UnknownTool(_)), "{err}");
    let mut clock_read = lamp_off("x");
    clock_read.name = "time".into();
    clock_read.action = RoutineAction::Tool {
        tool: "current_time".into(),
        arguments: json!({}),
    };
    let view = register(&gate, &s.engine, clock_read, false, &cli(), &|_| {})
        .await
        .unwrap();
    assert!(view.routine.approval.is_none(), "tier 0 needs no approval");
    assert!(s.runner.approver.requests().is_empty());
    s.engine.run_now("time").unwrap();
    for _ in 0..100 {
        if !s.runner.sink.tool_calls().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let calls = s.runner.sink.tool_calls();
    assert_eq!(calls[0].approval, CallApproval::NotRequired);
    assert_eq!(calls[0].status, ToolCallStatus::Success);
}

/// What the model proposes, a tool that resolves elsewhere, and a manual run.
#[path = "routine_gate/binding.rs"]
mod binding;
