//! The hub's routine API: what `rpc` serves for routines (list, add, remove, pause, resume, run
//! now, history) and the start of the engine with the hub.
//!
//! Invariants: requests are checked before anything is touched; a tier-2 tool routine is added
//! only from a session, whose agent's gate asks the registration question on the request's
//! channel (as any tier-2 call of that session is asked) and stores the routine only if approved;
//! a routines file that cannot be read leaves routines off (logged, and every routine call says
//! why) rather than stopping the hub; errors map to `CoreError` here, in one place.

use std::sync::Arc;

use tracing::{info, warn};

use super::core::HubCore;
use super::error::CoreError;
use super::limits::{check_channel, check_session_id};
use super::routine_runner::HubRoutineRunner;
use crate::clock::SystemClock;
use crate::gate::{CallContext, TierGate};
use crate::mcp::hub_catalog;
use crate::routine::{
    CatchUp, Creator, Firing, FiringResult, Routine, RoutineAction, RoutineEngine, RoutineError,
    RoutineView, Schedule, parse_local_time, register, run_by_hand,
};
use crate::store::store_io;
use crate::tool::Tier;

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

impl HubCore {
    /// Opens the routines file and starts the firing loop (called by `start`).
    pub(crate) fn start_routines(&self) {
        let Some(path) = self.options().routines_file.clone() else {
            return;
        };
        let runner = Arc::new(HubRoutineRunner {
            core: self.downgrade(),
        });
        match RoutineEngine::open(&path, Arc::new(SystemClock), runner) {
            Ok(engine) => {
                info!(routines = engine.list().len(), "routines loaded");
                if self.set_routines(engine.clone()) {
                    tokio::spawn(engine.run());
                }
            }
            Err(err) => warn!("routines are off: {err}"),
        }
    }

    fn engine(&self) -> Result<&RoutineEngine, CoreError> {
        self.routines().ok_or_else(|| {
            CoreError::FailedPrecondition(match &self.options().routines_file {
                Some(path) => format!(
                    "routines are off: {} could not be read (see the hub log)",
                    path.display()
                ),
                None => "routines are off in this hub".to_owned(),
            })
        })
    }

    pub fn list_routines(&self) -> Result<Vec<RoutineView>, CoreError> {
        Ok(self.engine()?.list())
    }

    /// Adds (or replaces) a routine; a tier-2 tool action, or any routine the model proposes,
    /// waits for its registration approval.
    pub async fn add_routine(&self, request: AddRoutine) -> Result<RoutineView, CoreError> {
        let engine = self.engine()?;
        let channel = check_channel(&request.channel)?;
        let schedule = self.routine_schedule(engine, &request)?;
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
                RoutineAction::Tool { tool, .. } => self.is_tier_two(tool),
                RoutineAction::Prompt { .. } => false,
            };
        if request.session_id.is_empty() && asked {
            return Err(CoreError::InvalidArgument(
                "a tier-2 routine is registered from a session: its approval is asked there (give the session id)".to_owned(),
            ));
        }
        let (gate, ctx, on_pending) = self.asking_gate(&request.session_id, channel).await?;
        let added = register(&gate, engine, routine, request.replace, &ctx, &on_pending)
            .await
            .map_err(routine_error);
        // A question asked outside a turn: its records reach the seed's files now.
        if let Some(runtime) = self.open_runtime(&request.session_id).await {
            runtime.flush_session().await;
        }
        added
    }

    fn is_tier_two(&self, tool: &str) -> bool {
        self.tools()
            .iter()
            .any(|t| t.name == *tool && t.tier == Some(Tier::Physical))
    }

    /// The gate a routine question is asked through: the agent's gate of `session_id` (on
    /// `channel`), or with no session a gate over the hub's catalog that can ask nobody. The
    /// callback marks a question ready to show once recorded (outside a turn no events precede
    /// it).
    async fn asking_gate(
        &self,
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
            let catalog = hub_catalog(
                Arc::new(SystemClock),
                &self.options().disabled_tools,
                self.mcp(),
            )
            .map_err(|e| CoreError::Unavailable(e.to_string()))?;
            TierGate::builder(Arc::new(catalog)).build()
        } else {
            check_session_id(session_id)?;
            let runtime = self.runtime(session_id, None).await?;
            readiness = Some(Arc::clone(&runtime.readiness));
            runtime.agent().0.gate().clone()
        };
        let ctx = CallContext {
            session_id: session_id.to_owned(),
            channel,
            cancel: self.stop_token().child_token(),
        };
        let on_pending = move |asked: &crate::gate::ApprovalRequest| {
            if let Some(readiness) = &readiness {
                readiness.mark_flushed(&asked.approval_id);
            }
        };
        Ok((gate, ctx, on_pending))
    }

    fn routine_schedule(
        &self,
        engine: &RoutineEngine,
        request: &AddRoutine,
    ) -> Result<Schedule, CoreError> {
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

    pub fn remove_routine(&self, name: &str) -> Result<(), CoreError> {
        let engine = self.engine()?;
        store_io(|| engine.remove(name)).map_err(routine_error)
    }

    pub fn pause_routine(&self, name: &str, paused: bool) -> Result<RoutineView, CoreError> {
        let engine = self.engine()?;
        store_io(|| engine.set_paused(name, paused)).map_err(routine_error)
    }

    /// Fires a routine now. A tier-2 tool routine is asked first on `session_id` and `channel`
    /// (every time; refused without a session) and run before this returns; anything else is
    /// started and runs on.
    pub async fn run_routine(
        &self,
        name: &str,
        session_id: &str,
        channel: &str,
    ) -> Result<ManualRun, CoreError> {
        let engine = self.engine()?;
        let view = engine.get(name).map_err(routine_error)?;
        let tier_two = matches!(&view.routine.action,
            RoutineAction::Tool { tool, .. } if self.is_tier_two(tool));
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
        let (gate, ctx, on_pending) = self.asking_gate(session_id, channel).await?;
        let tool_use_id = format!("routine-{name}-manual-{}", self.new_turn_id());
        let run = run_by_hand(&gate, engine, name, tool_use_id.clone(), &ctx, &on_pending).await;
        // Outside a turn, the call's record is stored by now: take it back from the recorder so
        // nothing accumulates between turns.
        let runtime = self.runtime(session_id, None).await?;
        runtime.agent().1.take_tool_call(&tool_use_id);
        runtime.flush_session().await;
        let (firing, result) = run.map_err(routine_error)?;
        Ok(ManualRun { firing, result })
    }

    pub fn routine_history(&self, name: &str) -> Result<Vec<Firing>, CoreError> {
        self.engine()?.history(name).map_err(routine_error)
    }

    /// The routines as status reports show them.
    pub fn routine_status(&self) -> RoutineStatus {
        let Ok(engine) = self.engine() else {
            return RoutineStatus {
                enabled: false,
                problem: self.engine().err().map(|e| e.to_string()),
                ..RoutineStatus::default()
            };
        };
        let tools = self.tools();
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
