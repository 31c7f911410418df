//! The page's JSON requests over the hub core: sessions (list, open, messages), turns (start,
//! cancel), approvals (pending, decide) and the hub's status. Every handler here answers only a
//! signed-in device ([`signed_in`]).
//!
//! Invariants: every turn and listing is on channel [`WEB_CHANNEL`]; a turn's own stream is let go
//! at once (the page watches the session's event stream, which the hub shows the turn's
//! approvals), so a page that went away leaves no one who could approve; a decision names the
//! event stream it was shown on, and counts only when that stream is this device's: the hub then
//! decides through `HubCore::decide`, the one-winner path every client uses; domain errors become
//! HTTP statuses in one place ([`core_error`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use tau_api::display::{escape_hidden, escape_hidden_in_prose};

use super::event_json;
use super::signin::{error, signed_in};
use super::{WEB_CHANNEL, WebState};
use crate::hub::StartTurn;
use crate::hub::sessions::{MessageSelection, OpenTarget};
use crate::hub::{ApprovalAnswer, CoreError, DecideOutcome};
use crate::message::{ContentBlock, Role};

/// Sessions a listing shows at most.
const LIST_LIMIT: usize = 50;
/// Messages a session's page shows at most.
const PAGE_SIZE: usize = 100;

/// A domain error as an HTTP answer.
pub(super) fn core_error(e: &CoreError) -> Response {
    let status = match e {
        CoreError::InvalidArgument(_) | CoreError::ContextMismatch(_) => StatusCode::BAD_REQUEST,
        CoreError::NotFound(_) => StatusCode::NOT_FOUND,
        CoreError::FailedPrecondition(_) | CoreError::CutOff(_) => StatusCode::CONFLICT,
        CoreError::ResourceExhausted(_) => StatusCode::TOO_MANY_REQUESTS,
        CoreError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    error(status, e.to_string())
}

/// The value of `name` in a query string (no percent-decoding: the page sends plain ids).
pub(super) fn query<'a>(uri: &'a Uri, name: &str) -> Option<&'a str> {
    uri.query()?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name && !value.contains('%')).then_some(value)
    })
}

macro_rules! device {
    ($state:expr, $headers:expr) => {
        match signed_in(&$state, &$headers) {
            Ok(device) => device,
            Err(refused) => return refused.into_response(),
        }
    };
}

/// `GET /api/sessions`: the web channel's sessions, newest first.
pub(super) async fn sessions(State(state): State<Arc<WebState>>, headers: HeaderMap) -> Response {
    device!(state, headers);
    match state
        .core
        .list_sessions(LIST_LIMIT, WEB_CHANNEL, None)
        .await
    {
        Ok(list) => {
            let sessions: Vec<Value> = list.iter().map(event_json::session).collect();
            Json(json!({"ok": true, "sessions": sessions})).into_response()
        }
        Err(e) => core_error(&e),
    }
}

#[derive(Deserialize)]
pub(super) struct Open {
    /// `"new"`, `"most_recent"` or a session id.
    target: String,
}

/// `POST /api/open`: a new session, the most recent one, or one by id.
pub(super) async fn open(
    State(state): State<Arc<WebState>>,
    headers: HeaderMap,
    Json(body): Json<Open>,
) -> Response {
    device!(state, headers);
    let target = match body.target.as_str() {
        "new" => OpenTarget::New,
        "most_recent" => OpenTarget::MostRecent,
        id => OpenTarget::Id(id.to_owned()),
    };
    match state
        .core
        .open_session(target, None, WEB_CHANNEL, None)
        .await
    {
        Ok(opened) => Json(json!({
            "ok": true,
            "session": event_json::session(&opened.session),
            "resumed": opened.resumed,
        }))
        .into_response(),
        Err(e) => core_error(&e),
    }
}

/// `GET /api/messages?session=ID`: the newest stored messages of a session, oldest first, as
/// chat lines (text and tool calls).
pub(super) async fn messages(
    State(state): State<Arc<WebState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    device!(state, headers);
    let Some(session_id) = query(&uri, "session") else {
        return error(StatusCode::BAD_REQUEST, "name the session: ?session=ID");
    };
    let selection = MessageSelection::Page {
        size: PAGE_SIZE,
        before: None,
    };
    let detail = match state.core.get_session_with(session_id, selection).await {
        Ok(detail) => detail,
        Err(e) => return core_error(&e),
    };
    let mut lines = Vec::new();
    for (_, message, _) in detail.messages.iter().rev() {
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        for block in &message.content {
            match block {
                ContentBlock::Text(text) if !text.is_empty() => {
                    lines.push(json!({"role": role, "text": escape_hidden_in_prose(None, text)}));
                }
                ContentBlock::ToolUse(tool_use) => {
                    lines.push(json!({"role": "tool", "tool": escape_hidden(&tool_use.name)}));
                }
                _ => {}
            }
        }
    }
    Json(json!({
        "ok": true,
        "session": event_json::session(&detail.summary),
        "busy": detail.busy,
        "messages": lines,
    }))
    .into_response()
}

