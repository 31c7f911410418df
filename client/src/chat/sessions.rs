//! The session commands of `tau chat`: `/sessions`, `/resume [n|id]`, `/new`, `/session`,
//! `/compact [focus]`, and opening the first session at start-up (`--resume`, `--session`).
//!
//! Invariants: the hub opens, lists and compacts sessions; the chat only switches which session it
//! is on after the hub said yes, so a failed `/resume` or `/compact` keeps the current session. A
//! pinned role (`--role`) is passed with every session opened.

use tau_api::proto::v1::{self as pb, open_session_request::Target};
use tau_client::call::{CallError, call};
use tau_client::present::Presenter;
use tonic::Code;

use super::history;
use super::render;
use super::state::{CHANNEL, Chat};

/// How many sessions `/sessions` lists.
const LISTING_LIMIT: u32 = 10;

/// How many stored messages a resumed chat shows.
const HISTORY_SHOWN: usize = 40;

/// Asks the hub to open `target` with the pinned role.
pub async fn open(chat: &mut Chat, target: Target) -> Result<pb::OpenSessionResponse, CallError> {
    let request = pb::OpenSessionRequest {
        target: Some(target),
        role: chat.pinned_role.clone().unwrap_or_default(),
        channel: CHANNEL.to_owned(),
        exclude_session_id: chat.session_id().to_owned(),
    };
    call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.open_session(request),
    )
    .await
}

/// Makes an opened session the chat's current one.
pub fn switch_to(chat: &mut Chat, opened: pb::OpenSessionResponse) {
    if let Some(session) = opened.session {
        chat.session = session;
    }
    chat.role = opened.role;
}

/// `YYYY-MM-DD HH:MM` of an RFC 3339 time (UTC), or the text as it came.
pub fn short_date(rfc3339: &str) -> String {
    match (rfc3339.get(..10), rfc3339.get(11..16)) {
        (Some(date), Some(time)) if rfc3339.len() > 16 => format!("{date} {time}"),
        _ => render::one_line(rfc3339, 25),
    }
}

/// `/sessions`: the last earlier sessions with messages.
pub async fn list(chat: &mut Chat) {
    let Some(sessions) = fetch_listing(chat).await else {
        return;
    };
    if sessions.is_empty() {
        let text = chat.t("sessions.empty", &[]);
        chat.printer.line(&text);
        return;
    }
    let header = chat.t("sessions.header", &[]);
    chat.printer.line(&header);
    for (n, session) in sessions.iter().enumerate() {
        let title = chat.title_of(session);
        let channel = render::one_line(&session.channel, 20);
        let line = chat.t(
            "sessions.line",
            &[
                ("n", &(n + 1)),
                ("id", &session.session_id),
                ("date", &short_date(&session.updated_at)),
                ("channel", &channel),
                ("title", &title),
                ("count", &session.message_count),
            ],
        );
        chat.printer.line(&format!("  {line}"));
    }
}

/// Lists the earlier sessions and remembers the listing for `/resume <n>`.
async fn fetch_listing(chat: &mut Chat) -> Option<Vec<pb::SessionInfo>> {
    let request = pb::ListSessionsRequest {
        limit: LISTING_LIMIT,
        channel: CHANNEL.to_owned(),
        exclude_session_id: chat.session_id().to_owned(),
    };
    match call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.list_sessions(request),
    )
    .await
    {
        Ok(response) => {
            let sessions = response.sessions;
            chat.listing = Some(sessions.clone());
            Some(sessions)
        }
        Err(error) => {
            chat.report(&error);
            None
        }
    }
}

