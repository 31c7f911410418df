//! The hub's routine API: what `rpc` serves for routines (list, add, remove, pause, resume, run
//! now, history), each a function of the core's state that `HubCore` delegates to; the start of
//! the engine with the hub; and what `schedule_routine` proposes ([`HubRoutineProposer`]),
//! registered as the model's.
//!
//! Invariants: requests are checked before anything is touched; a tier-2 tool routine is added
//! only from a session, whose agent's gate asks the registration question on the request's
//! channel (as any tier-2 call of that session is asked) and stores the routine only if approved;
//! a routines file that cannot be read leaves routines off (logged, and every routine call says
//! why) rather than stopping the hub; errors map to `CoreError` here, in one place.

use std::sync::{Arc, Weak};

use async_trait::async_trait;

use tracing::{info, warn};

use super::routine_runner::HubRoutineRunner;
use crate::clock::SystemClock;
use crate::gate::{CallContext, TierGate};
use crate::hub::builtin_tools::tool_summaries;
use crate::hub::error::CoreError;
use crate::hub::limits::{check_channel, check_session_id};
use crate::hub::sessions::CoreState;
use crate::routine::{
    CatchUp, Creator, Firing, FiringResult, Routine, RoutineAction, RoutineEngine, RoutineError,
    RoutineView, Schedule, parse_local_time, register, run_by_hand,
};
use crate::store::store_io;
use crate::tool::Tier;
use crate::tool::ToolContext;
use crate::tool::ToolSummary;
use crate::tool::builtin::{RoutineProposal, RoutineProposer};

/// A routine to add, as a client writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct AddRoutine {
    pub name: String,
    /// Exactly one of these three.
    pub cron: String,
    pub every: String,
    pub at: String,
    pub action: RoutineAction,
    pub catch_up: CatchUp,
    /// Replace a routine of the same name (a changed action is asked again).
    pub replace: bool,
    /// The registering session (its agent's gate asks a tier-2 registration); empty: none.
    pub session_id: String,
    /// The registering channel.
    pub channel: String,
    /// Who asks: the owner (a client) or the model (`schedule_routine`, always asked).
    pub created_by: Creator,
}

/// What a manual run started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualRun {
    pub firing: u64,
    /// For a tier-2 tool routine, asked and run before the answer: how it ended.
    pub result: Option<FiringResult>,
}

/// What `GetStatus`, `/status` and `tau doctor` show of the routines.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RoutineStatus {
    pub enabled: bool,
    /// Why routines are off, when they are.
    pub problem: Option<String>,
    pub routines: Vec<RoutineView>,
    /// Routines whose tool is no longer in the catalog, by name.
    pub missing_tools: Vec<(String, String)>,
}

/// The tools an agent may call, as `ListTools` shows them (for a routine's tier).
fn tools(state: &CoreState) -> Vec<ToolSummary> {
    let parts = state.parts();
    tool_summaries(
        &parts.builtin_tools,
        &parts.options.disabled_tools,
        &parts.mcp,
    )
}

fn routine_error(err: RoutineError) -> CoreError {
    match err {
        RoutineError::NotFound(_) => CoreError::NotFound(err.to_string()),
        RoutineError::AlreadyExists(_) | RoutineError::NotApproved { .. } => {
            CoreError::FailedPrecondition(err.to_string())
        }
        RoutineError::TooMany(_) => CoreError::ResourceExhausted(err.to_string()),
        RoutineError::Invalid(_) | RoutineError::UnknownTool(_) => {
            CoreError::InvalidArgument(err.to_string())
        }
        RoutineError::Io { .. }
        | RoutineError::Parse { .. }
        | RoutineError::NewerVersion { .. } => CoreError::Unavailable(err.to_string()),
    }
}

/// Opens the routines file and starts the firing loop (called by `start`).
pub(in crate::hub) fn start_routines(state: &Arc<CoreState>) {
    let Some(path) = state.options().routines_file.clone() else {
        return;
    };
    let runner = Arc::new(HubRoutineRunner {
        state: Arc::downgrade(state),
    });
    match RoutineEngine::open(&path, Arc::new(SystemClock), runner) {
        Ok(engine) => {
            info!(routines = engine.list().len(), "routines loaded");
            if state.routines.set(engine.clone()).is_ok() {
                tokio::spawn(engine.run());
            }
        }
        Err(err) => warn!("routines are off: {err}"),
    }
}

fn engine(state: &CoreState) -> Result<&RoutineEngine, CoreError> {
    state.routines.get().ok_or_else(|| {
        CoreError::FailedPrecondition(match &state.options().routines_file {
            Some(path) => format!(
                "routines are off: {} could not be read (see the hub log)",
                path.display()
            ),
            None => "routines are off in this hub".to_owned(),
        })
    })
}

pub(in crate::hub) fn list_routines(state: &CoreState) -> Result<Vec<RoutineView>, CoreError> {
    Ok(engine(state)?.list())
}