#[derive(Deserialize)]
pub(super) struct Turn {
    session_id: String,
    text: String,
    /// The page's idempotency key, so a resent request does not run twice.
    #[serde(default)]
    key: String,
}

/// `POST /api/turn`: starts a turn on the web channel.
pub(super) async fn turn(
    State(state): State<Arc<WebState>>,
    headers: HeaderMap,
    Json(body): Json<Turn>,
) -> Response {
    device!(state, headers);
    let request = StartTurn {
        session_id: body.session_id,
        text: body.text,
        channel: WEB_CHANNEL.to_owned(),
        idempotency_key: body.key,
    };
    match state.core.start_turn(request).await {
        Ok(stream) => {
            let accepted = stream.accepted();
            Json(json!({
                "ok": true,
                "turn_id": accepted.turn_id,
                "duplicate": accepted.duplicate,
                "queued_ahead": accepted.queued_ahead,
            }))
            .into_response()
        }
        Err(e) => core_error(&e),
    }
}

#[derive(Deserialize)]
pub(super) struct Cancel {
    session_id: String,
}

/// `POST /api/cancel`: cancels the session's running turn.
pub(super) async fn cancel(
    State(state): State<Arc<WebState>>,
    headers: HeaderMap,
    Json(body): Json<Cancel>,
) -> Response {
    device!(state, headers);
    match state.core.cancel_turn(&body.session_id, None).await {
        Ok(turn) => Json(json!({"ok": true, "cancelled": turn})).into_response(),
        Err(e) => core_error(&e),
    }
}

#[derive(Deserialize)]
pub(super) struct Decide {
    approval_id: String,
    /// `"approved"` or `"rejected"`.
    decision: String,
    /// The event stream the card was shown on.
    stream_key: String,
}

/// `POST /api/decide`: a person's answer, from a stream of this device that was shown it.
pub(super) async fn decide(
    State(state): State<Arc<WebState>>,
    headers: HeaderMap,
    Json(body): Json<Decide>,
) -> Response {
    let device = device!(state, headers);
    let answer = match body.decision.as_str() {
        "approved" => ApprovalAnswer::Approve,
        "rejected" => ApprovalAnswer::Reject,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "decision is \"approved\" or \"rejected\"",
            );
        }
    };
    let attachment = state
        .streams()
        .get(&body.stream_key)
        .filter(|(owner, _)| *owner == device.device_id)
        .map(|(_, attachment)| attachment.clone());
    let Some(attachment) = attachment else {
        return error(
            StatusCode::FORBIDDEN,
            "this approval was not shown on a live stream of this browser",
        );
    };
    match state
        .core
        .decide(&body.approval_id, answer, &attachment)
        .await
    {
        Ok(outcome) => {
            let (result, resolution) = match outcome {
                DecideOutcome::Applied(o) => ("applied", Some(o.as_str())),
                DecideOutcome::AlreadyDecided(o) => ("already_decided", Some(o.as_str())),
                DecideOutcome::Expired(o) => ("expired", Some(o.as_str())),
                DecideOutcome::NotFound => ("not_found", None),
            };
            tracing::info!(device = %device.name, approval_id = %body.approval_id, result, "web decision");
            Json(json!({"ok": true, "result": result, "resolution": resolution})).into_response()
        }
        Err(e) => core_error(&e),
    }
}

/// `GET /api/pending`: every pending approval, across sessions.
pub(super) async fn pending(State(state): State<Arc<WebState>>, headers: HeaderMap) -> Response {
    device!(state, headers);
    match state.core.list_pending(None) {
        Ok(list) => {
            let approvals: Vec<Value> = list.iter().map(event_json::pending).collect();
            Json(json!({"ok": true, "approvals": approvals})).into_response()
        }
        Err(e) => core_error(&e),
    }
}

/// `GET /api/status`: the hub's state as the page shows it.
pub(super) async fn status(State(state): State<Arc<WebState>>, headers: HeaderMap) -> Response {
    let device = device!(state, headers);
    let core = &state.core;
    let routines = core.routine_status().to_json();
    Json(json!({
        "ok": true,
        "device": device.name,
        "sessions_open": core.open_sessions(),
        "approvals_pending": core.registry().pending_count(),
        "backend": core.backend_name(),
        "default_role": core.options().default_role,
        "tools": core.tools().into_iter().filter(|t| t.state == "ready").map(|t| escape_hidden(&t.name)).collect::<Vec<_>>(),
        "routines": routines,
        "version": tau_api::VERSION,
    }))
    .into_response()
}
