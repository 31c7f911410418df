//! Which decision the gate acts on: the one that won at the approver (a timeout or cancel does not
//! overwrite a decision that came first), and an `approved` decision only once it is recorded.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::testing::{MemorySink, ScriptedApprover};
use crate::tool::{ToolCatalog, ToolContext, ToolError, ToolOutput, ToolSpec};

struct Lamp(ToolSpec);

#[async_trait]
impl crate::tool::Tool for Lamp {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, input: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::json(input))
    }
}

fn catalog() -> Arc<ToolCatalog> {
    let mut catalog = ToolCatalog::new();
    let spec = ToolSpec::builder("lamp", "The lamp.")
        .effect("Turns the lamp on.")
        .tier(Tier::Physical)
        .build();
    assert_eq!(catalog.add(Arc::new(Lamp(spec))), Ok(()));
    Arc::new(catalog)
}

fn ctx(cancel: CancellationToken) -> CallContext {
    CallContext {
        session_id: "s1".into(),
        channel: "terminal".into(),
        cancel,
    }
}

fn call() -> GateCall {
    GateCall {
        tool_use_id: "use-1".into(),
        tool: "lamp".into(),
        arguments: json!({"on": true}),
    }
}

/// Never answers; its `conclude` says a decision (`won`) was already there, and counts calls.
struct DecidedElsewhere {
    won: Option<ApprovalOutcome>,
    concluded: AtomicUsize,
}

#[async_trait]
impl Approver for DecidedElsewhere {
    fn name(&self) -> &str {
        "elsewhere"
    }

    async fn decide(&self, _request: &ApprovalRequest) -> Result<ApprovalOutcome, ApproverError> {
        std::future::pending().await
    }

    fn conclude(&self, _request: &ApprovalRequest, proposed: ApprovalOutcome) -> ApprovalOutcome {
        self.concluded.fetch_add(1, Ordering::SeqCst);
        self.won.unwrap_or(proposed)
    }
}

