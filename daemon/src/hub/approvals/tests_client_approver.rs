//! Tests of the hub's approver ([`super::decide::ClientApprover`]) with the registry and the gate:
//! readiness before asking, a client's decision as the answer, a closed dialog, settling.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::readiness::{ApprovalReadiness, FLUSH_WAIT, TurnSlot};
use super::*;
use crate::gate::{ApprovalAnswer, ApprovalOutcome, ApprovalRequest, Approver};
use crate::hub::events::EventBus;
use crate::tool::Tier;

fn request(id: &str, timeout: Option<Duration>) -> ApprovalRequest {
    ApprovalRequest {
        approval_id: id.into(),
        tool: "demo_physical_action".into(),
        tier: Tier::Physical,
        arguments: json!({"b": 1, "a": "x\u{202e}"}),
        effect: "moves nothing".into(),
        session_id: "s1".into(),
        channel: "terminal".into(),
        tool_use_id: "tu".into(),
        timeout,
    }
}

struct Fixture {
    registry: Arc<ApprovalRegistry>,
    bus: Arc<EventBus>,
    readiness: Arc<ApprovalReadiness>,
    approver: Arc<ClientApprover>,
}

fn fixture() -> Fixture {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let readiness = Arc::new(ApprovalReadiness::default());
    let turn = Arc::new(TurnSlot::default());
    turn.set(Some("turn-1".into()));
    let approver = Arc::new(ClientApprover::new(
        Arc::clone(&registry),
        Arc::clone(&bus),
        Arc::clone(&readiness),
        turn,
    ));
    Fixture {
        registry,
        bus,
        readiness,
        approver,
    }
}

async fn wait_pending(registry: &ApprovalRegistry) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while registry.pending_count() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "never registered");
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn an_unrecorded_approval_is_never_asked() {
    let f = fixture();
    let _terminal = f.registry.attach(&f.bus, "terminal").unwrap();
    f.readiness.mark_flushed("a1");
    let answer = f.approver.decide(&request("a1", None)).await;
    assert!(answer.is_err());
    assert_eq!(f.registry.pending_count(), 0);
    assert_eq!(f.bus.last_seq(), 0, "nothing was published");
}

#[tokio::test]
async fn the_question_waits_until_earlier_events_are_published() {
    let f = fixture();
    let _terminal = f.registry.attach(&f.bus, "terminal").unwrap();
    f.readiness.mark_recorded("a1");
    let approver = Arc::clone(&f.approver);
    let waiting = tokio::spawn(async move { approver.decide(&request("a1", None)).await });
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(f.registry.pending_count(), 0, "not asked before the flush");
    f.readiness.mark_flushed("a1");
    wait_pending(&f.registry).await;
    waiting.abort();
}

#[tokio::test(start_paused = true)]
async fn a_flush_that_never_comes_does_not_block_forever() {
    let readiness = ApprovalReadiness::default();
    readiness.mark_recorded("a1");
    assert!(readiness.take_when_flushed("a1", FLUSH_WAIT).await);
    assert!(
        !readiness.take_when_flushed("a1", FLUSH_WAIT).await,
        "forgotten"
    );
}

#[tokio::test]
async fn a_client_decision_is_the_answer() {
    for (answer, expected) in [
        (ApprovalAnswer::Approve, ApprovalOutcome::Approved),
        (ApprovalAnswer::Reject, ApprovalOutcome::Rejected),
    ] {
        let f = fixture();
        let terminal = f.registry.attach(&f.bus, "terminal").unwrap();
        f.readiness.mark_recorded("a1");
        f.readiness.mark_flushed("a1");
        let approver = Arc::clone(&f.approver);
        let waiting = tokio::spawn(async move { approver.decide(&request("a1", None)).await });
        wait_pending(&f.registry).await;
        let pending = f.registry.list_pending(None);
        assert_eq!(pending[0].turn_id, "turn-1");
        assert_eq!(
            pending[0].request.formatted_arguments(),
            r#"{"a": "x\u202e", "b": 1}"#
        );
        assert_eq!(pending[0].deadline, None);
        assert!(matches!(
            f.registry.decide("a1", answer, terminal.id()),
            Ok(DecideOutcome::Applied(_))
        ));
        assert_eq!(waiting.await.unwrap(), Ok(expected));
    }
}

#[tokio::test]
async fn a_closed_dialog_rejects() {
    let f = fixture();
    let terminal = f.registry.attach(&f.bus, "terminal").unwrap();
    f.readiness.mark_recorded("a1");
    f.readiness.mark_flushed("a1");
    let approver = Arc::clone(&f.approver);
    let waiting = tokio::spawn(async move { approver.decide(&request("a1", None)).await });
    wait_pending(&f.registry).await;
    drop(terminal);
    assert_eq!(waiting.await.unwrap(), Ok(ApprovalOutcome::Rejected));
}

