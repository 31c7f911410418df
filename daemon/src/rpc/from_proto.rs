//! Proto → domain, every request the hub reads: which session to open, a page of messages, a turn
//! to start, a decision, a routine to add. The other direction is `super::to_proto`.
//!
//! Invariants: pure functions; a value with no domain meaning (an enum value the client sent that
//! names nothing, arguments that are not a JSON object, an unknown `catch_up` word) is refused as
//! INVALID_ARGUMENT (or `None` for the caller to refuse), never guessed.

use serde_json::Value;
use tau_api::proto::v1 as pb;
use tonic::Status;

use crate::hub::{AddRoutine, ApprovalAnswer, MessageSelection, OpenTarget, StartTurn};
use crate::routine::{CatchUp, Creator, RoutineAction};

/// The session an OpenSession request names; `None` when it names none.
pub fn open_target(target: Option<pb::open_session_request::Target>) -> Option<OpenTarget> {
    use pb::open_session_request::Target;
    match target? {
        Target::NewSession(true) => Some(OpenTarget::New),
        Target::SessionId(id) => Some(OpenTarget::Id(id)),
        Target::Index(n) => Some(OpenTarget::Index(n)),
        Target::MostRecent(true) => Some(OpenTarget::MostRecent),
        Target::NewSession(false) | Target::MostRecent(false) => None,
    }
}

/// The messages a GetSession request asks for: a page, all of them, or none.
pub fn message_selection(
    page: Option<pb::MessagePage>,
    include_messages: bool,
) -> MessageSelection {
    match page {
        Some(page) => MessageSelection::Page {
            size: usize::try_from(page.size).unwrap_or(usize::MAX),
            before: page.before_index,
        },
        None if include_messages => MessageSelection::All,
        None => MessageSelection::None,
    }
}

/// The turn a StartTurn request starts (its fields are checked by the hub).
pub fn start_turn(request: pb::StartTurnRequest) -> StartTurn {
    StartTurn {
        session_id: request.session_id,
        text: request.text,
        channel: request.channel,
        idempotency_key: request.idempotency_key,
    }
}

/// A decision's answer; `None` for UNSPECIFIED or an unknown value (never guessed).
pub fn approval_answer(decision: i32) -> Option<ApprovalAnswer> {
    match pb::ApprovalDecision::try_from(decision) {
        Ok(pb::ApprovalDecision::Approved) => Some(ApprovalAnswer::Approve),
        Ok(pb::ApprovalDecision::Rejected) => Some(ApprovalAnswer::Reject),
        Ok(pb::ApprovalDecision::TimedOut) => Some(ApprovalAnswer::TimedOut),
        Ok(pb::ApprovalDecision::Unspecified) | Err(_) => None,
    }
}

/// The routine an AddRoutine request adds, as its owner's.
pub fn add_routine(request: pb::AddRoutineRequest) -> Result<AddRoutine, Status> {
    let (prompt, tool) = match request.action {
        Some(pb::add_routine_request::Action::Prompt(p)) => (Some(p), None),
        Some(pb::add_routine_request::Action::Tool(t)) => (None, Some(t)),
        None => (None, None),
    };
    Ok(AddRoutine {
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
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_approved_rejected_or_timed_out_is_an_answer() {
        assert_eq!(
            approval_answer(pb::ApprovalDecision::Approved as i32),
            Some(ApprovalAnswer::Approve)
        );
        assert_eq!(
            approval_answer(pb::ApprovalDecision::Rejected as i32),
            Some(ApprovalAnswer::Reject)
        );
        assert_eq!(
            approval_answer(pb::ApprovalDecision::TimedOut as i32),
            Some(ApprovalAnswer::TimedOut)
        );
        assert_eq!(approval_answer(0), None);
        assert_eq!(approval_answer(42), None);
    }

    #[test]
    fn an_open_target_is_named_or_none() {
        use pb::open_session_request::Target;
        assert_eq!(open_target(Some(Target::NewSession(false))), None);
        assert_eq!(open_target(None), None);
        assert_eq!(
            open_target(Some(Target::Index(2))),
            Some(OpenTarget::Index(2))
        );
    }
}
