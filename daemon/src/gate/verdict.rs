//! What the gate answers: a [`Permit`] to run exactly the call it checked, or a [`Refusal`]; and
//! the [`ToolCallRecord`] that every call ends as.
//!
//! Invariants: a `Permit` can only be made by the gate and is consumed by [`Permit::run`], which
//! starts the tool at once with the very arguments that were checked (nothing can rewrite them in
//! between); a refused call never runs; every record becomes exactly one `toolResult`.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::approval::{ApprovalOutcome, CallApproval};
use super::sink::{ToolCallEvent, ToolCallStatus};
use crate::message::{ToolResult, ToolResultStatus};
use crate::tool::{ProgressReporter, Tier, Tool, ToolContext, ToolError};

/// How long a running tool may take to notice a cancel before it is dropped.
pub const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// Longest `result_summary`, in characters.
const SUMMARY_CHARS: usize = 200;

/// The text the model reads when a tier-2 call was not approved.
pub fn refusal_text(tool: &str) -> String {
    format!(
        "The user did not approve this action: {tool}. Do not perform it; tell the user briefly."
    )
}

/// The text the model reads when an approved call was refused because its approval could not be
/// recorded.
pub fn not_recorded_text(tool: &str) -> String {
    format!(
        "The approval of this action could not be recorded, so it was not performed: {tool}. Tell the user briefly."
    )
}

/// The text the model reads when it called a tool that is not in the catalog.
pub fn unknown_tool_text(tool: &str) -> String {
    format!("Tool '{tool}' is not registered; it was not run.")
}

/// One tool call as the model asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct GateCall {
    pub tool_use_id: String,
    pub tool: String,
    pub arguments: Value,
}

/// Where a call comes from, and the token that cancels it.
#[derive(Debug, Clone)]
pub struct CallContext {
    pub session_id: String,
    pub channel: String,
    pub cancel: CancellationToken,
}

/// The outcome of one call, whatever happened; the gate records it and the model reads its result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRecord {
    pub tool_use_id: String,
    pub tool: String,
    /// `None` for a tool that is not registered.
    pub tier: Option<Tier>,
    pub arguments: Value,
    pub status: ToolCallStatus,
    pub approval: CallApproval,
    /// The `toolResult` the model reads.
    pub result: ToolResult,
    /// How long the tool ran (0 when it did not run).
    pub duration_ms: u64,
}

impl ToolCallRecord {
    /// A call that did not run because the turn was cancelled first.
    pub fn cancelled(call: GateCall, tier: Option<Tier>) -> Self {
        Self::not_run(
            call,
            tier,
            ToolCallStatus::Cancelled,
            ToolError::Cancelled.model_text(),
        )
    }

    /// A call that did not run because its input could not be read.
    pub fn invalid_input(call: GateCall, tier: Option<Tier>, problem: &str) -> Self {
        let text = format!(
            "Error: the input for tool '{}' was not valid JSON ({problem}); it was not run.",
            call.tool
        );
        Self::not_run(call, tier, ToolCallStatus::Error, text)
    }

    fn not_run(call: GateCall, tier: Option<Tier>, status: ToolCallStatus, text: String) -> Self {
        Self {
            result: ToolResult::text(&call.tool_use_id, ToolResultStatus::Error, text),
            tool_use_id: call.tool_use_id,
            tool: call.tool,
            tier,
            arguments: call.arguments,
            status,
            approval: CallApproval::NotRequired,
            duration_ms: 0,
        }
    }

    /// The start of the result's text, on one line, for logs and events.
    pub fn result_summary(&self) -> String {
        let mut text = String::new();
        for block in &self.result.content {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(&block.as_text());
        }
        let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if one_line.chars().count() > SUMMARY_CHARS {
            let cut: String = one_line.chars().take(SUMMARY_CHARS).collect();
            format!("{cut}…")
        } else {
            one_line
        }
    }

    /// The `tool_call` agent event for this record.
    pub fn to_event(&self, ctx: &CallContext) -> ToolCallEvent {
        ToolCallEvent {
            tool: self.tool.clone(),
            tier: self.tier,
            arguments: self.arguments.clone(),
            status: self.status,
            result_summary: self.result_summary(),
            approval: self.approval,
            duration_ms: self.duration_ms,
            tool_use_id: self.tool_use_id.clone(),
            session_id: ctx.session_id.clone(),
            channel: ctx.channel.clone(),
        }
    }
}

/// The gate's answer for one call.
#[derive(Debug)]
pub enum Verdict {
    /// Run it, now: consume the permit with [`Permit::run`].
    Allowed(Permit),
    /// Do not run it; the model reads the refusal.
    Refused(Refusal),
}

/// Leave to run one checked call with exactly the checked arguments. Only the gate makes permits.
pub struct Permit {
    pub(super) tool: Arc<dyn Tool>,
    pub(super) call: GateCall,
    pub(super) tier: Tier,
    pub(super) approval: CallApproval,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("call", &self.call)
            .field("tier", &self.tier)
            .field("approval", &self.approval)
            .finish()
    }
}

impl Permit {
    pub fn call(&self) -> &GateCall {
        &self.call
    }

