//! The tier gate used directly, without a model (as the reflex engine will): check, permit, record,
//! timeouts, cancellation, exemptions and their undo, one prompt at a time, panics contained.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use taud::gate::{
    ApprovalOutcome, ApprovalRequest, ApprovalState, Approver, ApproverError, CallApproval,
    CallContext, Checked, GateCall, RefusalReason, TierGate, ToolCallStatus, Verdict, refusal_text,
};
use taud::message::{ToolResultContent, ToolResultStatus};
use taud::testing::{MemorySink, ScriptedAnswer, ScriptedApprover, UnansweredApprover};
use taud::tool::{Tier, Tool, ToolCatalog, ToolContext, ToolError, ToolOutput, ToolSpec};
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy)]
enum Behaviour {
    Echo,
    Panic,
    HonoursCancel,
    IgnoresCancel,
}

struct TestTool {
    spec: ToolSpec,
    behaviour: Behaviour,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for TestTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        match self.behaviour {
            Behaviour::Echo => Ok(ToolOutput::json(input)),
            Behaviour::Panic => panic!("tool bug"),
            Behaviour::HonoursCancel => {
                ctx.cancel.cancelled().await;
                Err(ToolError::Cancelled)
            }
            Behaviour::IgnoresCancel => futures::future::pending().await,
        }
    }
}

fn catalog(tools: &[(&str, Tier, Behaviour)]) -> (Arc<ToolCatalog>, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut catalog = ToolCatalog::new();
    for (name, tier, behaviour) in tools {
        let added = catalog.add(Arc::new(TestTool {
            spec: ToolSpec::builder(*name, format!("The {name} tool."))
                .effect(format!("Moves {name}."))
                .tier(*tier)
                .build(),
            behaviour: *behaviour,
            runs: Arc::clone(&runs),
        }));
        assert_eq!(added, Ok(()));
    }
    (Arc::new(catalog), runs)
}

fn call(tool: &str, id: &str, arguments: Value) -> GateCall {
    GateCall {
        tool_use_id: id.into(),
        tool: tool.into(),
        arguments,
    }
}

fn ctx() -> CallContext {
    CallContext {
        session_id: "s1".into(),
        channel: "telegram".into(),
        cancel: CancellationToken::new(),
    }
}

fn decided_states(sink: &MemorySink) -> Vec<ApprovalState> {
    sink.approvals().iter().map(|a| a.status).collect()
}

#[tokio::test]
async fn check_and_record_work_without_a_model() {
    let (catalog, runs) = catalog(&[("write_note", Tier::DigitalWrite, Behaviour::Echo)]);
    let sink = Arc::new(MemorySink::new());
    let gate = TierGate::builder(catalog).sink(sink.clone()).build();
    let ctx = ctx();
    let Verdict::Allowed(permit) = gate
        .check(call("write_note", "r1", json!({"b": 2})), &ctx)
        .await
    else {
        panic!("tier 1 must be allowed");
    };
    assert_eq!(permit.tier(), Tier::DigitalWrite);
    assert_eq!(permit.approval(), CallApproval::NotRequired);
    assert_eq!(permit.call().arguments, json!({"b": 2}));
    let record = permit.run(ctx.clone()).await;
    gate.record(&record, &ctx);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(record.status, ToolCallStatus::Success);
    assert_eq!(
        record.result.content,
        vec![ToolResultContent::Json(json!({"b": 2}))]
    );
    let calls = sink.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].channel, "telegram");
    assert_eq!(calls[0].result_summary, r#"{"b":2}"#);
}

#[tokio::test]
async fn the_request_carries_what_a_person_needs() {
    let (catalog, _) = catalog(&[("lamp", Tier::Physical, Behaviour::Echo)]);
    let approver = Arc::new(ScriptedApprover::decisions([
        ApprovalOutcome::Rejected,
        ApprovalOutcome::Rejected,
    ]));
    let gate = TierGate::builder(catalog)
        .approver(approver.clone())
        .build();
    let ctx = ctx();
    for id in ["u1", "u2"] {
        let verdict = gate
            .check(call("lamp", id, json!({"state": "on"})), &ctx)
            .await;
        let Verdict::Refused(refusal) = verdict else {
            panic!("rejected must refuse");
        };
        assert_eq!(
            refusal.reason(),
            RefusalReason::NotApproved(ApprovalOutcome::Rejected)
        );
        assert_eq!(refusal.message(), refusal_text("lamp"));
    }
    let requests = approver.requests();
    assert_eq!(requests.len(), 2);
    let first: &ApprovalRequest = &requests[0];
    assert_eq!(first.tool, "lamp");
    assert_eq!(first.tier, Tier::Physical);
    assert_eq!(first.arguments, json!({"state": "on"}));
    assert_eq!(first.effect, "Moves lamp.");
    assert_eq!(first.session_id, "s1");
    assert_eq!(first.channel, "telegram");
    assert_eq!(first.tool_use_id, "u1");
    assert_eq!(first.timeout, None);
    assert_ne!(requests[0].approval_id, requests[1].approval_id);
}

