//! [`HubApprover`]: the tier gate's approver inside the hub. It turns a tier-2 question into a
//! pending approval in the [`ApprovalRegistry`] and waits for a client's decision.
//!
//! Invariants:
//! - It asks nobody about an approval whose `pending` record is not durably in the session's events
//!   (the session's sink marks recorded ids in [`RecordedApprovals`]); such a call is refused as an
//!   approver error.
//! - Only `Resolution::Approved` becomes `Decision::Approved`; a closed channel is a rejection.
//! - Cancellation-safe: the gate cancels by dropping `decide`, which drops the ticket, which
//!   resolves the approval (`Timeout` or `Cancelled`) and publishes that.
//! - It has no timeout of its own: the gate's (from the hub's configuration) applies.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use super::approvals::ApprovalRegistry;
use super::bus::EventBus;
use super::event::{PendingInfo, Resolution, now_rfc3339};
use crate::gate::{ApprovalRequest, Approver, ApproverError, Decision};

/// Approval ids whose `pending` event is durably recorded, waiting to be asked.
#[derive(Debug, Default)]
pub struct RecordedApprovals {
    ids: Mutex<HashSet<String>>,
}

impl RecordedApprovals {
    /// Marks an approval as recorded.
    pub fn mark(&self, approval_id: &str) {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(approval_id.to_owned());
    }

    /// Whether it was recorded; forgets it.
    pub fn take(&self, approval_id: &str) -> bool {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(approval_id)
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
    recorded: Arc<RecordedApprovals>,
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
        recorded: Arc<RecordedApprovals>,
        turn: Arc<TurnSlot>,
    ) -> Self {
        Self {
            registry,
            bus,
            recorded,
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
        if !self.recorded.take(&request.approval_id) {
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
        let mut ticket = self.registry.register(&self.bus, info, request.timeout);
        Ok(match ticket.wait().await {
            Resolution::Approved => Decision::Approved,
            Resolution::Rejected | Resolution::ChannelClosed => Decision::Rejected,
            Resolution::Timeout => Decision::Timeout,
            Resolution::Cancelled | Resolution::ExpiredByRestart => Decision::Cancelled,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hubcore::approvals::{ApprovalAnswer, DecideOutcome};
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
        recorded: Arc<RecordedApprovals>,
        approver: Arc<HubApprover>,
    }

    fn fixture() -> Fixture {
        let registry = ApprovalRegistry::new();
        let bus = Arc::new(EventBus::new("s1"));
        let recorded = Arc::new(RecordedApprovals::default());
        let turn = Arc::new(TurnSlot::default());
        turn.set(Some("turn-1".into()));
        let approver = Arc::new(HubApprover::new(
            Arc::clone(&registry),
            Arc::clone(&bus),
            Arc::clone(&recorded),
            turn,
        ));
        Fixture {
            registry,
            bus,
            recorded,
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
        let _terminal = f.registry.attach(&f.bus, "terminal");
        let answer = f.approver.decide(&request("a1", None)).await;
        assert!(answer.is_err());
        assert_eq!(f.registry.pending_count(), 0);
        assert_eq!(f.bus.last_seq(), 0, "nothing was published");
    }

    #[tokio::test]
    async fn a_client_decision_is_the_answer() {
        for (answer, expected) in [
            (ApprovalAnswer::Approve, Decision::Approved),
            (ApprovalAnswer::Reject, Decision::Rejected),
        ] {
            let f = fixture();
            let terminal = f.registry.attach(&f.bus, "terminal");
            f.recorded.mark("a1");
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
        let terminal = f.registry.attach(&f.bus, "terminal");
        f.recorded.mark("a1");
        let approver = Arc::clone(&f.approver);
        let waiting = tokio::spawn(async move { approver.decide(&request("a1", None)).await });
        wait_pending(&f.registry).await;
        drop(terminal);
        assert_eq!(waiting.await.unwrap(), Ok(Decision::Rejected));
    }

    #[tokio::test]
    async fn a_dropped_question_is_resolved_and_shows_a_deadline() {
        let f = fixture();
        let terminal = f.registry.attach(&f.bus, "terminal");
        f.recorded.mark("a1");
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
}
