//! The routine calls of `tau.v1.Tau`: requests checked and moved into the hub's domain, answers
//! translated to `routines.proto`.
//!
//! Invariants: translation only; arguments that are not a JSON object and unknown `catch_up`
//! words are INVALID_ARGUMENT before the hub is asked; times go out as RFC 3339 in UTC.

use jiff::Timestamp;
use serde_json::Value;
use tau_api::proto::v1 as pb;
use tonic::Status;

use crate::hub::{AddRoutine, HubCore};
use crate::routine::{CatchUp, Creator, Firing, RoutineAction, RoutineView};

fn text(instant: Option<Timestamp>) -> String {
    instant.map(|t| t.to_string()).unwrap_or_default()
}

pub fn firing(firing: &Firing) -> pb::RoutineFiring {
    pb::RoutineFiring {
        number: firing.number,
        scheduled: text(firing.scheduled),
        started_at: firing.started_at.to_string(),
        ended_at: text(firing.ended_at),
        cause: firing.cause.as_str().to_owned(),
        outcome: firing.outcome.as_str().to_owned(),
        detail: firing.detail.clone(),
    }
}

pub fn routine(view: &RoutineView) -> pb::Routine {
    let routine = &view.routine;
    let action = match &routine.action {
        RoutineAction::Prompt {
            text,
            approval_channel,
        } => pb::routine::Action::Prompt(pb::RoutinePromptAction {
            text: text.clone(),
            approval_channel: approval_channel.clone(),
        }),
        RoutineAction::Tool { tool, arguments } => {
            pb::routine::Action::Tool(pb::RoutineToolAction {
                tool: tool.clone(),
                arguments_json: arguments.to_string(),
            })
        }
    };
    pb::Routine {
        name: routine.name.clone(),
        schedule: view.schedule_text.clone(),
        action: Some(action),
        catch_up: routine.catch_up.as_str().to_owned(),
        paused: routine.paused,
        created_at: routine.created_at.to_string(),
        next_firing: text(view.next_firing),
        approval_id: routine
            .approval
            .as_ref()
            .map(|a| a.approval_id.clone())
            .unwrap_or_default(),
        approval_channel: routine
            .approval
            .as_ref()
            .map(|a| a.channel.clone())
            .unwrap_or_default(),
        last_firing: routine.history.back().map(firing),
        session_id: routine.session_id(),
        created_by: routine.created_by.as_str().to_owned(),
    }
}

fn action(
    prompt: Option<pb::RoutinePromptAction>,
    tool: Option<pb::RoutineToolAction>,
) -> Result<RoutineAction, Status> {
    match (prompt, tool) {
        (Some(prompt), None) => Ok(RoutineAction::Prompt {
            text: prompt.text,
            approval_channel: prompt.approval_channel,
        }),
        (None, Some(tool)) => {
            let arguments: Value = if tool.arguments_json.trim().is_empty() {
                Value::Object(serde_json::Map::new())
            } else {
                serde_json::from_str(&tool.arguments_json).map_err(|e| {
                    Status::invalid_argument(format!(
                        "arguments_json: not JSON ({e}); expected a JSON object"
                    ))
                })?
            };
            Ok(RoutineAction::Tool {
                tool: tool.tool,
                arguments,
            })
        }
        _ => Err(Status::invalid_argument(
            "a routine needs an action: a prompt or a tool call",
        )),
    }
}

fn catch_up(word: &str) -> Result<CatchUp, Status> {
    match word {
        "" | "run_once" => Ok(CatchUp::RunOnce),
        "skip" => Ok(CatchUp::Skip),
        other => Err(Status::invalid_argument(format!(
            "catch_up {other:?}: expected run_once or skip"
        ))),
    }
}

pub fn list(core: &HubCore) -> Result<pb::ListRoutinesResponse, Status> {
    Ok(pb::ListRoutinesResponse {
        routines: core.list_routines()?.iter().map(routine).collect(),
    })
}

pub async fn add(
    core: &HubCore,
    request: pb::AddRoutineRequest,
) -> Result<pb::AddRoutineResponse, Status> {
    let (prompt, tool) = match request.action {
        Some(pb::add_routine_request::Action::Prompt(p)) => (Some(p), None),
        Some(pb::add_routine_request::Action::Tool(t)) => (None, Some(t)),
        None => (None, None),
    };
    let add = AddRoutine {
        name: request.name,
        cron: request.cron,
        every: request.every,
        at: request.at,
        action: action(prompt, tool)?,
        catch_up: catch_up(&request.catch_up)?,
        replace: request.replace,
        session_id: request.session_id,
        channel: request.channel,
        created_by: Creator::Owner,
    };
    let view = core.add_routine(add).await?;
    Ok(pb::AddRoutineResponse {
        routine: Some(routine(&view)),
    })
}

pub fn remove(core: &HubCore, name: &str) -> Result<pb::RemoveRoutineResponse, Status> {
    core.remove_routine(name)?;
    Ok(pb::RemoveRoutineResponse {})
}

pub fn pause(core: &HubCore, name: &str, paused: bool) -> Result<pb::Routine, Status> {
    let view = core.pause_routine(name, paused)?;
    Ok(routine(&view))
}

pub async fn run(
    core: &HubCore,
    request: pb::RunRoutineRequest,
) -> Result<pb::RunRoutineResponse, Status> {
    let run = core
        .run_routine(&request.name, &request.session_id, &request.channel)
        .await?;
    let (detail, succeeded) = run
        .result
        .map(|r| (r.detail, r.succeeded))
        .unwrap_or_default();
    Ok(pb::RunRoutineResponse {
        firing: run.firing,
        detail,
        succeeded,
    })
}

pub fn history(core: &HubCore, name: &str) -> Result<pb::RoutineHistoryResponse, Status> {
    Ok(pb::RoutineHistoryResponse {
        firings: core.routine_history(name)?.iter().map(firing).collect(),
    })
}