/// `/resume [n|id]`.
pub async fn resume(chat: &mut Chat, argument: &str) {
    let target = if argument.is_empty() {
        Target::MostRecent(true)
    } else if let Ok(n) = argument.parse::<usize>() {
        let listing = match chat.listing.clone() {
            Some(listing) => listing,
            None => match fetch_listing(chat).await {
                Some(listing) => listing,
                None => return,
            },
        };
        match n.checked_sub(1).and_then(|at| listing.get(at)) {
            Some(session) => Target::SessionId(session.session_id.clone()),
            None => {
                let text = chat.t(
                    "session.no_such_index",
                    &[("n", &n), ("count", &listing.len())],
                );
                chat.printer.red(&text);
                return;
            }
        }
    } else {
        Target::SessionId(argument.to_owned())
    };
    resume_target(chat, target, argument).await;
}

/// Opens an earlier session and shows its history; on failure says why and keeps the current one.
/// Returns whether the chat switched.
pub async fn resume_target(chat: &mut Chat, target: Target, typed: &str) -> bool {
    let most_recent = matches!(target, Target::MostRecent(_));
    match open(chat, target).await {
        Ok(opened) => {
            switch_to(chat, opened);
            announce_resumed(chat).await;
            true
        }
        Err(CallError::Hub(status)) => {
            let id = render::one_line(typed, 60);
            let text = match status.code() {
                Code::NotFound if most_recent => chat.t("session.none_to_resume", &[]),
                Code::NotFound => chat.t("session.not_found", &[("id", &id)]),
                Code::InvalidArgument => chat.t("session.invalid_id", &[("id", &id)]),
                _ => chat
                    .recognised_refusal(&status)
                    .unwrap_or_else(|| render::one_line(status.message(), 300)),
            };
            chat.printer.red(&text);
            if !chat.session_id().is_empty() {
                let kept = chat.t("session.kept", &[]);
                chat.printer.dim(&kept);
            }
            false
        }
        Err(error) => {
            chat.report(&error);
            false
        }
    }
}

/// Says which session was resumed and shows its stored history.
async fn announce_resumed(chat: &mut Chat) {
    let request = pb::GetSessionRequest {
        session_id: chat.session_id().to_owned(),
        include_messages: true,
        ..Default::default()
    };
    let detail = match call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.get_session(request),
    )
    .await
    {
        Ok(detail) => detail,
        Err(error) => return chat.report(&error),
    };
    if let Some(session) = detail.session {
        chat.session = session;
    }
    let session = chat.session.clone();
    let title = chat.title_of(&session);
    let text = chat.t(
        "session.resumed",
        &[
            ("id", &session.session_id),
            ("title", &title),
            ("count", &session.message_count),
        ],
    );
    chat.printer.line(&text);
    if detail.messages.is_empty() {
        return;
    }
    let header = chat.t(
        "banner.history",
        &[
            ("id", &session.session_id),
            ("count", &detail.messages.len()),
        ],
    );
    chat.printer.dim(&header);
    let skip = detail.messages.len().saturating_sub(HISTORY_SHOWN);
    if skip > 0 {
        let text = chat.t("history.earlier", &[("count", &skip)]);
        chat.printer.dim(&text);
    }
    let marks = stored_turn_marks(chat).await;
    let lines = history::history_lines(
        &chat.messages,
        chat.lang,
        detail.messages.get(skip..).unwrap_or_default(),
        &marks,
    );
    history::print_history(&mut chat.printer, &lines);
}

/// The session's stored events a replay places (stops, repairs, tool calls). The replay goes on without them when the hub
/// cannot give its events (an older hub, a store error): the messages are the history.
async fn stored_turn_marks(chat: &mut Chat) -> history::EventMarks {
    let request = pb::ReadEventsRequest {
        session_id: chat.session_id().to_owned(),
    };
    match call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.read_events(request),
    )
    .await
    {
        Ok(response) => {
            let presenter = Presenter::new(&chat.messages, chat.lang).with_limits(chat.info.limits);
            history::event_marks(&presenter, &response.events)
        }
        Err(error) => {
            tracing::debug!("the session's stored events could not be read: {error:?}");
            history::EventMarks::default()
        }
    }
}

