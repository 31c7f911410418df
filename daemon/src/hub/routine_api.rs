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
    CatchUp, Firing, Routine, RoutineAction, RoutineEngine, RoutineError, RoutineView, Schedule,
    parse_local_time, register,
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

    /// Adds (or replaces) a routine; a tier-2 tool action waits for its registration approval.
    pub async fn add_routine(&self, request: AddRoutine) -> Result<RoutineView, CoreError> {
        let engine = self.engine()?;
        let channel = check_channel(&request.channel)?;
        let schedule = self.routine_schedule(engine, &request)?;
        let routine = Routine::new(
            &request.name,
            schedule,
            request.action.clone(),
            request.catch_up,
            engine.now(),
        );
        let tier_two = match &request.action {
            RoutineAction::Tool { tool, .. } => self
                .tools()
                .iter()
                .any(|t| t.name == *tool && t.tier == Some(Tier::Physical)),
            RoutineAction::Prompt { .. } => false,
        };
        let mut readiness = None;
        let gate = if request.session_id.is_empty() {
            if tier_two {
                return Err(CoreError::InvalidArgument(
                    "a tier-2 routine is registered from a session: its approval is asked there (give the session id)".to_owned(),
                ));
            }
            let catalog = hub_catalog(
                Arc::new(SystemClock),
                &self.options().disabled_tools,
                self.mcp(),
            )
            .map_err(|e| CoreError::Unavailable(e.to_string()))?;
            TierGate::builder(Arc::new(catalog)).build()
        } else {
            check_session_id(&request.session_id)?;
            let runtime = self.runtime(&request.session_id, None).await?;
            readiness = Some(Arc::clone(&runtime.readiness));
            runtime.agent().0.gate().clone()
        };
        let ctx = CallContext {
            session_id: request.session_id.clone(),
            channel,
            cancel: self.stop_token().child_token(),
        };
        // Outside a turn no events precede the question: it may be shown once recorded.
        let on_pending = move |asked: &crate::gate::ApprovalRequest| {
            if let Some(readiness) = &readiness {
                readiness.mark_flushed(&asked.approval_id);
            }
        };
        register(&gate, engine, routine, request.replace, &ctx, &on_pending)
            .await
            .map_err(routine_error)
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

    /// Fires a routine now; returns the firing's number.
    pub fn run_routine(&self, name: &str) -> Result<u64, CoreError> {
        let engine = self.engine()?;
        store_io(|| engine.run_now(name)).map_err(routine_error)
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
