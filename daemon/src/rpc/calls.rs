//! The bodies of the `tau.v1.Tau` session, turn, event, approval and catalog calls: read the
//! request (`from_proto`), call the [`HubCore`], write the answer (`to_proto`) or its error
//! (`errors`).
//!
//! Invariants: no business logic here (the core decides); every error leaves as a status built in
//! `errors`; a streaming call's stream ends after its turn's end, when the client goes, or with the
//! status that cut it off; dropping a stream drops the client's attachment with it, except a stream
//! cut off for lagging, whose attachment the core holds for a grace period (`LAG_GRACE`).

use std::pin::Pin;

use futures::Stream;
use tau_api::proto::v1 as pb;
use tonic::Status;

use super::errors;
use super::from_proto;
use super::to_proto as wire;
use crate::hub::{CoreError, EventStream, HubCore, TurnStream};

/// A server stream of `T`.
pub type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn invalid(message: &str) -> Status {
    Status::invalid_argument(message.to_owned())
}

fn optional(value: &str) -> Option<&str> {
    (!value.is_empty()).then_some(value)
}

pub async fn list_sessions(
    core: &HubCore,
    request: pb::ListSessionsRequest,
) -> Result<pb::ListSessionsResponse, Status> {
    let limit = usize::try_from(request.limit).unwrap_or(usize::MAX);
    let sessions = core
        .list_sessions(
            limit,
            &request.channel,
            optional(&request.exclude_session_id),
        )
        .await?;
    Ok(pb::ListSessionsResponse {
        sessions: sessions.into_iter().map(wire::session_info).collect(),
        backend: core.backend_name().to_owned(),
    })
}

pub async fn get_session(
    core: &HubCore,
    request: pb::GetSessionRequest,
) -> Result<pb::GetSessionResponse, Status> {
    let selection = from_proto::message_selection(request.page, request.include_messages);
    let detail = core
        .get_session_with(&request.session_id, selection)
        .await?;
    Ok(pb::GetSessionResponse {
        next_before_index: detail.next_before,
        session: Some(wire::session_info(detail.summary)),
        messages: detail
            .messages
            .into_iter()
            .map(|(index, message, at)| wire::stored_message(index, &message, at))
            .collect(),
        open: detail.open,
        busy: detail.busy,
        in_memory_messages: detail.in_memory_messages,
        fallback_in_use: detail.fallback_in_use,
    })
}

pub async fn open_session(
    core: &HubCore,
    request: pb::OpenSessionRequest,
) -> Result<pb::OpenSessionResponse, Status> {
    let target = from_proto::open_target(request.target).ok_or_else(|| {
        invalid("name the session to open: new_session, session_id, index or most_recent")
    })?;
    let opened = core
        .open_session(
            target,
            optional(&request.role),
            &request.channel,
            optional(&request.exclude_session_id),
        )
        .await?;
    Ok(pb::OpenSessionResponse {
        session: Some(wire::session_info(opened.session)),
        resumed: opened.resumed,
        role: opened.role,
    })
}

pub async fn compact_session(
    core: &HubCore,
    request: pb::CompactSessionRequest,
) -> Result<pb::CompactSessionResponse, Status> {
    let compacted = core
        .compact_session(&request.session_id, &request.focus, &request.channel)
        .await?;
    Ok(pb::CompactSessionResponse {
        session: Some(wire::session_info(compacted.session)),
        previous_session_id: compacted.previous_session_id,
        summarized_messages: compacted.summarized_messages,
        summary: compacted.summary,
    })
}

pub async fn switch_role(
    core: &HubCore,
    request: pb::SwitchRoleRequest,
) -> Result<pb::SwitchRoleResponse, Status> {
    if request.role.is_empty() {
        return Err(invalid("role is empty"));
    }
    let switched = core.switch_role(&request.session_id, &request.role).await?;
    Ok(pb::SwitchRoleResponse {
        session_id: switched.session_id,
        role: switched.role,
        previous_role: switched.previous_role,
    })
}

