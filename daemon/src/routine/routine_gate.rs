//! Routines and the tier gate: registering a routine (one approval for a tier-2 tool action or for
//! anything the model proposes), firing a tool action (a scheduled firing exempt from its prompt
//! through the gate's exemption mechanism) and running a tier-2 tool routine by hand (asked).
//!
//! Invariants:
//! - A routine that needs a registration question (a tier-2 tool action, or any routine the model
//!   proposed) is stored only after that question, asked by the gate on the registering channel,
//!   ended `approved`. The question shows the whole routine (tool or prompt, exact arguments,
//!   effect, name, schedule, catch-up rule, session, and an MCP tool's server and own name), and
//!   the stored approval binds all of it ([`ShownRoutine`]); a replace that changes any of it is
//!   asked again (one that changes nothing keeps its approval), and a refused replace keeps the
//!   old routine.
//! - Only a scheduled firing (on time, late or caught up) is exempt, and only while the stored
//!   approval covers the routine as it stands and its tool as the catalog resolves it now (the
//!   permit's tool is checked again before it runs); the exemption is registered on the firing's
//!   gate for that one call and undone before anything else can use the gate; the call is checked,
//!   run and recorded by the gate (approval `exempt`, session `routine-<name>`, tool use id
//!   `routine-<name>-<firing>`). A tier-2 firing without a covering approval is refused without
//!   asking anyone, and says why.
//! - A manual run of a tier-2 tool routine is asked on the caller's session and channel like any
//!   tier-2 call, every time, and recorded there `approved` or `rejected`, never `exempt`.

use std::convert::Infallible;

use jiff::tz::TimeZone;
use serde_json::{Value, json};
use tracing::{info, warn};

use super::firing_plan::DueFiring;
use super::routine_engine::{FiringResult, RoutineEngine, RoutineView};
use super::routine_error::RoutineError;
use super::routine_record::{
    Creator, FiringCause, RegistrationApproval, Routine, RoutineAction, ShownRoutine, ToolIdentity,
    check_action, check_name,
};
use crate::gate::{
    ApprovalOutcome, ApprovalRequest, CallApproval, CallContext, Checked, GateCall, Permit,
    RefusalReason, TierGate, ToolCallRecord, ToolCallStatus, Verdict,
};
use crate::tool::builtin::ScheduleRoutine;
use crate::tool::{Tier, Tool};

/// The sentence a registration question adds after the effect: everything a firing depends on
/// that the tool and its arguments do not show.
pub fn registration_note(
    routine: &Routine,
    zone: &TimeZone,
    tool: Option<&ToolIdentity>,
) -> String {
    let catch_up = match routine.catch_up {
        super::CatchUp::RunOnce => "a firing missed while the hub is down runs once at start",
        super::CatchUp::Skip => "a firing missed while the hub is down is skipped",
    };
    let origin = match tool {
        Some(identity) if identity.distribution != crate::tool::BUILTIN_DISTRIBUTION => format!(
            "; the tool is {:?} of {}",
            identity.source_name, identity.distribution
        ),
        _ => String::new(),
    };
    let what = match &routine.action {
        RoutineAction::Tool { .. } => {
            "once approved, this exact call runs at every scheduled firing without asking again"
                .to_owned()
        }
        RoutineAction::Prompt {
            approval_channel, ..
        } => format!(
            "once approved, this prompt runs as a turn at every scheduled firing; its tier-2 calls are still asked on channel {approval_channel}"
        ),
    };
    format!(
        "Routine {:?} ({}; {catch_up}; recorded in session {}{origin}): {what}.",
        routine.name,
        routine.schedule.describe(zone),
        routine.session_id(),
    )
}

/// The identity of `tool` as `gate`'s catalog resolves it now, with its tier.
pub fn tool_identity(gate: &TierGate, tool: &str) -> Result<(Tier, ToolIdentity), RoutineError> {
    let catalog = gate.catalog();
    let entry = catalog
        .get(tool)
        .ok_or_else(|| RoutineError::UnknownTool(tool.to_owned()))?;
    Ok((entry.tier(), identity_of(entry.tool().as_ref())))
}

