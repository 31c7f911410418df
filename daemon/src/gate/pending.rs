//! [`PendingApproval`]: a tier-2 question that was recorded as `pending` and is waiting to be asked.
//! [`PendingApproval::wait`] asks the approver (in the hub, `crate::hub::ClientApprover`) and
//! `finish` turns the [`ApprovalOutcome`] into the durable `approved` record and the [`Permit`],
//! or into a refusal: the last step of ARCHITECTURE.md's "path of an approval".
//!
//! Invariants: the `pending` approval event was emitted before this value exists (so a store that
//! persists events has the question before anyone is asked); questions of one gate are asked one at
//! a time; the wait ends on a decision, the timeout (gate's, else approver's) or the cancellation
//! token; a timeout, cancel or failure is settled with the approver ([`super::Approver::conclude`])
//! and the decision it names is the one recorded and acted on; only an explicit `Approved` that was
//! durably recorded ([`super::EventSink::record`]) yields a permit, and the approver is told what
//! became of that record ([`super::Approver::recorded`]) before the permit exists; a pending approval dropped
//! without being waited on is settled as `cancelled`, so every question gets exactly one decided
//! event.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;
use tracing::{info, warn};

use super::GateInner;
use super::approval::{ApprovalOutcome, ApprovalRequest, ApprovalState, CallApproval};

use super::sink::{AgentEvent, ApprovalEvent, ErrorEvent};
use super::verdict::{CallContext, GateCall, Permit, Refusal, RefusalReason, Verdict};
use crate::tool::Tool;

/// A tier-2 call waiting for its decision. Call [`PendingApproval::wait`].
pub struct PendingApproval {
    pub(super) gate: Arc<GateInner>,
    pub(super) request: ApprovalRequest,
    pub(super) call: GateCall,
    pub(super) tool: Arc<dyn Tool>,
    pub(super) ctx: CallContext,
    pub(super) decided: bool,
}

impl std::fmt::Debug for PendingApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingApproval")
            .field("request", &self.request)
            .finish()
    }
}

impl PendingApproval {
    /// The question, as the approver will see it.
    pub fn request(&self) -> &ApprovalRequest {
        &self.request
    }

    /// Asks the approver and turns the answer into a verdict.
    pub async fn wait(mut self) -> Verdict {
        let started = Instant::now();
        let decision = self.ask().await;
        self.finish(decision, started)
    }