pub async fn read_events(
    core: &HubCore,
    request: pb::ReadEventsRequest,
) -> Result<pb::ReadEventsResponse, Status> {
    let events = core.read_events(&request.session_id).await?;
    Ok(pb::ReadEventsResponse {
        events: events.iter().map(wire::stored_event).collect(),
    })
}

pub async fn start_turn(
    core: &HubCore,
    request: pb::StartTurnRequest,
) -> Result<BoxStream<pb::StartTurnResponse>, Status> {
    let stream = if request.new_session {
        core.start_turn_in_new_session(from_proto::start_turn(request))
            .await?
    } else {
        core.start_turn(from_proto::start_turn(request)).await?
    };
    let accepted = {
        let a = stream.accepted();
        pb::TurnAccepted {
            session_id: a.session_id.clone(),
            turn_id: a.turn_id.clone(),
            attachment_id: stream.attachment_id().to_owned(),
            duplicate: a.duplicate,
            queued_ahead: a.queued_ahead,
            stream_id: core.stream_id().to_owned(),
        }
    };
    let first = pb::StartTurnResponse {
        kind: Some(pb::start_turn_response::Kind::Accepted(accepted)),
    };
    Ok(Box::pin(futures::stream::unfold(
        (Some(first), Some(stream)),
        turn_step,
    )))
}

type TurnState = (Option<pb::StartTurnResponse>, Option<TurnStream>);

async fn turn_step(
    (first, stream): TurnState,
) -> Option<(Result<pb::StartTurnResponse, Status>, TurnState)> {
    let mut stream = stream?;
    if let Some(first) = first {
        return Some((Ok(first), (None, Some(stream))));
    }
    match stream.next().await {
        Ok(Some(event)) => {
            let message = pb::StartTurnResponse {
                kind: Some(pb::start_turn_response::Kind::Event(wire::event(&event))),
            };
            Some((Ok(message), (None, Some(stream))))
        }
        Ok(None) => None,
        Err(lagged) => Some((Err(errors::lagged(lagged)), (None, None))),
    }
}

pub async fn cancel_turn(
    core: &HubCore,
    request: pb::CancelTurnRequest,
) -> Result<pb::CancelTurnResponse, Status> {
    let cancelled = core
        .cancel_turn(&request.session_id, optional(&request.turn_id))
        .await?;
    let outcome = if cancelled.is_some() {
        pb::CancelOutcome::Cancelled
    } else {
        pb::CancelOutcome::NotRunning
    };
    Ok(pb::CancelTurnResponse {
        outcome: outcome as i32,
        turn_id: cancelled.unwrap_or_default(),
    })
}

pub async fn subscribe(
    core: &HubCore,
    request: pb::SubscribeRequest,
) -> Result<BoxStream<pb::SubscribeResponse>, Status> {
    let stream = core
        .subscribe_in_stream(
            &request.session_id,
            request.after_seq,
            optional(&request.stream_id),
            &request.channel,
        )
        .await?;
    let first = pb::SubscribeResponse {
        kind: Some(pb::subscribe_response::Kind::Snapshot(wire::snapshot(
            stream.snapshot().clone(),
        ))),
    };
    Ok(Box::pin(futures::stream::unfold(
        (Some(first), Some(stream)),
        subscribe_step,
    )))
}

type SubscribeState = (Option<pb::SubscribeResponse>, Option<EventStream>);

async fn subscribe_step(
    (first, stream): SubscribeState,
) -> Option<(Result<pb::SubscribeResponse, Status>, SubscribeState)> {
    let mut stream = stream?;
    if let Some(first) = first {
        return Some((Ok(first), (None, Some(stream))));
    }
    match stream.next().await {
        Ok(Some(event)) => {
            let message = pb::SubscribeResponse {
                kind: Some(pb::subscribe_response::Kind::Event(wire::event(&event))),
            };
            Some((Ok(message), (None, Some(stream))))
        }
        Ok(None) => None,
        Err(lagged) => Some((Err(errors::lagged(lagged)), (None, None))),
    }
}