    /// The tool this permit runs (to check which tool an approval named, before running it).
    pub fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    pub fn tier(&self) -> Tier {
        self.tier
    }

    pub fn approval(&self) -> CallApproval {
        self.approval
    }

    /// Runs the tool. A panic becomes an error result; after a cancel the tool gets
    /// [`CANCEL_GRACE`] to return before it is dropped.
    pub async fn run(self, ctx: CallContext) -> ToolCallRecord {
        self.run_reporting(ctx, ProgressReporter::disabled()).await
    }

    /// [`Permit::run`], with `progress` handed to the tool for its progress reports.
    pub async fn run_reporting(
        self,
        ctx: CallContext,
        progress: ProgressReporter,
    ) -> ToolCallRecord {
        let Permit {
            tool,
            call,
            tier,
            approval,
        } = self;
        let tool_ctx = ToolContext {
            tool_use_id: call.tool_use_id.clone(),
            session_id: ctx.session_id.clone(),
            channel: ctx.channel.clone(),
            cancel: ctx.cancel.clone(),
            progress,
        };
        let started = Instant::now();
        let running = AssertUnwindSafe(tool.call(call.arguments.clone(), tool_ctx)).catch_unwind();
        let cancelled = async {
            ctx.cancel.cancelled().await;
            tokio::time::sleep(CANCEL_GRACE).await;
        };
        let outcome = tokio::select! {
            outcome = running => match outcome {
                Ok(result) => result,
                Err(panic) => Err(ToolError::Panicked(panic_message(panic.as_ref()))),
            },
            () = cancelled => Err(ToolError::Cancelled),
        };
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (status, result) = match outcome {
            Ok(output) => (
                ToolCallStatus::Success,
                output.into_result(&call.tool_use_id),
            ),
            Err(error) => {
                let status = if error == ToolError::Cancelled {
                    ToolCallStatus::Cancelled
                } else {
                    ToolCallStatus::Error
                };
                let result = ToolResult::text(
                    &call.tool_use_id,
                    ToolResultStatus::Error,
                    error.model_text(),
                );
                (status, result)
            }
        };
        ToolCallRecord {
            tool_use_id: call.tool_use_id,
            tool: call.tool,
            tier: Some(tier),
            arguments: call.arguments,
            status,
            approval,
            result,
            duration_ms,
        }
    }
}

/// Why the gate refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// The tool is not in the catalog.
    UnknownTool,
    /// A tier-2 call that was not approved.
    NotApproved(ApprovalOutcome),
    /// A tier-2 call that was approved, but its approval could not be recorded durably.
    NotRecorded,
}

/// A refused call: it did not run.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub(super) call: GateCall,
    pub(super) tier: Option<Tier>,
    pub(super) reason: RefusalReason,
}

impl Refusal {
    pub fn call(&self) -> &GateCall {
        &self.call
    }

    pub fn tier(&self) -> Option<Tier> {
        self.tier
    }

    pub fn reason(&self) -> RefusalReason {
        self.reason
    }

    /// What the model reads.
    pub fn message(&self) -> String {
        match self.reason {
            RefusalReason::UnknownTool => unknown_tool_text(&self.call.tool),
            RefusalReason::NotApproved(_) => refusal_text(&self.call.tool),
            RefusalReason::NotRecorded => not_recorded_text(&self.call.tool),
        }
    }

    /// The approval recorded for this refusal.
    pub fn approval(&self) -> CallApproval {
        match self.reason {
            RefusalReason::UnknownTool => CallApproval::NotRequired,
            RefusalReason::NotApproved(outcome) => CallApproval::Asked(outcome),
            RefusalReason::NotRecorded => CallApproval::Asked(ApprovalOutcome::Error),
        }
    }

    /// The record of this refused call (status `refused`, an error `toolResult`).
    pub fn into_record(self) -> ToolCallRecord {
        let text = self.message();
        let approval = self.approval();
        ToolCallRecord {
            result: ToolResult::text(&self.call.tool_use_id, ToolResultStatus::Error, text),
            tool_use_id: self.call.tool_use_id,
            tool: self.call.tool,
            tier: self.tier,
            arguments: self.call.arguments,
            status: ToolCallStatus::Refused,
            approval,
            duration_ms: 0,
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolResultContent;
    use serde_json::json;

    #[test]
    fn texts_are_exact() {
        assert_eq!(
            refusal_text("demo_physical_action"),
            "The user did not approve this action: demo_physical_action. Do not perform it; tell the user briefly."
        );
        assert_eq!(
            unknown_tool_text("nope"),
            "Tool 'nope' is not registered; it was not run."
        );
    }

    #[test]
    fn summary_is_one_line_and_bounded() {
        let call = GateCall {
            tool_use_id: "t".into(),
            tool: "x".into(),
            arguments: json!({}),
        };
        let mut record = ToolCallRecord::cancelled(call, None);
        record.result.content = vec![ToolResultContent::Text(format!("a\nb {}", "c".repeat(300)))];
        let summary = record.result_summary();
        assert!(summary.starts_with("a b ccc"));
        assert_eq!(summary.chars().count(), SUMMARY_CHARS + 1);
        assert!(!summary.contains('\n'));
    }
}
