//! Domain → proto for routines: a routine and its schedule, action and last firing, and a firing.
//!
//! Invariant: times leave as RFC 3339 in UTC, an unknown one as the empty string.

use jiff::Timestamp;
use tau_api::proto::v1 as pb;

use crate::routine::{Firing, RoutineAction, RoutineView};

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