    async fn ask(&self) -> ApprovalOutcome {
        let cancel = self.ctx.cancel.clone();
        let turn = tokio::select! {
            biased;
            () = cancel.cancelled() => return self.conclude(ApprovalOutcome::Cancelled),
            turn = self.gate.prompts.acquire() => turn,
        };
        let Ok(_turn) = turn else {
            return self.conclude(ApprovalOutcome::Error);
        };
        let deciding = AssertUnwindSafe(self.gate.approver.decide(&self.request)).catch_unwind();
        tokio::pin!(deciding);
        let timeout = self.request.timeout;
        let expired = async move {
            match timeout {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        // An answer that is ready wins over a cancel or the timeout seen in the same poll; either
        // of those is settled with the approver while its `decide` is still alive, so a decision
        // that won first stands.
        let outcome = tokio::select! {
            biased;
            outcome = &mut deciding => outcome,
            () = cancel.cancelled() => return self.conclude(ApprovalOutcome::Cancelled),
            () = expired => return self.conclude(ApprovalOutcome::Timeout),
        };
        match outcome {
            Ok(Ok(decision)) => decision,
            Ok(Err(error)) => {
                self.report_failure(&error.to_string());
                self.conclude(ApprovalOutcome::Error)
            }
            Err(_panic) => {
                self.report_failure("the approver panicked");
                self.conclude(ApprovalOutcome::Error)
            }
        }
    }

    /// The decision that stands when the gate stops waiting with `proposed`.
    fn conclude(&self, proposed: ApprovalOutcome) -> ApprovalOutcome {
        let decision = self.gate.approver.conclude(&self.request, proposed);
        if decision != proposed {
            info!(
                approval_id = %self.request.approval_id,
                proposed = proposed.as_str(),
                decision = decision.as_str(),
                "the approval was decided before the gate stopped waiting; that decision stands"
            );
        }
        decision
    }

    fn report_failure(&self, message: &str) {
        warn!(
            approver = self.gate.approver.name(),
            tool = %self.call.tool,
            approval_id = %self.request.approval_id,
            "approval failed: {message}"
        );
        self.gate.sink.emit(AgentEvent::Error(ErrorEvent {
            location: "tier_gate".into(),
            message: format!("approver {} failed: {message}", self.gate.approver.name()),
            tool: Some(self.call.tool.clone()),
            tool_use_id: Some(self.call.tool_use_id.clone()),
            session_id: self.ctx.session_id.clone(),
        }));
    }

    fn finish(&mut self, decision: ApprovalOutcome, started: Instant) -> Verdict {
        self.decided = true;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let call = self.call.clone();
        if !decision.is_approved() {
            self.emit_decided(decision, Some(duration_ms));
            return Verdict::Refused(Refusal {
                call,
                tier: Some(self.request.tier),
                reason: RefusalReason::NotApproved(decision),
            });
        }
        let event = approval_event(
            &self.request,
            self.gate.approver.name(),
            decision.into(),
            Some(duration_ms),
        );
        if let Err(error) = self.gate.sink.record(AgentEvent::Approval(event)) {
            warn!(
                tool = %self.call.tool,
                approval_id = %self.request.approval_id,
                "the approval could not be recorded, so the tool does not run: {error}"
            );
            self.gate.sink.emit(AgentEvent::Error(ErrorEvent {
                location: "tier_gate".into(),
                message: format!(
                    "the approval could not be recorded, so the call was refused: {error}"
                ),
                tool: Some(self.call.tool.clone()),
                tool_use_id: Some(self.call.tool_use_id.clone()),
                session_id: self.ctx.session_id.clone(),
            }));
            // Best effort: the question ends as an error rather than staying `pending`.
            self.emit_decided(ApprovalOutcome::Error, Some(duration_ms));
            self.gate
                .approver
                .recorded(&self.request, ApprovalOutcome::Error);
            return Verdict::Refused(Refusal {
                call,
                tier: Some(self.request.tier),
                reason: RefusalReason::NotRecorded,
            });
        }
        self.gate
            .approver
            .recorded(&self.request, ApprovalOutcome::Approved);
        self.log_decided(decision);
        Verdict::Allowed(Permit {
            tool: Arc::clone(&self.tool),
            call,
            tier: self.request.tier,
            approval: CallApproval::Asked(ApprovalOutcome::Approved),
        })
    }

    fn log_decided(&self, decision: ApprovalOutcome) {
        info!(
            tool = %self.call.tool,
            approval_id = %self.request.approval_id,
            approver = self.gate.approver.name(),
            decision = decision.as_str(),
            "approval decided"
        );
    }

    fn emit_decided(&self, decision: ApprovalOutcome, duration_ms: Option<u64>) {
        let event = approval_event(
            &self.request,
            self.gate.approver.name(),
            decision.into(),
            duration_ms,
        );
        self.gate.sink.emit(AgentEvent::Approval(event));
    }
}

impl Drop for PendingApproval {
    fn drop(&mut self) {
        if !self.decided {
            self.decided = true;
            // Never waited on, or its wait was dropped: settle it as cancelled with the approver.
            // A decision that won first is what is recorded, though the call no longer runs.
            let decision = self.conclude(ApprovalOutcome::Cancelled);
            if decision.is_approved() {
                warn!(
                    tool = %self.call.tool,
                    approval_id = %self.request.approval_id,
                    "the approval was approved, but its call was dropped before it could run; the tool did not run"
                );
            }
            self.emit_decided(decision, None);
        }
    }
}

/// The `approval` event for `request` in `status`.
pub(super) fn approval_event(
    request: &ApprovalRequest,
    approver: &str,
    status: ApprovalState,
    duration_ms: Option<u64>,
) -> ApprovalEvent {
    ApprovalEvent {
        approval_id: request.approval_id.clone(),
        status,
        tool: request.tool.clone(),
        tier: request.tier,
        arguments: request.arguments.clone(),
        effect: request.effect.clone(),
        tool_use_id: request.tool_use_id.clone(),
        session_id: request.session_id.clone(),
        channel: request.channel.clone(),
        approver: approver.to_owned(),
        timeout_ms: request
            .timeout
            .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        duration_ms,
    }
}