/// `/new`.
pub async fn new_session(chat: &mut Chat) {
    match open(chat, Target::NewSession(true)).await {
        Ok(opened) => {
            switch_to(chat, opened);
            let id = chat.session_id().to_owned();
            let text = chat.t("session.new", &[("id", &id)]);
            chat.printer.line(&text);
        }
        Err(error) => chat.report(&error),
    }
}

/// `/session`: id, title, message count, role and store backend.
pub async fn show(chat: &mut Chat) {
    let request = pb::GetSessionRequest {
        session_id: chat.session_id().to_owned(),
        include_messages: false,
        ..Default::default()
    };
    match call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.get_session(request),
    )
    .await
    {
        Ok(detail) => {
            if let Some(session) = detail.session {
                chat.session = session;
            }
        }
        Err(error) => return chat.report(&error),
    }
    let request = chat.hub.get_status(pb::GetStatusRequest {});
    let backend = match call(&mut chat.interrupts, chat.deadlines.call, request).await {
        Ok(status) => status.session_backend,
        Err(CallError::Hub(_)) => String::new(),
        Err(error) => return chat.report(&error),
    };
    let session = chat.session.clone();
    let unknown = chat.t("value.unknown", &[]);
    let rows = [
        ("label.id", session.session_id.clone()),
        ("label.title", chat.title_of(&session)),
        ("label.messages", session.message_count.to_string()),
        ("label.role", chat.role.clone()),
        (
            "label.backend",
            if backend.is_empty() { unknown } else { backend },
        ),
    ];
    for (label, value) in rows {
        let label = chat.t(label, &[]);
        chat.printer.line(&format!("  {label}: {value}"));
    }
}

/// `/compact [focus]`: summarize into a new session; the old one is kept.
pub async fn compact(chat: &mut Chat, focus: &str) {
    let request = pb::GetSessionRequest {
        session_id: chat.session_id().to_owned(),
        include_messages: false,
        ..Default::default()
    };
    let count = match call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.get_session(request),
    )
    .await
    {
        Ok(detail) => detail.session.map_or(0, |session| session.message_count),
        Err(error) => return chat.report(&error),
    };
    if count == 0 {
        let text = chat.t("compact.empty", &[]);
        chat.printer.line(&text);
        return;
    }
    let running = chat.t("compact.running", &[("n", &count)]);
    chat.printer.dim(&running);
    let request = pb::CompactSessionRequest {
        session_id: chat.session_id().to_owned(),
        focus: focus.to_owned(),
        channel: CHANNEL.to_owned(),
    };
    let compacted = match call(
        &mut chat.interrupts,
        chat.deadlines.compact,
        chat.hub.compact_session(request),
    )
    .await
    {
        Ok(compacted) => compacted,
        Err(CallError::Hub(status)) => {
            let reason = render::one_line(status.message(), 300);
            let text = chat.t("compact.failed", &[("reason", &reason)]);
            chat.printer.red(&text);
            return;
        }
        Err(error) => return chat.report(&error),
    };
    let Some(session) = compacted.session else {
        let text = chat.t("compact.failed", &[("reason", &"no new session")]);
        chat.printer.red(&text);
        return;
    };
    chat.session = session;
    let id = chat.session_id().to_owned();
    let text = chat.t(
        "compact.done",
        &[
            ("n", &compacted.summarized_messages),
            ("id", &id),
            ("old", &compacted.previous_session_id),
        ],
    );
    chat.printer.line(&text);
    let header = chat.t("compact.summary", &[]);
    chat.printer.dim(&header);
    let summary = render::sanitize(compacted.summary.trim());
    for line in summary.lines() {
        chat.printer.line(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_shortened_to_minutes() {
        assert_eq!(short_date("2026-11-30T01:46:39Z"), "2026-11-30 01:46");
        assert_eq!(
            short_date("2026-11-30T01:46:39.123+00:00"),
            "2026-11-30 01:46"
        );
        assert_eq!(short_date(""), "");
        assert_eq!(short_date("yesterday"), "yesterday");
    }
}
