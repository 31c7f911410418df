//! The tier gate: the last step before any tool runs.
//!
//! [`TierGate::check`] looks the tool up in the catalog and answers with a [`Verdict`]: tier 0 and 1
//! are allowed, tier 2 is allowed when an exemption matches or the approver explicitly approves,
//! anything else is refused. [`TierGate::record`] emits the `tool_call` event and logs the call.
//! Neither needs a model, so the reflex engine and an MCP server use the same policy.
//!
//! Invariants (ARCHITECTURE.md, "Rules that never bend"): a tool not in the catalog never runs;
//! a permit runs exactly the checked call (the executor runs it immediately; nothing sits between check and execution); only
//! `ApprovalOutcome::Approved` approves and silence never does; every question emits an `approval` event
//! (`pending`, before the approver is asked) and exactly one decided event; prompts are asked one at a
//! time; the decision recorded is the approver's winner (a timeout or cancel is settled with the
//! approver, see [`Approver::conclude`], so a decision that won first is not overwritten); an
//! `approved` decision is durably recorded before the permit is issued, and a call whose approval
//! cannot be recorded is refused; logs: tier 0 at DEBUG, tiers 1-2 at INFO with arguments, result summary and approval, an
//! unknown tool at WARN.

mod approval;
mod approver;
mod exemption;
mod format;
mod pending;
mod sink;
mod verdict;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_decisions;

use std::collections::hash_map::RandomState;
use std::fmt::Display;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

pub use approval::{ApprovalAnswer, ApprovalOutcome, ApprovalRequest, ApprovalState, CallApproval};
pub use approver::{Approver, ApproverError, AutoRejectApprover};
pub use exemption::ExemptionHandle;
pub use format::format_approval_arguments;
pub use pending::PendingApproval;
pub use sink::{
    AgentEvent, ApprovalEvent, ErrorEvent, EventSink, NullSink, SinkError, ToolCallEvent,
    ToolCallStatus, TurnRepairedEvent, TurnStoppedEvent,
};
pub use verdict::{
    CANCEL_GRACE, CallContext, GateCall, Permit, Refusal, RefusalReason, ToolCallRecord, Verdict,
    not_recorded_text, refusal_text, unknown_tool_text,
};

use crate::tool::{Tier, ToolCatalog};
use exemption::Exemptions;

pub(crate) struct GateInner {
    /// Replaced only between turns ([`TierGate::set_catalog`]).
    catalog: std::sync::RwLock<Arc<ToolCatalog>>,
    approver: Arc<dyn Approver>,
    sink: Arc<dyn EventSink>,
    timeout: Option<Duration>,
    exemptions: Arc<Exemptions>,
    /// One permit: prompts are asked one at a time.
    prompts: Semaphore,
    approvals: AtomicU64,
}

/// The tier gate. Cheap to clone; clones share the exemptions and the prompt queue.
#[derive(Clone)]
pub struct TierGate {
    inner: Arc<GateInner>,
}

impl std::fmt::Debug for TierGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TierGate")
            .field("tools", &self.catalog().names())
            .field("approver", &self.inner.approver.name())
            .field("timeout", &self.inner.timeout)
            .finish()
    }
}

/// Builds a [`TierGate`]. Defaults: [`AutoRejectApprover`], [`NullSink`], no timeout.
pub struct TierGateBuilder {
    catalog: Arc<ToolCatalog>,
    approver: Arc<dyn Approver>,
    sink: Arc<dyn EventSink>,
    timeout: Option<Duration>,
}

impl TierGateBuilder {
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = approver;
        self
    }

    pub fn sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = sink;
        self
    }

    /// The gate's timeout for a question; it wins over the approver's own.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn build(self) -> TierGate {
        TierGate {
            inner: Arc::new(GateInner {
                catalog: std::sync::RwLock::new(self.catalog),
                approver: self.approver,
                sink: self.sink,
                timeout: self.timeout,
                exemptions: Arc::new(Exemptions::default()),
                prompts: Semaphore::new(1),
                approvals: AtomicU64::new(0),
            }),
        }
    }
}

