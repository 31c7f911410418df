//! The owner's slash commands, with their Turkish aliases: `/new` (`/yeni`), `/sessions`
//! (`/oturumlar`), `/resume n` (`/devam n`), `/status` (`/durum`), `/help` (`/yardim`).
//!
//! Invariant: a command never starts a turn; an unknown `/word` is sent on as a turn's text, so
//! the model sees what the owner typed.

use std::sync::Arc;

use tau_api::proto::v1 as pb;

use crate::hub_link::{HubError, unary};

use super::{Shared, lock};

/// The channel name every turn, listing and attachment of this channel uses.
pub const CHANNEL: &str = "telegram";

/// Handles `text` if it is a known command; `false` when it is not one.
pub(super) async fn handle(shared: &Arc<Shared>, chat: i64, text: &str) -> bool {
    let (word, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let word = word.split('@').next().unwrap_or(word).to_lowercase();
    let reply = match word.as_str() {
        "/new" | "/yeni" => new_session(shared).await,
        "/sessions" | "/oturumlar" => sessions(shared).await,
        "/resume" | "/devam" => resume(shared, rest.trim()).await,
        "/status" | "/durum" => status(shared).await,
        "/help" | "/yardim" | "/yardım" => Ok(shared.texts.plain("telegram.help")),
        _ => return false,
    };
    let text = reply.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "telegram: a command failed");
        shared.texts.plain("telegram.hub_unreachable")
    });
    shared.send_plain(chat, &text).await;
    true
}

/// Opens a new session for the chat and remembers it.
pub(super) async fn open_new(shared: &Shared) -> Result<String, HubError> {
    let mut hub = shared.hub.clone();
    let opened = unary(hub.open_session(pb::OpenSessionRequest {
        target: Some(pb::open_session_request::Target::NewSession(true)),
        channel: CHANNEL.into(),
        ..Default::default()
    }))
    .await?;
    let id = opened.session.map(|s| s.session_id).unwrap_or_default();
    if let Err(e) = shared.set_session(&id) {
        tracing::error!(error = %e, "telegram: the session id could not be stored");
    }
    Ok(id)
}

async fn new_session(shared: &Shared) -> Result<String, HubError> {
    open_new(shared).await?;
    Ok(shared.texts.plain("telegram.new_session"))
}

async fn sessions(shared: &Shared) -> Result<String, HubError> {
    let mut hub = shared.hub.clone();
    let listed = unary(hub.list_sessions(pb::ListSessionsRequest {
        limit: 10,
        channel: CHANNEL.into(),
        exclude_session_id: shared.session().unwrap_or_default(),
    }))
    .await?;
    if listed.sessions.is_empty() {
        return Ok(shared.texts.plain("telegram.no_sessions"));
    }
    Ok(listed
        .sessions
        .iter()
        .map(|s| format!("{}. {} ({})", s.index, s.title, s.updated_at))
        .collect::<Vec<_>>()
        .join("\n"))
}

async fn resume(shared: &Shared, arg: &str) -> Result<String, HubError> {
    let Ok(index) = arg.parse::<u32>() else {
        return Ok(shared.texts.plain("telegram.resume_usage"));
    };
    let mut hub = shared.hub.clone();
    let opened = unary(hub.open_session(pb::OpenSessionRequest {
        target: Some(pb::open_session_request::Target::Index(index)),
        channel: CHANNEL.into(),
        exclude_session_id: shared.session().unwrap_or_default(),
        ..Default::default()
    }))
    .await?;
    let session = opened.session.unwrap_or_default();
    if let Err(e) = shared.set_session(&session.session_id) {
        tracing::error!(error = %e, "telegram: the session id could not be stored");
    }
    Ok(shared
        .texts
        .get("telegram.resumed", &[("title", &session.title)]))
}

async fn status(shared: &Shared) -> Result<String, HubError> {
    let mut hub = shared.hub.clone();
    let status = unary(hub.get_status(pb::GetStatusRequest {})).await?;
    let session = lock(&shared.session).clone().unwrap_or_else(|| "-".into());
    Ok(shared.texts.get(
        "telegram.status",
        &[
            ("version", &status.version),
            ("profile", &status.profile),
            ("uptime", &status.uptime_s),
            ("pending", &status.approvals_pending),
            ("session", &session),
        ],
    ))
}
