//! [`HubApprover`]: the tier gate's approver inside the hub. It turns a tier-2 question into a
//! pending approval in the [`ApprovalRegistry`] and waits for a client's decision.
//!
//! Invariants:
//! - It asks nobody about an approval whose `pending` record is not durably in the session's events
//!   (the session's recorder marks recorded ids in [`ApprovalReadiness`]); such a call is refused as
//!   an approver error.
//! - It registers the approval only after the session's turn worker has published every event the
//!   turn produced before the question (the worker marks the question flushed), so subscribers see
//!   `approval_requested` after the tool call that caused it. That wait is bounded by
//!   [`FLUSH_WAIT`].
//! - Only `Resolution::Approved` becomes `Decision::Approved`; a closed channel is a rejection.
//! - The registry chooses the winner: when the gate stops waiting (timeout, cancel) it settles the
//!   approval through [`HubApprover`]'s `conclude`, which resolves it as that only if nothing won
//!   first and returns the winner, so the gate records what the registry and DecideApproval say.
//!   Dropping `decide` without that resolves the approval as `Cancelled`.
//! - Readiness entries live from the `pending` record until the question is asked or concluded
//!   (cancelled or timed out before it was asked): none outlives its question.
//! - It has no timeout of its own: the gate's (from the hub's configuration) applies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tracing::warn;

use super::approvals::ApprovalRegistry;
use super::bus::EventBus;
use super::event::{PendingInfo, Resolution, now_rfc3339};
use crate::gate::{ApprovalRequest, Approver, ApproverError, Decision};

/// The longest the approver waits for the turn worker to publish what preceded a question.
pub const FLUSH_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Default, Clone, Copy)]
struct Ready {
    recorded: bool,
    flushed: bool,
}

/// Whether a question is ready to be asked: its `pending` event is durably recorded, and the
/// session's events before it are published.
#[derive(Debug, Default)]
pub struct ApprovalReadiness {
    ids: Mutex<HashMap<String, Ready>>,
    changed: Notify,
}

impl ApprovalReadiness {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Ready>> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `pending` event of `approval_id` is durably recorded (the gate emits it before the
    /// question can be asked, so this comes first).
    pub fn mark_recorded(&self, approval_id: &str) {
        self.lock()
            .entry(approval_id.to_owned())
            .or_default()
            .recorded = true;
        self.changed.notify_waiters();
    }

    /// Every event before the question `approval_id` is published. Only a recorded question is
    /// tracked: a mark for one that was never recorded, or was already taken or forgotten, is
    /// dropped, so a late mark cannot leave an entry behind.
    pub fn mark_flushed(&self, approval_id: &str) {
        if let Some(ready) = self.lock().get_mut(approval_id) {
            ready.flushed = true;
        }
        self.changed.notify_waiters();
    }

    /// Forgets a question that will not be asked (cancelled or timed out first).
    pub fn forget(&self, approval_id: &str) {
        self.lock().remove(approval_id);
    }

    /// How many questions are tracked (recorded, not yet asked or forgotten).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no question is tracked.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Waits (at most `limit`) until the question is flushed, then returns whether it was
    /// recorded, and forgets it. A question that was never recorded answers `false` at once.
    pub async fn take_when_flushed(&self, approval_id: &str, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Some(ready) = self.lock().get(approval_id).copied() else {
                return false;
            };
            if ready.flushed {
                break;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                warn!(%approval_id, "the turn's earlier events were not published in time; asking anyway");
                break;
            }
        }
        self.lock()
            .remove(approval_id)
            .is_some_and(|ready| ready.recorded)
    }
}

/// The id of the turn a session runs now (turns of a session run one at a time).
#[derive(Debug, Default)]
pub struct TurnSlot {
    current: Mutex<Option<String>>,
}

impl TurnSlot {
    pub fn set(&self, turn_id: Option<String>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = turn_id;
    }

    pub fn get(&self) -> Option<String> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The approver of one session's agent.
pub struct HubApprover {
    registry: Arc<ApprovalRegistry>,
    bus: Arc<EventBus>,
    readiness: Arc<ApprovalReadiness>,
    turn: Arc<TurnSlot>,
}

impl std::fmt::Debug for HubApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubApprover")
            .field("session_id", &self.bus.session_id())
            .finish()
    }
}