/// Adds (or replaces) a routine; a tier-2 tool action, or any routine the model proposes,
/// waits for its registration approval.
pub(in crate::hub) async fn add_routine(
    state: &Arc<CoreState>,
    request: AddRoutine,
) -> Result<RoutineView, CoreError> {
    let engine = engine(state)?;
    let channel = check_channel(&request.channel)?;
    let schedule = routine_schedule(engine, &request)?;
    let mut routine = Routine::new(
        &request.name,
        schedule,
        request.action.clone(),
        request.catch_up,
        engine.now(),
    );
    routine.created_by = request.created_by;
    let asked = request.created_by == Creator::Model
        || match &request.action {
            RoutineAction::Tool { tool, .. } => is_tier_two(state, tool),
            RoutineAction::Prompt { .. } => false,
        };
    if request.session_id.is_empty() && asked {
        return Err(CoreError::InvalidArgument(
            "a tier-2 routine is registered from a session: its approval is asked there (give the session id)".to_owned(),
        ));
    }
    let (gate, ctx, on_pending) = asking_gate(state, &request.session_id, channel).await?;
    let added = register(&gate, engine, routine, request.replace, &ctx, &on_pending)
        .await
        .map_err(routine_error);
    // A question asked outside a turn: its records reach the seed's files now.
    if let Some(runtime) = state.open_runtime(&request.session_id).await {
        runtime.flush_session().await;
    }
    added
}

fn is_tier_two(state: &CoreState, tool: &str) -> bool {
    tools(state)
        .iter()
        .any(|t| t.name == *tool && t.tier == Some(Tier::Physical))
}

/// The gate a routine question is asked through: the agent's gate of `session_id` (on
/// `channel`), its catalog refreshed as a turn's start refreshes it, or with no session a gate
/// over the catalog a session would get now (node tools included) that can ask nobody. The
/// callback marks a question ready to show once recorded (outside a turn no events precede
/// it).
async fn asking_gate(
    state: &Arc<CoreState>,
    session_id: &str,
    channel: String,
) -> Result<
    (
        TierGate,
        CallContext,
        impl Fn(&crate::gate::ApprovalRequest) + Send + Sync + use<>,
    ),
    CoreError,
> {
    let mut readiness = None;
    let gate = if session_id.is_empty() {
        // A session's catalog as a turn would start with it now, node tools included.
        let parts = state.parts();
        let catalog = parts
            .builtin_tools
            .catalog(&parts.options.disabled_tools, &parts.mcp)
            .map_err(|e| CoreError::Unavailable(e.to_string()))?;
        TierGate::builder(Arc::new(catalog)).build()
    } else {
        check_session_id(session_id)?;
        let runtime = state.runtime(session_id, None).await?;
        readiness = Some(Arc::clone(&runtime.readiness));
        let agent = runtime.agent().0;
        agent.refresh_catalog();
        agent.gate().clone()
    };
    let ctx = CallContext {
        session_id: session_id.to_owned(),
        channel,
        cancel: state.stop_token().child_token(),
    };
    let on_pending = move |asked: &crate::gate::ApprovalRequest| {
        if let Some(readiness) = &readiness {
            readiness.mark_flushed(&asked.approval_id);
        }
    };
    Ok((gate, ctx, on_pending))
}

fn routine_schedule(engine: &RoutineEngine, request: &AddRoutine) -> Result<Schedule, CoreError> {
    let given = [&request.cron, &request.every, &request.at]
        .iter()
        .filter(|s| !s.trim().is_empty())
        .count();
    if given != 1 {
        return Err(CoreError::InvalidArgument(
            "a routine needs exactly one schedule: a cron expression, an interval or a time"
                .to_owned(),
        ));
    }
    let schedule = if !request.cron.trim().is_empty() {
        Schedule::cron(&request.cron)
    } else if !request.every.trim().is_empty() {
        Schedule::every(&request.every, engine.now())
    } else {
        parse_local_time(&request.at, engine.zone()).map(|at| Schedule::Once { at })
    };
    schedule.map_err(|e| CoreError::InvalidArgument(e.to_string()))
}

pub(in crate::hub) fn remove_routine(state: &CoreState, name: &str) -> Result<(), CoreError> {
    let engine = engine(state)?;
    store_io(|| engine.remove(name)).map_err(routine_error)
}

pub(in crate::hub) fn pause_routine(
    state: &CoreState,
    name: &str,
    paused: bool,
) -> Result<RoutineView, CoreError> {
    let engine = engine(state)?;
    store_io(|| engine.set_paused(name, paused)).map_err(routine_error)
}