/// `WatchApprovals`: the hub's approval watch as a stream of `PendingApproval`.
pub fn watch_approvals(
    core: &HubCore,
    request: pb::WatchApprovalsRequest,
) -> Result<BoxStream<pb::PendingApproval>, Status> {
    let watch = core.watch_approvals(optional(&request.channel))?;
    let stream = futures::stream::unfold(watch, |mut watch| async move {
        let next = watch.next().await?;
        Some((Ok(wire::pending(next)), watch))
    });
    Ok(Box::pin(stream))
}

pub fn list_pending(
    core: &HubCore,
    request: &pb::ListPendingApprovalsRequest,
) -> Result<pb::ListPendingApprovalsResponse, Status> {
    let pending = core.list_pending(optional(&request.session_id))?;
    Ok(pb::ListPendingApprovalsResponse {
        approvals: pending.into_iter().map(wire::pending).collect(),
    })
}

/// `DecideApproval`: a person's answer, from proto to the hub (`HubCore::decide`, where the
/// registry chooses the winner) and the outcome back.
pub async fn decide(
    core: &HubCore,
    request: &pb::DecideApprovalRequest,
) -> Result<pb::DecideApprovalResponse, Status> {
    let answer = from_proto::approval_answer(request.decision)
        .ok_or_else(|| invalid("decision must be APPROVED or REJECTED"))?;
    let outcome = core
        .decide(&request.approval_id, answer, &request.attachment_id)
        .await?;
    Ok(wire::decide_response(outcome))
}

pub fn list_tools(core: &HubCore) -> pb::ListToolsResponse {
    pb::ListToolsResponse {
        tools: core.tools().into_iter().map(wire::tool).collect(),
    }
}

pub fn list_model_roles(core: &HubCore) -> pb::ListModelRolesResponse {
    let options = core.options();
    pb::ListModelRolesResponse {
        roles: options
            .roles
            .iter()
            .map(|(name, role)| pb::ModelRole {
                name: name.clone(),
                provider: role.provider.clone(),
                model_id: role.model_id.clone(),
                max_tokens: role.max_tokens,
                fallback_provider: role
                    .fallback
                    .as_ref()
                    .map(|f| f.provider.clone())
                    .unwrap_or_default(),
                fallback_model_id: role
                    .fallback
                    .as_ref()
                    .map(|f| f.model_id.clone())
                    .unwrap_or_default(),
            })
            .collect(),
        default_role: options.default_role.clone(),
    }
}

/// Adds what the core knows to a status response.
pub fn status_extras(core: &HubCore, response: &mut pb::GetStatusResponse) {
    let options = core.options();
    response.sessions_open = u32::try_from(core.open_sessions()).unwrap_or(u32::MAX);
    response.session_backend = core.backend_name().to_owned();
    response.features = tau_api::hub_features::SERVED
        .iter()
        .map(|&name| name.to_owned())
        .collect();
    response.default_role = options.default_role.clone();
    response.model_roles = options.roles.keys().cloned().collect();
    response.tools = core
        .tools()
        .into_iter()
        .filter(|t| t.state == "ready")
        .map(|t| t.name)
        .collect();
    response.mcp_servers = core
        .mcp()
        .status()
        .into_iter()
        .map(wire::mcp_server)
        .collect();
    response.approvals_pending = u32::try_from(core.registry().pending_count()).unwrap_or(u32::MAX);
    let routines = core.routine_status();
    response.routine_warnings = routines.warnings();
    response.routines = routines
        .routines
        .iter()
        .map(wire::routines::routine)
        .collect();
}

/// The status of a call that needs the session service when it is not running.
pub fn no_core(reason: &str) -> Status {
    Status::from(CoreError::Unavailable(format!(
        "sessions are not available in this hub: {reason}"
    )))
}

/// `GetUsage`: the spend of the last `days` days (0: a week).
pub fn get_usage(core: &HubCore, days: u32) -> pb::GetUsageResponse {
    let days = if days == 0 { 7 } else { days };
    pb::GetUsageResponse {
        days: core.usage(days).into_iter().map(wire::usage_day).collect(),
        time_zone: crate::hub::USAGE_TIME_ZONE.to_owned(),
    }
}