impl HubApprover {
    pub fn new(
        registry: Arc<ApprovalRegistry>,
        bus: Arc<EventBus>,
        readiness: Arc<ApprovalReadiness>,
        turn: Arc<TurnSlot>,
    ) -> Self {
        Self {
            registry,
            bus,
            readiness,
            turn,
        }
    }
}

/// The approver name recorded in `approval` events.
pub const HUB_APPROVER: &str = "hub";

#[async_trait]
impl Approver for HubApprover {
    fn name(&self) -> &str {
        HUB_APPROVER
    }

    async fn decide(&self, request: &ApprovalRequest) -> Result<Decision, ApproverError> {
        let recorded = self
            .readiness
            .take_when_flushed(&request.approval_id, FLUSH_WAIT)
            .await;
        if !recorded {
            return Err(ApproverError(
                "the approval could not be recorded in the session's events, so it was not asked"
                    .to_owned(),
            ));
        }
        let deadline = request
            .timeout
            .and_then(|t| jiff::SignedDuration::try_from(t).ok())
            .and_then(|t| jiff::Timestamp::now().checked_add(t).ok())
            .map(|t| t.to_string());
        let info = PendingInfo {
            approval_id: request.approval_id.clone(),
            session_id: request.session_id.clone(),
            turn_id: self.turn.get().unwrap_or_default(),
            channel: request.channel.clone(),
            tool: request.tool.clone(),
            tier: request.tier.number(),
            arguments: request.formatted_arguments(),
            effect: request.effect.clone(),
            tool_use_id: request.tool_use_id.clone(),
            asked_at: now_rfc3339(),
            deadline,
        };
        let mut ticket = self.registry.register(&self.bus, info);
        Ok(decision_of(ticket.wait().await))
    }

    fn conclude(&self, request: &ApprovalRequest, proposed: Decision) -> Decision {
        self.readiness.forget(&request.approval_id);
        let resolution = match proposed {
            Decision::Timeout => Resolution::Timeout,
            Decision::Rejected => Resolution::Rejected,
            Decision::Approved | Decision::Cancelled | Decision::Error | Decision::Invalid => {
                Resolution::Cancelled
            }
        };
        match self.registry.settle(&request.approval_id, resolution) {
            Some(winner) => decision_of(winner),
            None => proposed,
        }
    }
}

/// The gate's decision for how an approval ended; only `Approved` approves.
pub fn decision_of(resolution: Resolution) -> Decision {
    match resolution {
        Resolution::Approved => Decision::Approved,
        Resolution::Rejected | Resolution::ChannelClosed => Decision::Rejected,
        Resolution::Timeout => Decision::Timeout,
        Resolution::Cancelled | Resolution::ExpiredByRestart => Decision::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::approvals::{ApprovalAnswer, DecideOutcome};
    use crate::tool::Tier;
    use serde_json::json;
    use std::time::Duration;

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
        approver: Arc<HubApprover>,
    }

    fn fixture() -> Fixture {
        let registry = ApprovalRegistry::new();
        let bus = Arc::new(EventBus::new("s1"));
        let readiness = Arc::new(ApprovalReadiness::default());
        let turn = Arc::new(TurnSlot::default());
        turn.set(Some("turn-1".into()));
        let approver = Arc::new(HubApprover::new(
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
            (ApprovalAnswer::Approve, Decision::Approved),
            (ApprovalAnswer::Reject, Decision::Rejected),
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
            assert_eq!(pending[0].arguments, r#"{"a": "x\u202e", "b": 1}"#);
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
        assert_eq!(waiting.await.unwrap(), Ok(Decision::Rejected));
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
            Ok(DecideOutcome::Expired(Resolution::Cancelled))
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
        let catalog =
            crate::tool::builtin::shipped_catalog(Arc::new(crate::clock::SystemClock), &[])
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
                if r.reason() == crate::gate::RefusalReason::NotApproved(Decision::Timeout)
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
            Ok(DecideOutcome::Applied(Resolution::Approved))
        );
        for proposed in [Decision::Timeout, Decision::Cancelled] {
            assert_eq!(
                f.approver.conclude(&request("a1", None), proposed),
                Decision::Approved
            );
        }
        assert_eq!(waiting.await.unwrap(), Ok(Decision::Approved));
    }
}