fn decided_statuses(sink: &MemorySink) -> Vec<ApprovalState> {
    sink.approvals()
        .iter()
        .map(|a| a.status)
        .filter(|s| *s != ApprovalState::Pending)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_timeout_does_not_overwrite_a_decision_that_won_first() {
    for won in [ApprovalOutcome::Approved, ApprovalOutcome::Rejected] {
        let sink = Arc::new(MemorySink::new());
        let approver = Arc::new(DecidedElsewhere {
            won: Some(won),
            concluded: AtomicUsize::new(0),
        });
        let gate = TierGate::builder(catalog())
            .approver(Arc::clone(&approver) as _)
            .sink(Arc::clone(&sink) as _)
            .timeout(Some(Duration::from_millis(50)))
            .build();
        let verdict = gate.check(call(), &ctx(CancellationToken::new())).await;
        assert_eq!(matches!(verdict, Verdict::Allowed(_)), won.is_approved());
        assert_eq!(decided_statuses(&sink), vec![ApprovalState::from(won)]);
        assert_eq!(approver.concluded.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn a_cancel_does_not_overwrite_a_decision_that_won_first() {
    let sink = Arc::new(MemorySink::new());
    let approver = Arc::new(DecidedElsewhere {
        won: Some(ApprovalOutcome::Approved),
        concluded: AtomicUsize::new(0),
    });
    let gate = TierGate::builder(catalog())
        .approver(Arc::clone(&approver) as _)
        .sink(Arc::clone(&sink) as _)
        .build();
    let cancel = CancellationToken::new();
    let Checked::Pending(pending) = gate.begin(call(), &ctx(cancel.clone())) else {
        panic!("a tier-2 call waits for a decision");
    };
    let waiting = tokio::spawn(pending.wait());
    tokio::task::yield_now().await;
    cancel.cancel();
    let verdict = waiting.await.unwrap();
    assert!(matches!(verdict, Verdict::Allowed(_)), "{verdict:?}");
    assert_eq!(
        decided_statuses(&sink),
        vec![ApprovalState::Ended(ApprovalOutcome::Approved)]
    );
}

#[tokio::test]
async fn a_question_cancelled_before_it_is_asked_is_concluded_with_the_approver() {
    let approver = Arc::new(DecidedElsewhere {
        won: None,
        concluded: AtomicUsize::new(0),
    });
    let gate = TierGate::builder(catalog())
        .approver(Arc::clone(&approver) as _)
        .build();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let verdict = gate.check(call(), &ctx(cancel)).await;
    assert!(matches!(
        verdict,
        Verdict::Refused(ref r) if r.reason() == RefusalReason::NotApproved(ApprovalOutcome::Cancelled)
    ));
    assert_eq!(approver.concluded.load(Ordering::SeqCst), 1);
    // Dropped without a wait: concluded too.
    let Checked::Pending(pending) = gate.begin(call(), &ctx(CancellationToken::new())) else {
        panic!("a tier-2 call waits for a decision");
    };
    drop(pending);
    assert_eq!(approver.concluded.load(Ordering::SeqCst), 2);
}

/// Keeps events in memory, but cannot durably record anything.
#[derive(Default)]
struct NoDisk(MemorySink);

impl EventSink for NoDisk {
    fn emit(&self, event: AgentEvent) {
        self.0.emit(event);
    }

    fn record(&self, _event: AgentEvent) -> Result<(), SinkError> {
        Err(SinkError("No space left on device".into()))
    }
}

#[tokio::test]
async fn an_approval_that_cannot_be_recorded_issues_no_permit() {
    let sink = Arc::new(NoDisk::default());
    let gate = TierGate::builder(catalog())
        .approver(Arc::new(ScriptedApprover::decisions([
            ApprovalOutcome::Approved,
        ])))
        .sink(Arc::clone(&sink) as _)
        .build();
    let verdict = gate.check(call(), &ctx(CancellationToken::new())).await;
    let Verdict::Refused(refusal) = verdict else {
        panic!("an approval that is not durable must not run the tool: {verdict:?}");
    };
    assert_eq!(refusal.reason(), RefusalReason::NotRecorded);
    assert_eq!(
        refusal.approval(),
        CallApproval::Asked(ApprovalOutcome::Error)
    );
    assert!(
        refusal.message().contains("could not be recorded"),
        "{}",
        refusal.message()
    );
    let errors = sink.0.errors();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].message.contains("No space left"), "{errors:?}");
    let statuses: Vec<ApprovalState> = sink.0.approvals().iter().map(|a| a.status).collect();
    assert_eq!(
        statuses,
        vec![
            ApprovalState::Pending,
            ApprovalState::Ended(ApprovalOutcome::Error)
        ],
        "the question still ends"
    );
}

/// A catalog of the same tool objects leaves the gate's catalog (and its shared specs) in place;
/// one with another tool replaces it.
#[test]
fn a_catalog_of_the_same_tools_keeps_the_shared_specs() {
    let first = catalog();
    let gate = TierGate::builder(Arc::clone(&first))
        .approver(Arc::new(ScriptedApprover::new(vec![])) as _)
        .sink(Arc::new(MemorySink::default()) as _)
        .build();
    let specs = gate.catalog().specs();
    let mut same = ToolCatalog::new();
    for entry in first.entries() {
        same.add(Arc::clone(entry.tool())).unwrap();
    }
    gate.set_catalog(Arc::new(same));
    assert!(Arc::ptr_eq(&gate.catalog(), &first));
    assert!(Arc::ptr_eq(&gate.catalog().specs(), &specs));
    let other = catalog();
    gate.set_catalog(Arc::clone(&other));
    assert!(Arc::ptr_eq(&gate.catalog(), &other));
    assert!(!Arc::ptr_eq(&gate.catalog().specs(), &specs));
}