/// Fires a routine now. A tier-2 tool routine is asked first on `session_id` and `channel`
/// (every time; refused without a session) and run before this returns; anything else is
/// started and runs on.
pub(in crate::hub) async fn run_routine(
    state: &Arc<CoreState>,
    name: &str,
    session_id: &str,
    channel: &str,
) -> Result<ManualRun, CoreError> {
    let engine = engine(state)?;
    let view = engine.get(name).map_err(routine_error)?;
    let tier_two = matches!(&view.routine.action,
        RoutineAction::Tool { tool, .. } if is_tier_two(state, tool));
    if !tier_two {
        let firing = store_io(|| engine.run_now(name)).map_err(routine_error)?;
        return Ok(ManualRun {
            firing,
            result: None,
        });
    }
    if session_id.is_empty() {
        return Err(CoreError::FailedPrecondition(format!(
            "routine {name} calls a tier-2 tool: a manual run is asked in a session every time (run `tau routine run {name}` in a terminal)"
        )));
    }
    let channel = check_channel(channel)?;
    let (gate, ctx, on_pending) = asking_gate(state, session_id, channel).await?;
    let tool_use_id = format!("routine-{name}-manual-{}", state.new_turn_id());
    let run = run_by_hand(&gate, engine, name, tool_use_id.clone(), &ctx, &on_pending).await;
    // Outside a turn, the call's record is stored by now: take it back from the recorder so
    // nothing accumulates between turns.
    let runtime = state.runtime(session_id, None).await?;
    runtime.agent().1.take_tool_call(&tool_use_id);
    runtime.flush_session().await;
    let (firing, result) = run.map_err(routine_error)?;
    Ok(ManualRun { firing, result })
}

pub(in crate::hub) fn routine_history(
    state: &CoreState,
    name: &str,
) -> Result<Vec<Firing>, CoreError> {
    engine(state)?.history(name).map_err(routine_error)
}

/// The routines as status reports show them.
pub(in crate::hub) fn routine_status(state: &CoreState) -> RoutineStatus {
    let Ok(engine) = engine(state) else {
        return RoutineStatus {
            enabled: false,
            problem: engine(state).err().map(|e| e.to_string()),
            ..RoutineStatus::default()
        };
    };
    let tools = tools(state);
    let routines = engine.list();
    let missing_tools = routines
        .iter()
        .filter_map(|view| match &view.routine.action {
            RoutineAction::Tool { tool, .. } if !tools.iter().any(|t| t.name == *tool) => {
                Some((view.routine.name.clone(), tool.clone()))
            }
            _ => None,
        })
        .collect();
    RoutineStatus {
        enabled: true,
        problem: None,
        routines,
        missing_tools,
    }
}

/// What `schedule_routine` proposes, registered as `AddRoutine` from the calling session and
/// channel (so a tier-2 action is asked there, inside the running turn).
pub(crate) struct HubRoutineProposer {
    pub(crate) state: Weak<CoreState>,
}

#[async_trait]
impl RoutineProposer for HubRoutineProposer {
    async fn propose(
        &self,
        proposal: RoutineProposal,
        ctx: &ToolContext,
    ) -> Result<String, String> {
        let state = self.state.upgrade().ok_or("the hub is stopping")?;
        let action = match (proposal.prompt, proposal.tool) {
            (Some(text), None) => RoutineAction::Prompt {
                text,
                approval_channel: ctx.channel.clone(),
            },
            (None, Some((tool, arguments))) => RoutineAction::Tool { tool, arguments },
            _ => return Err("give exactly one action: a prompt or a tool".to_owned()),
        };
        let name = proposal.name;
        let view = add_routine(
            &state,
            AddRoutine {
                name: name.clone(),
                cron: proposal.cron,
                every: proposal.every,
                at: proposal.at,
                action,
                catch_up: if proposal.skip_missed {
                    CatchUp::Skip
                } else {
                    CatchUp::RunOnce
                },
                replace: false,
                session_id: ctx.session_id.clone(),
                channel: ctx.channel.clone(),
                created_by: Creator::Model,
            },
        )
        .await
        .map_err(|e| e.to_string())?;
        let next = view.next_firing.map_or_else(
            || "none".to_owned(),
            |t| {
                t.to_zoned(crate::clock::istanbul())
                    .strftime("%Y-%m-%d %H:%M")
                    .to_string()
            },
        );
        Ok(format!(
            "Routine {name} registered ({}); next firing {next} (Europe/Istanbul).",
            view.schedule_text
        ))
    }
}

impl RoutineStatus {
    /// One line per problem worth a warning: routines off, or a routine whose tool is gone.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> = self.problem.iter().cloned().collect();
        warnings.extend(self.missing_tools.iter().map(|(routine, tool)| {
            format!("routine {routine} calls {tool}, which is no longer in the tool catalog; its firings fail (remove it or give it another tool)")
        }));
        warnings
    }

    /// The `routines` key of `GET /status`.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        let items: Vec<serde_json::Value> = self
            .routines
            .iter()
            .map(|view| {
                serde_json::json!({
                    "name": view.routine.name,
                    "schedule": view.schedule_text,
                    "paused": view.routine.paused,
                    "next_firing": view.next_firing.map(|t| t.to_string()),
                    "last_outcome": view.routine.history.back().map(|f| f.outcome.as_str()),
                })
            })
            .collect();
        let mut map = serde_json::Map::new();
        map.insert(
            "routines".to_owned(),
            serde_json::json!({
                "enabled": self.enabled,
                "count": self.routines.len(),
                "paused": self.routines.iter().filter(|v| v.routine.paused).count(),
                "warnings": self.warnings(),
                "items": items,
            }),
        );
        map
    }
}