#[tokio::test(start_paused = true)]
async fn gate_timeout_wins_over_the_approvers() {
    let (catalog, runs) = catalog(&[("lamp", Tier::Physical, Behaviour::Echo)]);
    let approver = Arc::new(UnansweredApprover::new().with_timeout(Duration::from_secs(3600)));
    let sink = Arc::new(MemorySink::new());
    let gate = TierGate::builder(catalog)
        .approver(approver.clone())
        .sink(sink.clone())
        .timeout(Some(Duration::from_secs(5)))
        .build();
    assert_eq!(gate.effective_timeout(), Some(Duration::from_secs(5)));
    let started = tokio::time::Instant::now();
    let verdict = gate.check(call("lamp", "u1", json!({})), &ctx()).await;
    assert!(matches!(
        verdict,
        Verdict::Refused(ref r) if r.reason() == RefusalReason::NotApproved(ApprovalOutcome::Timeout)
    ));
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        decided_states(&sink),
        vec![
            ApprovalState::Pending,
            ApprovalState::Ended(ApprovalOutcome::Timeout)
        ]
    );
    assert_eq!(sink.approvals()[0].timeout_ms, Some(5000));
    assert_eq!(approver.requests()[0].timeout, Some(Duration::from_secs(5)));
}

#[tokio::test(start_paused = true)]
async fn the_approvers_timeout_applies_when_the_gate_has_none() {
    let (catalog, _) = catalog(&[("lamp", Tier::Physical, Behaviour::Echo)]);
    let approver = Arc::new(UnansweredApprover::new().with_timeout(Duration::from_secs(7)));
    let gate = TierGate::builder(catalog).approver(approver).build();
    let started = tokio::time::Instant::now();
    let verdict = gate.check(call("lamp", "u1", json!({})), &ctx()).await;
    assert!(matches!(verdict, Verdict::Refused(_)));
    assert_eq!(started.elapsed(), Duration::from_secs(7));
}