fn identity_of(tool: &dyn Tool) -> ToolIdentity {
    ToolIdentity {
        distribution: tool.distribution().to_owned(),
        source_name: tool.source_name().to_owned(),
        effect: tool.spec().effect().to_owned(),
        claim: tool.claim().map(str::to_owned),
    }
}

/// Registers `routine` (with `replace`, in place of the one of the same name) as registered by
/// `routine.created_by`. A routine that needs a question (see the module doc) is asked on
/// `ctx.channel` first and stored only if approved (stamped with the engine's clock).
/// `on_pending` is told the question once its `pending` event is recorded, before the wait (the
/// hub marks it ready to show: no turn events precede it).
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
    let (tier, identity) = match &routine.action {
        RoutineAction::Tool { tool, .. } => {
            let (tier, identity) = tool_identity(gate, tool)?;
            (Some(tier), Some(identity))
        }
        RoutineAction::Prompt { .. } => (None, None),
    };
    let asked = tier == Some(Tier::Physical) || routine.created_by == Creator::Model;
    if asked {
        let kept = engine
            .get(&routine.name)
            .ok()
            .and_then(|old| old.routine.approval)
            .filter(|approval| replace && approval.covers(&routine, identity.as_ref()));
        routine.approval = match kept {
            Some(approval) => Some(approval),
            None => Some(ask(gate, engine, &routine, identity, ctx, on_pending).await?),
        };
    }
    engine
        .saving(move |engine| engine.add(routine, replace))
        .await
}

/// The call a registration question shows: the routine's tool and arguments, or for a prompt
/// routine `schedule_routine` with the prompt.
fn shown_call(routine: &Routine) -> GateCall {
    let (tool, arguments) = match &routine.action {
        RoutineAction::Tool { tool, arguments } => (tool.clone(), arguments.clone()),
        RoutineAction::Prompt {
            text,
            approval_channel,
        } => (
            ScheduleRoutine::NAME.to_owned(),
            json!({"name": routine.name, "prompt": text, "approval_channel": approval_channel}),
        ),
    };
    GateCall {
        tool_use_id: format!("routine-{}-registration", routine.name),
        tool,
        arguments,
    }
}

async fn ask(
    gate: &TierGate,
    engine: &RoutineEngine,
    routine: &Routine,
    identity: Option<ToolIdentity>,
    ctx: &CallContext,
    on_pending: &(dyn Fn(&ApprovalRequest) + Send + Sync),
) -> Result<RegistrationApproval, RoutineError> {
    let call = shown_call(routine);
    let tool = call.tool.clone();
    let not_approved = |outcome: &str| RoutineError::NotApproved {
        name: routine.name.clone(),
        outcome: outcome.to_owned(),
    };
    let note = registration_note(routine, engine.zone(), identity.as_ref());
    let pending = match gate.begin_registration(call, ctx, &note) {
        Checked::Pending(pending) => pending,
        Checked::Ready(Verdict::Refused(refusal)) => {
            return Err(match refusal.reason() {
                RefusalReason::UnknownTool => RoutineError::UnknownTool(tool),
                other => not_approved(&refusal_word(other)),
            });
        }
        // A registration is always asked; a permit without a question is not an approval.
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
                channel: ctx.channel.clone(),
                approved_at: now,
                shown: Some(ShownRoutine::of(routine, identity)),
            })
        }
        Verdict::Allowed(permit) => Err(not_approved(permit.approval().as_str())),
        Verdict::Refused(refusal) => Err(not_approved(&refusal_word(refusal.reason()))),
    }
}

