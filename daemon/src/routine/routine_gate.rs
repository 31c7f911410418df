//! Routines and the tier gate: registering a routine (one approval for a tier-2 tool action) and
//! firing a tool action (exempt from its prompt through the gate's exemption mechanism).
//!
//! Invariants: a tier-2 tool routine is stored only after its registration question, asked by the
//! gate like any tier-2 call (tool, exact arguments, effect, plus the routine's name and schedule)
//! on the registering channel, ended `approved`; the stored approval names that tool and those
//! arguments, and a changed action is asked again (a replaced routine whose action is unchanged
//! keeps its approval). A firing is exempt only while the stored approval covers the routine's
//! action exactly; the exemption is registered on the firing's gate for that one call and undone
//! before anything else can use the gate, and the call is checked, run and recorded by the gate
//! (approval `exempt`, session `routine-<name>`, tool use id `routine-<name>-<firing>`). A tier-2
//! action without a covering approval fails its firing without asking anyone.

use std::convert::Infallible;

use jiff::tz::TimeZone;
use serde_json::Value;
use tracing::info;

use super::firing_plan::DueFiring;
use super::routine_engine::{FiringResult, RoutineEngine, RoutineView};
use super::routine_error::RoutineError;
use super::routine_record::{
    RegistrationApproval, Routine, RoutineAction, check_action, check_name,
};
use crate::gate::{
    ApprovalOutcome, ApprovalRequest, CallApproval, CallContext, Checked, GateCall, RefusalReason,
    TierGate, ToolCallRecord, ToolCallStatus, Verdict,
};
use crate::tool::Tier;

/// The sentence a registration question adds after the tool's effect.
pub fn registration_note(routine: &Routine, zone: &TimeZone) -> String {
    format!(
        "Routine {:?}, {}: once approved, this exact call runs at every firing without asking again.",
        routine.name,
        routine.schedule.describe(zone)
    )
}

/// Registers `routine` (with `replace`, in place of the one of the same name). A tier-2 tool
/// action is asked on `ctx.channel` first and stored only if approved (stamped with the engine's
/// clock). `on_pending` is told the question once its `pending` event is recorded, before the
/// wait (the hub marks it ready to show: no turn events precede it).
pub async fn register(
    gate: &TierGate,
    engine: &RoutineEngine,
    mut routine: Routine,
    replace: bool,
    ctx: &CallContext,
    on_pending: &(dyn Fn(&ApprovalRequest) + Send + Sync),
) -> Result<RoutineView, RoutineError> {
    check_name(&routine.name).map_err(RoutineError::Invalid)?;
    check_action(&routine.action).map_err(RoutineError::Invalid)?;
    if !replace && engine.get(&routine.name).is_ok() {
        return Err(RoutineError::AlreadyExists(routine.name));
    }
    routine.approval = None;
    if let RoutineAction::Tool { tool, arguments } = &routine.action {
        let tier = tool_tier(gate, tool)?;
        if tier == Tier::Physical {
            let kept = engine
                .get(&routine.name)
                .ok()
                .and_then(|old| old.routine.approval)
                .filter(|approval| replace && approval.covers(&routine.action));
            routine.approval = match kept {
                Some(approval) => Some(approval),
                None => Some(ask(gate, engine, &routine, tool, arguments, ctx, on_pending).await?),
            };
        }
    }
    engine
        .saving(move |engine| engine.add(routine, replace))
        .await
}