/// The first step of a check: a verdict now, or a question to wait for.
#[derive(Debug)]
pub enum Checked {
    Ready(Verdict),
    /// A tier-2 call needs a decision; the `pending` approval event has been emitted.
    Pending(Box<PendingApproval>),
}

impl TierGate {
    pub fn builder(catalog: Arc<ToolCatalog>) -> TierGateBuilder {
        TierGateBuilder {
            catalog,
            approver: Arc::new(AutoRejectApprover),
            sink: Arc::new(NullSink),
            timeout: None,
        }
    }

    /// The catalog the gate looks tools up in.
    pub fn catalog(&self) -> Arc<ToolCatalog> {
        Arc::clone(
            &self
                .inner
                .catalog
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Replaces the catalog (the agent does it at a turn boundary, so a turn sees one tool set).
    /// A catalog of the very same tools as the current one leaves the current one in place, with
    /// the specs it already shares with the model's requests.
    pub fn set_catalog(&self, catalog: Arc<ToolCatalog>) {
        let mut current = self
            .inner
            .catalog
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !current.same_tools(&catalog) {
            *current = catalog;
        }
    }

    pub fn approver_name(&self) -> &str {
        self.inner.approver.name()
    }

    /// The timeout a question gets: the gate's, else the approver's, else none.
    pub fn effective_timeout(&self) -> Option<Duration> {
        self.inner.timeout.or_else(|| self.inner.approver.timeout())
    }

    /// Registers an exemption: `f(tool, arguments)` sees a copy of the arguments of tier-2 calls to
    /// known tools and exempts the call from its prompt by returning `Ok(true)`. One that errors
    /// does not exempt.
    pub fn add_exemption<F, E>(&self, f: F) -> ExemptionHandle
    where
        F: Fn(&str, &Value) -> Result<bool, E> + Send + Sync + 'static,
        E: Display,
    {
        self.inner.exemptions.add(f)
    }

    /// How many exemptions are registered.
    pub fn exemption_count(&self) -> usize {
        self.inner.exemptions.len()
    }

    /// Checks a call and, for a tier-2 call, waits for the decision.
    pub async fn check(&self, call: GateCall, ctx: &CallContext) -> Verdict {
        match self.begin(call, ctx) {
            Checked::Ready(verdict) => verdict,
            Checked::Pending(pending) => pending.wait().await,
        }
    }

    /// Checks a call without waiting: a verdict for an unknown tool, tier 0-1 and exempt calls;
    /// otherwise a [`PendingApproval`] whose `pending` event has already been emitted.
    pub fn begin(&self, call: GateCall, ctx: &CallContext) -> Checked {
        self.begin_with(call, ctx, None)
    }

    /// Asks for the registration of a routine that will make `call` on a schedule: like
    /// [`TierGate::begin`], but it is always asked, whatever the tool's tier, as a tier-2 question
    /// (no exemption answers for it), and `note` (the routine's name, schedule, catch-up rule and
    /// session) follows the tool's effect in the question. The caller does not run the permit; an
    /// approval is what it records.
    pub fn begin_registration(&self, call: GateCall, ctx: &CallContext, note: &str) -> Checked {
        self.begin_with(call, ctx, Some(note))
    }

    fn begin_with(&self, call: GateCall, ctx: &CallContext, note: Option<&str>) -> Checked {
        let inner = &self.inner;
        let catalog = self.catalog();
        let Some(entry) = catalog.get(&call.tool) else {
            return Checked::Ready(Verdict::Refused(Refusal {
                call,
                tier: None,
                reason: RefusalReason::UnknownTool,
            }));
        };
        let tier = match note {
            Some(_) => Tier::Physical,
            None => entry.tier(),
        };
        let tool = Arc::clone(entry.tool());
        if tier != Tier::Physical {
            return Checked::Ready(Verdict::Allowed(Permit {
                tool,
                call,
                tier,
                approval: CallApproval::NotRequired,
            }));
        }
        let exemption = match note {
            Some(_) => exemption::ExemptionOutcome::default(),
            None => inner.exemptions.check(&call.tool, &call.arguments),
        };
        for failure in &exemption.failures {
            warn!(tool = %call.tool, "an exemption failed and did not exempt: {failure}");
            inner.sink.emit(AgentEvent::Error(ErrorEvent {
                location: "tier_gate".into(),
                message: format!("exemption failed: {failure}"),
                tool: Some(call.tool.clone()),
                tool_use_id: Some(call.tool_use_id.clone()),
                session_id: ctx.session_id.clone(),
            }));
        }
        if exemption.exempt {
            return Checked::Ready(Verdict::Allowed(Permit {
                tool,
                call,
                tier,
                approval: CallApproval::Exempt,
            }));
        }
        let request = ApprovalRequest {
            approval_id: self.new_approval_id(),
            tool: call.tool.clone(),
            tier,
            arguments: call.arguments.clone(),
            effect: match note {
                Some(note) => format!("{} {note}", entry.spec().effect()),
                None => entry.spec().effect().to_owned(),
            },
            session_id: ctx.session_id.clone(),
            channel: ctx.channel.clone(),
            tool_use_id: call.tool_use_id.clone(),
            timeout: self.effective_timeout(),
        };
        info!(
            tool = %request.tool,
            approval_id = %request.approval_id,
            approver = inner.approver.name(),
            arguments = %format_approval_arguments(&request.arguments),
            "approval pending"
        );
        let event = pending::approval_event(
            &request,
            inner.approver.name(),
            ApprovalState::Pending,
            None,
        );
        inner.sink.emit(AgentEvent::Approval(event));
        Checked::Pending(Box::new(PendingApproval {
            gate: Arc::clone(inner),
            request,
            call,
            tool,
            ctx: ctx.clone(),
            decided: false,
        }))
    }

    /// Records a finished (or refused) call: the `tool_call` event, an `error` event for an unknown
    /// tool, and the log line at the tier's level.
    pub fn record(&self, record: &ToolCallRecord, ctx: &CallContext) {
        self.log_call(record, ctx);
        self.inner
            .sink
            .emit(AgentEvent::ToolCall(record.to_event(ctx)));
    }

    /// [`Self::record`] for a call whose result message is stored next: the `tool_call` event is
    /// staged to be written with it ([`EventSink::stage`]).
    pub fn record_with_result(&self, record: &ToolCallRecord, ctx: &CallContext) {
        self.log_call(record, ctx);
        self.inner
            .sink
            .stage(AgentEvent::ToolCall(record.to_event(ctx)));
    }

    /// The log line of a finished call, and the `error` event of an unknown tool.
    fn log_call(&self, record: &ToolCallRecord, ctx: &CallContext) {
        let summary = record.result_summary();
        match record.tier {
            None => {
                warn!(tool = %record.tool, tool_use_id = %record.tool_use_id, "{summary}");
                self.inner.sink.emit(AgentEvent::Error(ErrorEvent {
                    location: "tier_gate".into(),
                    message: summary.clone(),
                    tool: Some(record.tool.clone()),
                    tool_use_id: Some(record.tool_use_id.clone()),
                    session_id: ctx.session_id.clone(),
                }));
            }
            Some(Tier::Read) => debug!(
                tool = %record.tool,
                tier = 0,
                status = record.status.as_str(),
                duration_ms = record.duration_ms,
                "tool call"
            ),
            Some(tier) => info!(
                tool = %record.tool,
                tier = tier.number(),
                arguments = %format_approval_arguments(&record.arguments),
                result = %summary,
                approval = record.approval.as_str(),
                status = record.status.as_str(),
                duration_ms = record.duration_ms,
                "tool call"
            ),
        }
    }

    fn new_approval_id(&self) -> String {
        let n = self.inner.approvals.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(n);
        hasher.write_u128(nanos);
        format!("apr-{:016x}{:04x}", hasher.finish(), n & 0xffff)
    }
}