/// Runs tool routine `name` by hand from the caller's session (`gate` and `ctx` are the
/// caller's). A tier-2 tool is asked there first, like any tier-2 call, and recorded there
/// `approved` or `rejected`; the firing (cause `manual`) is claimed only once that is decided.
/// A lower tier runs through the engine as any firing. The asked call has `tool_use_id`. Returns
/// the firing's number and, for a tier-2 run, how it ended.
pub async fn run_by_hand(
    gate: &TierGate,
    engine: &RoutineEngine,
    name: &str,
    tool_use_id: String,
    ctx: &CallContext,
    on_pending: &(dyn Fn(&ApprovalRequest) + Send + Sync),
) -> Result<(u64, Option<FiringResult>), RoutineError> {
    let routine = engine.get(name)?.routine;
    let RoutineAction::Tool { tool, arguments } = &routine.action else {
        return Ok((engine.run_now(name)?, None));
    };
    let (tier, _) = tool_identity(gate, tool)?;
    if tier != Tier::Physical {
        return Ok((engine.run_now(name)?, None));
    }
    let call = GateCall {
        tool_use_id,
        tool: tool.clone(),
        arguments: arguments.clone(),
    };
    let not_approved = |outcome: &str| RoutineError::NotApproved {
        name: name.to_owned(),
        outcome: outcome.to_owned(),
    };
    let verdict = match gate.begin(call, ctx) {
        Checked::Pending(pending) => {
            on_pending(pending.request());
            pending.wait().await
        }
        // A tier-2 call of the caller's session is always asked: no exemption covers it there.
        Checked::Ready(Verdict::Allowed(_)) => return Err(not_approved("not asked")),
        Checked::Ready(refused) => refused,
    };
    let permit = match verdict {
        Verdict::Allowed(permit) => permit,
        Verdict::Refused(refusal) => {
            let record = refusal.into_record();
            gate.record(&record, ctx);
            return Err(not_approved(record.approval.as_str()));
        }
    };
    let due = engine.claim_now(name)?;
    let record = permit.run(ctx.clone()).await;
    gate.record(&record, ctx);
    let result = result_of(&record);
    engine.finish(&due, &result).await;
    Ok((due.number, Some(result)))
}

fn refusal_word(reason: RefusalReason) -> String {
    match reason {
        RefusalReason::UnknownTool => "unknown_tool".into(),
        RefusalReason::NotApproved(outcome) => outcome.as_str().into(),
        RefusalReason::NotRecorded => "not_recorded".into(),
    }
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
    let (tier, identity) = match tool_identity(gate, tool) {
        Ok(found) => found,
        Err(err) => return failed(&err.to_string()),
    };
    let scheduled = due.cause != FiringCause::Manual;
    let covered = scheduled
        && due.action == routine.action
        && routine
            .approval
            .as_ref()
            .is_some_and(|approval| approval.covers(routine, Some(&identity)));
    if tier == Tier::Physical && !covered {
        let why = if scheduled {
            format!(
                "{tool} is tier 2 and routine {:?} as it stands (its tool {} of {}, arguments, schedule, catch-up rule, session) is not what its approval showed; it was not run; register it again",
                routine.name, identity.source_name, identity.distribution
            )
        } else {
            format!(
                "{tool} is tier 2: a manual run of routine {:?} is asked in the calling session; it was not run",
                routine.name
            )
        };
        warn!(routine = %routine.name, "{why}");
        return failed(&why);
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
        Checked::Ready(Verdict::Allowed(permit)) if !same_tool(&permit, &identity) => {
            // The catalog changed between the check and the gate: what would run is not what
            // was approved.
            let call = permit.call().clone();
            drop(permit);
            warn!(routine = %routine.name, "the tool changed while the firing began; it was not run");
            ToolCallRecord::cancelled(call, Some(tier))
        }
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
    result_of(&record)
}

fn same_tool(permit: &Permit, identity: &ToolIdentity) -> bool {
    identity_of(permit.tool().as_ref()) == *identity
}

fn result_of(record: &ToolCallRecord) -> FiringResult {
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