#[tokio::test]
async fn without_any_timeout_only_a_cancel_ends_the_wait() {
    let (catalog, runs) = catalog(&[("lamp", Tier::Physical, Behaviour::Echo)]);
    let sink = Arc::new(MemorySink::new());
    let gate = TierGate::builder(catalog)
        .approver(Arc::new(UnansweredApprover::new()))
        .sink(sink.clone())
        .build();
    assert_eq!(gate.effective_timeout(), None);
    let ctx = ctx();
    let Checked::Pending(pending) = gate.begin(call("lamp", "u1", json!({})), &ctx) else {
        panic!("tier 2 must ask");
    };
    // The question is on record before anyone is asked.
    assert_eq!(decided_states(&sink), vec![ApprovalState::Pending]);
    let waiting = tokio::spawn(pending.wait());
    ctx.cancel.cancel();
    let verdict = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(
        verdict,
        Verdict::Refused(ref r) if r.reason() == RefusalReason::NotApproved(ApprovalOutcome::Cancelled)
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(
        decided_states(&sink),
        vec![
            ApprovalState::Pending,
            ApprovalState::Ended(ApprovalOutcome::Cancelled)
        ]
    );
}

#[tokio::test]
async fn a_dropped_question_is_recorded_as_cancelled() {
    let (catalog, _) = catalog(&[("lamp", Tier::Physical, Behaviour::Echo)]);
    let sink = Arc::new(MemorySink::new());
    let gate = TierGate::builder(catalog).sink(sink.clone()).build();
    let checked = gate.begin(call("lamp", "u1", json!({})), &ctx());
    assert!(matches!(checked, Checked::Pending(_)));
    drop(checked);
    assert_eq!(
        decided_states(&sink),
        vec![
            ApprovalState::Pending,
            ApprovalState::Ended(ApprovalOutcome::Cancelled)
        ]
    );
}

#[tokio::test]
async fn a_panicking_approver_refuses() {
    let (catalog, runs) = catalog(&[("lamp", Tier::Physical, Behaviour::Echo)]);
    let sink = Arc::new(MemorySink::new());
    let gate = TierGate::builder(catalog)
        .approver(Arc::new(ScriptedApprover::new([ScriptedAnswer::Panic])))
        .sink(sink.clone())
        .build();
    let verdict = gate.check(call("lamp", "u1", json!({})), &ctx()).await;
    assert!(matches!(
        verdict,
        Verdict::Refused(ref r) if r.reason() == RefusalReason::NotApproved(ApprovalOutcome::Error)
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(sink.errors().len(), 1);
}

#[tokio::test]
async fn an_exhausted_script_never_approves() {
    let (catalog, _) = catalog(&[("lamp", Tier::Physical, Behaviour::Echo)]);
    let gate = TierGate::builder(catalog)
        .approver(Arc::new(ScriptedApprover::decisions([])))
        .build();
    let verdict = gate.check(call("lamp", "u1", json!({})), &ctx()).await;
    assert!(matches!(
        verdict,
        Verdict::Refused(ref r) if r.reason() == RefusalReason::NotApproved(ApprovalOutcome::Error)
    ));
}

#[tokio::test]
async fn exemptions_see_the_call_and_can_be_undone() {
    let (catalog, runs) = catalog(&[("lamp", Tier::Physical, Behaviour::Echo)]);
    let approver = Arc::new(ScriptedApprover::decisions([ApprovalOutcome::Rejected]));
    let gate = TierGate::builder(catalog)
        .approver(approver.clone())
        .build();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let handle = gate.add_exemption(move |tool: &str, args: &Value| {
        log.lock().unwrap().push((tool.to_owned(), args.clone()));
        Ok::<_, String>(args["routine"] == "evening")
    });
    assert_eq!(gate.exemption_count(), 1);
    let ctx = ctx();
    let Verdict::Allowed(permit) = gate
        .check(call("lamp", "u1", json!({"routine": "evening"})), &ctx)
        .await
    else {
        panic!("the exemption matches");
    };
    assert_eq!(permit.approval(), CallApproval::Exempt);
    let record = permit.run(ctx.clone()).await;
    assert_eq!(record.approval, CallApproval::Exempt);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(approver.requests().is_empty());
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![("lamp".to_owned(), json!({"routine": "evening"}))]
    );

    assert!(handle.undo());
    assert_eq!(gate.exemption_count(), 0);
    let verdict = gate
        .check(call("lamp", "u2", json!({"routine": "evening"})), &ctx)
        .await;
    assert!(matches!(verdict, Verdict::Refused(_)));
    assert_eq!(approver.requests().len(), 1);
}

/// Counts how many questions are open at once.
struct SlowApprover {
    open: AtomicUsize,
    most: AtomicUsize,
}

#[async_trait]
impl Approver for SlowApprover {
    fn name(&self) -> &str {
        "slow"
    }

    async fn decide(&self, _request: &ApprovalRequest) -> Result<ApprovalOutcome, ApproverError> {
        let now = self.open.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        self.open.fetch_sub(1, Ordering::SeqCst);
        Ok(ApprovalOutcome::Rejected)
    }
}

#[tokio::test(start_paused = true)]
async fn prompts_are_asked_one_at_a_time() {
    let (catalog, _) = catalog(&[("lamp", Tier::Physical, Behaviour::Echo)]);
    let approver = Arc::new(SlowApprover {
        open: AtomicUsize::new(0),
        most: AtomicUsize::new(0),
    });
    let gate = TierGate::builder(catalog)
        .approver(approver.clone())
        .build();
    let ctx = ctx();
    let (a, b, c) = tokio::join!(
        gate.check(call("lamp", "u1", json!({})), &ctx),
        gate.check(call("lamp", "u2", json!({})), &ctx),
        gate.check(call("lamp", "u3", json!({})), &ctx),
    );
    for verdict in [a, b, c] {
        assert!(matches!(verdict, Verdict::Refused(_)));
    }
    assert_eq!(approver.most.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_panicking_tool_becomes_an_error_result() {
    let (catalog, _) = catalog(&[("buggy", Tier::Read, Behaviour::Panic)]);
    let gate = TierGate::builder(catalog).build();
    let ctx = ctx();
    let Verdict::Allowed(permit) = gate.check(call("buggy", "u1", json!({})), &ctx).await else {
        panic!("tier 0 is allowed");
    };
    let record = permit.run(ctx).await;
    assert_eq!(record.status, ToolCallStatus::Error);
    assert_eq!(record.result.status, ToolResultStatus::Error);
    assert_eq!(
        record.result.content,
        vec![ToolResultContent::Text(
            "Error: the tool crashed: tool bug".into()
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn a_cancel_stops_running_tools() {
    let (catalog, _) = catalog(&[
        ("polite", Tier::Read, Behaviour::HonoursCancel),
        ("stubborn", Tier::Read, Behaviour::IgnoresCancel),
    ]);
    let gate = TierGate::builder(catalog).build();
    for tool in ["polite", "stubborn"] {
        let ctx = ctx();
        let Verdict::Allowed(permit) = gate.check(call(tool, "u1", json!({})), &ctx).await else {
            panic!("tier 0 is allowed");
        };
        let running = tokio::spawn(permit.run(ctx.clone()));
        ctx.cancel.cancel();
        let record = running.await.unwrap();
        assert_eq!(record.status, ToolCallStatus::Cancelled, "{tool}");
        assert_eq!(
            record.result.content,
            vec![ToolResultContent::Text("Tool execution cancelled".into())]
        );
    }
}