#[tokio::test]
async fn a_dropped_question_is_resolved_and_shows_a_deadline() {
    let f = fixture();
    let terminal = f.registry.attach(&f.bus, "terminal").unwrap();
    f.readiness.mark_recorded("a1");
    f.readiness.mark_flushed("a1");
    let approver = Arc::clone(&f.approver);
    let waiting = tokio::spawn(async move {
        approver
            .decide(&request("a1", Some(Duration::from_secs(600))))
            .await
    });
    wait_pending(&f.registry).await;
    assert!(f.registry.list_pending(None)[0].deadline.is_some());
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert_eq!(
        f.registry
            .decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Expired(ApprovalOutcome::Cancelled))
    );
}

/// Marks a `pending` approval recorded, as the session's recorder does.
struct Recording(Arc<ApprovalReadiness>);

impl crate::gate::EventSink for Recording {
    fn emit(&self, event: crate::gate::AgentEvent) {
        if let crate::gate::AgentEvent::Approval(a) = event
            && a.status == crate::gate::ApprovalState::Pending
        {
            self.0.mark_recorded(&a.approval_id);
        }
    }
}

fn gate_over(f: &Fixture, timeout: Option<Duration>) -> crate::gate::TierGate {
    let catalog = crate::tool::builtin::shipped_catalog(Arc::new(crate::clock::SystemClock), &[])
        .expect("the shipped catalog");
    crate::gate::TierGate::builder(Arc::new(catalog))
        .approver(Arc::clone(&f.approver) as _)
        .sink(Arc::new(Recording(Arc::clone(&f.readiness))))
        .timeout(timeout)
        .build()
}

fn lamp_call() -> crate::gate::GateCall {
    crate::gate::GateCall {
        tool_use_id: "tu".into(),
        tool: "demo_physical_action".into(),
        arguments: json!({"action": "lamp"}),
    }
}

fn call_ctx(cancel: tokio_util::sync::CancellationToken) -> crate::gate::CallContext {
    crate::gate::CallContext {
        session_id: "s1".into(),
        channel: "terminal".into(),
        cancel,
    }
}

#[tokio::test(start_paused = true)]
async fn a_question_that_times_out_before_it_is_asked_leaves_no_readiness_entry() {
    let f = fixture();
    let _terminal = f.registry.attach(&f.bus, "terminal").unwrap();
    let gate = gate_over(&f, Some(Duration::from_millis(50)));
    let ctx = call_ctx(tokio_util::sync::CancellationToken::new());
    let crate::gate::Checked::Pending(pending) = gate.begin(lamp_call(), &ctx) else {
        panic!("a tier-2 call waits");
    };
    let id = pending.request().approval_id.clone();
    assert_eq!(f.readiness.len(), 1, "recorded");
    // The flush never comes before the gate's timeout.
    assert!(matches!(
        pending.wait().await,
        crate::gate::Verdict::Refused(ref r)
            if r.reason() == crate::gate::RefusalReason::NotApproved(ApprovalOutcome::Timeout)
    ));
    assert!(f.readiness.is_empty(), "forgotten when the gate gave up");
    f.readiness.mark_flushed(&id);
    assert!(
        f.readiness.is_empty(),
        "a late flush mark leaves nothing behind"
    );
    assert_eq!(f.registry.pending_count(), 0);
}

#[tokio::test]
async fn a_question_cancelled_before_it_is_asked_leaves_no_readiness_entry() {
    let f = fixture();
    let gate = gate_over(&f, None);
    let cancel = tokio_util::sync::CancellationToken::new();
    let ctx = call_ctx(cancel.clone());
    let crate::gate::Checked::Pending(pending) = gate.begin(lamp_call(), &ctx) else {
        panic!("a tier-2 call waits");
    };
    cancel.cancel();
    let _ = pending.wait().await;
    assert!(f.readiness.is_empty());
    let crate::gate::Checked::Pending(never_waited) = gate.begin(lamp_call(), &ctx) else {
        panic!("a tier-2 call waits");
    };
    drop(never_waited);
    assert!(f.readiness.is_empty());
}

#[tokio::test]
async fn a_late_timeout_or_cancel_learns_the_decision_that_won() {
    let f = fixture();
    let terminal = f.registry.attach(&f.bus, "terminal").unwrap();
    f.readiness.mark_recorded("a1");
    f.readiness.mark_flushed("a1");
    let approver = Arc::clone(&f.approver);
    let waiting = tokio::spawn(async move { approver.decide(&request("a1", None)).await });
    wait_pending(&f.registry).await;
    assert_eq!(
        f.registry
            .decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Applied(ApprovalOutcome::Approved))
    );
    for proposed in [ApprovalOutcome::Timeout, ApprovalOutcome::Cancelled] {
        assert_eq!(
            f.approver.conclude(&request("a1", None), proposed),
            ApprovalOutcome::Approved
        );
    }
    assert_eq!(waiting.await.unwrap(), Ok(ApprovalOutcome::Approved));
}
