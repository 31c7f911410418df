//! The JSON the page reads: a session's events, a pending approval, a session's summary and a
//! stream's snapshot.
//!
//! Invariants: an approval's arguments leave only as the gate formats them for a person (sorted
//! JSON, control and bidirectional characters escaped), together with its tool, tier and effect,
//! so the card shows exactly what the decision covers; text is sent as data for the page to set as
//! text, never as markup, and every text from a model, a tool or a person leaves with its hiding
//! characters written visibly (`tau_api::display`, the rule every client shows text by).

use serde_json::{Value, json};
use tau_api::display::{escape_hidden, escape_hidden_in_prose};

use crate::hub::Snapshot;
use crate::hub::sessions::SessionSummary;
use crate::hub::{EventKind, PendingInfo, SessionEvent};

/// A pending approval, as the card shows it.
pub fn pending(info: &PendingInfo) -> Value {
    let request = &info.request;
    json!({
        "approval_id": request.approval_id,
        "session_id": request.session_id,
        "channel": request.channel,
        "tool": request.tool,
        "tier": request.tier.number(),
        "arguments": request.formatted_arguments(),
        "effect": request.effect,
        "asked_at": info.asked_at,
        "deadline": info.deadline,
        "held": info.held,
    })
}

/// A session in a listing.
pub fn session(summary: &SessionSummary) -> Value {
    json!({
        "session_id": summary.session_id,
        "title": escape_hidden(&summary.title),
        "updated_at": summary.updated_at,
        "channel": summary.channel,
        "message_count": summary.message_count,
        "role": summary.role,
    })
}

/// The first message of a stream.
pub fn snapshot(snapshot: &Snapshot, stream_key: &str) -> Value {
    json!({
        "session": session(&snapshot.session),
        "running": snapshot.running.as_ref().map(|t| t.turn_id.clone()),
        "pending": snapshot.pending.iter().map(pending).collect::<Vec<_>>(),
        "last_seq": snapshot.last_seq,
        "stream_id": snapshot.stream_id,
        "stream_key": stream_key,
        "role": snapshot.role,
    })
}

/// A person's or a model's text: emoji sequences read as themselves. A delta is escaped on its
/// own, so a sequence split between two deltas shows its selector escaped.
fn prose(text: &str) -> String {
    escape_hidden_in_prose(None, text)
}

/// One event: `{"seq", "turn_id", "type", …}`.
pub fn event(event: &SessionEvent) -> Value {
    let mut out = json!({
        "seq": event.seq,
        "turn_id": event.turn_id,
        "type": event.kind.name(),
    });
    let body = match &event.kind {
        EventKind::TurnQueued { turn, ahead } => json!({"text": prose(&turn.text), "ahead": ahead}),
        EventKind::TurnStarted { turn } => {
            json!({"text": prose(&turn.text), "channel": turn.channel})
        }
        EventKind::TextDelta(text) | EventKind::ReasoningDelta(text) => {
            json!({"text": prose(text)})
        }
        EventKind::ToolUseStarted { tool_use_id, name } => {
            json!({"tool_use_id": tool_use_id, "tool": escape_hidden(name)})
        }
        EventKind::ToolProgress {
            tool_use_id,
            tool,
            progress,
        } => json!({
            "tool_use_id": tool_use_id,
            "tool": escape_hidden(tool),
            "message": escape_hidden(&progress.message),
        }),
        EventKind::ToolCall(call) => json!({
            "tool_use_id": call.tool_use_id,
            "tool": escape_hidden(&call.tool),
            "tier": call.tier.map(|t| t.number()),
            "status": call.status,
            "approval": call.approval.as_str(),
            "result_summary": escape_hidden(&call.result_summary),
            "duration_ms": call.duration_ms,
        }),
        EventKind::ApprovalRequested(info) => json!({"approval": pending(info)}),
        EventKind::ApprovalResolved {
            approval_id,
            tool,
            resolution,
            decided_by_channel,
            ..
        } => json!({
            "approval_id": approval_id,
            "tool": escape_hidden(tool),
            "resolution": resolution.as_str(),
            "decided_by_channel": decided_by_channel,
        }),
        EventKind::Throttled { delay } => json!({"delay_ms": delay.as_millis()}),
        EventKind::OutputDiscarded => json!({}),
        EventKind::TurnEnded(end) => json!({
            "stop_reason": end.stop_reason.as_str(),
            "text": prose(&end.text),
            "notice": end.notice.as_deref().map(escape_hidden),
        }),
        EventKind::Error(error) => json!({
            "message": escape_hidden(&error.message),
            "tool": error.tool.as_deref().map(escape_hidden),
        }),
        EventKind::RoleSwitched {
            role,
            previous_role,
        } => json!({"role": role, "previous_role": previous_role}),
    };
    if let (Value::Object(out), Value::Object(body)) = (&mut out, body) {
        out.extend(body);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event_of(kind: EventKind) -> SessionEvent {
        SessionEvent {
            seq: 1,
            session_id: "s".into(),
            turn_id: Some("t".into()),
            at: "2026-12-06T00:00:00Z".into(),
            kind,
        }
    }

    /// A reply's bidirectional override, tag and zero-width characters reach the page written
    /// visibly, as `tau chat` shows them; its emoji keep their selector.
    #[test]
    fn a_reply_reaches_the_page_with_its_hiding_characters_visible() {
        let json = event(&event_of(EventKind::TextDelta(
            "rm \u{202e}txt.exe\u{e0041}\u{200b} \u{2764}\u{fe0f}".into(),
        )));
        assert_eq!(
            json["text"],
            "rm \\u{202e}txt.exe\\u{e0041}\\u{200b} \u{2764}\u{fe0f}"
        );
        let json = event(&event_of(EventKind::ToolUseStarted {
            tool_use_id: "u".into(),
            name: "lamp\u{ad}on".into(),
        }));
        assert_eq!(json["tool"], "lamp\\u{ad}on");
    }
}