async fn ask(
    gate: &TierGate,
    engine: &RoutineEngine,
    routine: &Routine,
    tool: &str,
    arguments: &Value,
    ctx: &CallContext,
    on_pending: &(dyn Fn(&ApprovalRequest) + Send + Sync),
) -> Result<RegistrationApproval, RoutineError> {
    let call = GateCall {
        tool_use_id: format!("routine-{}-registration", routine.name),
        tool: tool.to_owned(),
        arguments: arguments.clone(),
    };
    let not_approved = |outcome: &str| RoutineError::NotApproved {
        name: routine.name.clone(),
        outcome: outcome.to_owned(),
    };
    let note = registration_note(routine, engine.zone());
    let pending = match gate.begin_registration(call, ctx, &note) {
        Checked::Pending(pending) => pending,
        Checked::Ready(Verdict::Refused(refusal)) => {
            return Err(match refusal.reason() {
                RefusalReason::UnknownTool => RoutineError::UnknownTool(tool.to_owned()),
                other => not_approved(&refusal_word(other)),
            });
        }
        // A tier-2 registration is always asked; a permit without a question is not an approval.
        Checked::Ready(Verdict::Allowed(_)) => return Err(not_approved("not asked")),
    };
    let approval_id = pending.request().approval_id.clone();
    on_pending(pending.request());
    let verdict = pending.wait().await;
    let now = engine.now();
    match verdict {
        Verdict::Allowed(permit)
            if permit.approval() == CallApproval::Asked(ApprovalOutcome::Approved) =>
        {
            // The permit is dropped unused: the approval is for the firings, not for now.
            drop(permit);
            info!(routine = %routine.name, %approval_id, channel = %ctx.channel, "routine registration approved");
            Ok(RegistrationApproval {
                approval_id,
                tool: tool.to_owned(),
                arguments: arguments.clone(),
                channel: ctx.channel.clone(),
                approved_at: now,
            })
        }
        Verdict::Allowed(permit) => Err(not_approved(permit.approval().as_str())),
        Verdict::Refused(refusal) => Err(not_approved(&refusal_word(refusal.reason()))),
    }
}

fn refusal_word(reason: RefusalReason) -> String {
    match reason {
        RefusalReason::UnknownTool => "unknown_tool".into(),
        RefusalReason::NotApproved(outcome) => outcome.as_str().into(),
        RefusalReason::NotRecorded => "not_recorded".into(),
    }
}

fn tool_tier(gate: &TierGate, tool: &str) -> Result<Tier, RoutineError> {
    gate.catalog()
        .get(tool)
        .map(|entry| entry.tier())
        .ok_or_else(|| RoutineError::UnknownTool(tool.to_owned()))
}

/// Fires a tool routine through `gate` (built for the routine's session, used by nothing else
/// while it runs) and records the call there. Returns how the firing ended.
pub async fn fire_tool_action(
    gate: &TierGate,
    routine: &Routine,
    due: &DueFiring,
    ctx: &CallContext,
) -> FiringResult {
    let RoutineAction::Tool { tool, arguments } = &due.action else {
        return failed("not a tool routine");
    };
    let tier = match tool_tier(gate, tool) {
        Ok(tier) => tier,
        Err(err) => return failed(&err.to_string()),
    };
    let covered = routine
        .approval
        .as_ref()
        .is_some_and(|approval| approval.covers(&due.action));
    if tier == Tier::Physical && !covered {
        return failed(&format!(
            "{tool} is tier 2 and this exact call was not approved for routine {:?}; register it again",
            routine.name
        ));
    }
    let call = GateCall {
        tool_use_id: format!("routine-{}-{}", routine.name, due.number),
        tool: tool.clone(),
        arguments: arguments.clone(),
    };
    let exemption = covered.then(|| {
        let (tool, arguments) = (tool.clone(), arguments.clone());
        gate.add_exemption(move |t: &str, a: &Value| {
            Ok::<_, Infallible>(t == tool && *a == arguments)
        })
    });
    let checked = gate.begin(call, ctx);
    if let Some(handle) = exemption {
        handle.undo();
    }
    let record = match checked {
        Checked::Ready(Verdict::Allowed(permit)) => permit.run(ctx.clone()).await,
        Checked::Ready(Verdict::Refused(refusal)) => refusal.into_record(),
        // The exemption did not answer (it cannot fail, but the gate may still ask): a routine
        // never waits on a person here, so the question is dropped and settled as cancelled.
        Checked::Pending(pending) => {
            let call = pending.request().clone();
            drop(pending);
            ToolCallRecord::cancelled(
                GateCall {
                    tool_use_id: call.tool_use_id,
                    tool: call.tool,
                    arguments: call.arguments,
                },
                Some(tier),
            )
        }
    };
    gate.record(&record, ctx);
    FiringResult {
        succeeded: record.status == ToolCallStatus::Success,
        detail: format!(
            "{} ({}): {}",
            record.tool,
            record.approval.as_str(),
            record.result_summary()
        ),
    }
}

fn failed(detail: &str) -> FiringResult {
    FiringResult {
        succeeded: false,
        detail: detail.to_owned(),
    }
}
