//! Runs the tool calls of one assistant message through the gate.
//!
//! Invariants: every toolUse gets exactly one toolResult, returned in toolUse order, on every path
//! (unreadable input, unknown tool, refusal, cancel, a tool error or panic); the tool is looked up
//! before its input or a cancel is considered, so an unknown tool is always refused as unknown;
//! each call goes `gate.begin`/`wait` → `Permit::run` with nothing in between (the call runs in
//! the turn's task and is polled before anything else is awaited); calls run concurrently, in
//! that one task, unless any registered tool is tier 2, then one at a time (so approvals are
//! asked one at a time too); an approved call's `ApprovalDecided` comes before its progress and
//! its result; every call is recorded by the gate, inside its `tool_call` span
//! (`super::trace_spans`); a running tool's progress reports are relayed
//! (`super::progress_relay`) until it returns, so they all come before its `ToolResult`.

use futures::future::join_all;
use tracing::Instrument;

use super::progress_relay::{relay_progress, until_done};
use super::trace_spans::TurnTrace;
use super::turn_event::{TurnEvent, TurnOutput};
use crate::gate::{
    ApprovalOutcome, ApprovalRequest, CallContext, Checked, GateCall, RefusalReason, TierGate,
    ToolCallRecord, Verdict,
};
use crate::message::{ToolResult, ToolUse};
use crate::model::InvalidToolInput;
use crate::tool::ProgressReporter;

/// Runs `uses` and returns their results in the same order.
pub(crate) async fn run_tools(
    gate: &TierGate,
    uses: Vec<ToolUse>,
    invalid: &[InvalidToolInput],
    ctx: &CallContext,
    trace: &TurnTrace,
    out: &TurnOutput,
) -> Vec<ToolResult> {
    // Each call runs in its own span, also when the calls run side by side.
    let traced = |tool_use: ToolUse| {
        let span = trace.tool_call_span(&tool_use.name, &tool_use.tool_use_id);
        run_one(gate, tool_use, invalid, ctx, out).instrument(span)
    };
    if gate.catalog().has_physical() {
        let mut results = Vec::with_capacity(uses.len());
        for tool_use in uses {
            results.push(traced(tool_use).await);
        }
        results
    } else {
        join_all(uses.into_iter().map(traced)).await
    }
}

async fn run_one(
    gate: &TierGate,
    tool_use: ToolUse,
    invalid: &[InvalidToolInput],
    ctx: &CallContext,
    out: &TurnOutput,
) -> ToolResult {
    let call = GateCall {
        tool_use_id: tool_use.tool_use_id,
        tool: tool_use.name,
        arguments: tool_use.input,
    };
    // The tool is looked up first: an unknown tool is refused as unknown (with its warning and
    // error event), whatever its input or a cancel.
    let tier = gate.catalog().tier_of(&call.tool);
    let record = if tier.is_none() {
        check_and_run(gate, call, ctx, out).await
    } else if let Some(bad) = invalid.iter().find(|i| i.tool_use_id == call.tool_use_id) {
        ToolCallRecord::invalid_input(call, tier, &bad.problem)
    } else if ctx.cancel.is_cancelled() {
        ToolCallRecord::cancelled(call, tier)
    } else {
        check_and_run(gate, call, ctx, out).await
    };
    // The turn stores the results message right after the calls: their records go with it.
    gate.record_with_result(&record, ctx);
    out.send(TurnEvent::ToolResult {
        tool_use_id: record.tool_use_id.clone(),
        tool: record.tool.clone(),
        tier: record.tier,
        status: record.status,
        approval: record.approval,
        summary: record.result_summary(),
        duration_ms: record.duration_ms,
    })
    .await;
    record.result
}

async fn check_and_run(
    gate: &TierGate,
    call: GateCall,
    ctx: &CallContext,
    out: &TurnOutput,
) -> ToolCallRecord {
    let (verdict, asked) = match gate.begin(call, ctx) {
        Checked::Ready(verdict) => (verdict, None),
        Checked::Pending(pending) => {
            let request = pending.request().clone();
            out.send(TurnEvent::ApprovalAsked(request.clone())).await;
            (pending.wait().await, Some(request))
        }
    };
    match verdict {
        Verdict::Refused(refusal) => {
            if let (Some(request), RefusalReason::NotApproved(decision)) =
                (&asked, refusal.reason())
            {
                out.send(decided(request, decision)).await;
            }
            refusal.into_record()
        }
        Verdict::Allowed(permit) => {
            let tool_use_id = permit.call().tool_use_id.clone();
            let tool = permit.call().tool.clone();
            let (reporter, watch) = ProgressReporter::channel();
            // The tool runs in this task: a spawned one cost a hop to another worker and back,
            // more than most tools take. It is polled first, before anything else is awaited.
            let running = permit.run_reporting(ctx.clone(), reporter);
            let mut announced = false;
            let beside = async {
                if let Some(request) = &asked {
                    out.send(decided(request, ApprovalOutcome::Approved)).await;
                    announced = true;
                }
                relay_progress(watch, tool_use_id, tool, out).await;
            };
            let record = until_done(running, beside).await;
            if let Some(request) = &asked
                && !announced
            {
                // The call returned before its approval was announced: announced now, still
                // before its result.
                out.send(decided(request, ApprovalOutcome::Approved)).await;
            }
            record
        }
    }
}

fn decided(request: &ApprovalRequest, decision: ApprovalOutcome) -> TurnEvent {
    TurnEvent::ApprovalDecided {
        approval_id: request.approval_id.clone(),
        tool_use_id: request.tool_use_id.clone(),
        tool: request.tool.clone(),
        decision,
    }
}
