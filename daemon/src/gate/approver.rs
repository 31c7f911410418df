//! Approvers: who decides a tier-2 call. A channel implements [`Approver`]; [`AutoRejectApprover`]
//! is the default when a channel passes none.
//!
//! Invariants: no approver in this crate approves on its own (the scripted one in `testing` only
//! replays decisions a test wrote down); the gate treats an approver error, a panic, an invalid
//! answer, a timeout and a cancelled wait as refusals. The gate ends a question it stops waiting for
//! with [`Approver::conclude`] (which names the decision that stands) and then drops the `decide`
//! future, so an approver that keeps state per question cleans it up there or on drop.

use std::time::Duration;

use async_trait::async_trait;

use super::approval::{ApprovalOutcome, ApprovalRequest};

/// An approver failed to produce a decision; the gate records `error` and refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("approver failed: {0}")]
pub struct ApproverError(pub String);

/// Decides tier-2 calls for a channel.
#[async_trait]
pub trait Approver: Send + Sync {
    /// A short name for logs and events (e.g. `terminal`, `telegram`).
    fn name(&self) -> &str;

    /// The approver's own timeout; the gate's timeout wins over it. `None`: wait until cancelled.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Asks for a decision. Anything but `Ok(ApprovalOutcome::Approved)` refuses the call.
    async fn decide(&self, request: &ApprovalRequest) -> Result<ApprovalOutcome, ApproverError>;

    /// Ends the question as `proposed` (the gate's timeout, a cancel, a failure) unless a decision
    /// for it already won, and returns the decision that stands: the gate records and acts on that
    /// one. The gate calls it when it stops waiting, while the `decide` future is still alive (it
    /// is dropped right after and never polled again), and also for a question it never asked, so
    /// an approver can forget its per-question state. The default keeps `proposed`.
    fn conclude(&self, request: &ApprovalRequest, proposed: ApprovalOutcome) -> ApprovalOutcome {
        let _ = request;
        proposed
    }

    /// The gate wrote the `approved` record of a question this approver approved (`Approved`),
    /// or could not and refused the call (`Error`). Called once for each approved question, right
    /// after the write; an approver that reports decisions reports this one as that. The default
    /// does nothing.
    fn recorded(&self, request: &ApprovalRequest, outcome: ApprovalOutcome) {
        let _ = (request, outcome);
    }
}

/// Rejects every request: the approver when a channel passes none.
#[derive(Debug, Clone, Copy, Default)]
pub struct AutoRejectApprover;

#[async_trait]
impl Approver for AutoRejectApprover {
    fn name(&self) -> &str {
        "auto_reject"
    }

    async fn decide(&self, _request: &ApprovalRequest) -> Result<ApprovalOutcome, ApproverError> {
        Ok(ApprovalOutcome::Rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Tier;
    use serde_json::json;

    #[tokio::test]
    async fn auto_reject_rejects() {
        let request = ApprovalRequest {
            approval_id: "a".into(),
            tool: "demo_physical_action".into(),
            tier: Tier::Physical,
            arguments: json!({"action": "x\u{202e}"}),
            effect: "e".into(),
            session_id: "s".into(),
            channel: "cli".into(),
            tool_use_id: "t".into(),
            timeout: None,
        };
        assert_eq!(
            AutoRejectApprover.decide(&request).await,
            Ok(ApprovalOutcome::Rejected)
        );
        assert_eq!(AutoRejectApprover.timeout(), None);
        assert_eq!(request.formatted_arguments(), r#"{"action": "x\u202e"}"#);
    }
}
