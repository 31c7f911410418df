//! The JSON the page reads: a session's events, a pending approval, a session's summary and a
//! stream's snapshot.
//!
//! Invariants: an approval's arguments leave only as the gate formats them for a person (sorted
//! JSON, control and bidirectional characters escaped), together with its tool, tier and effect,
//! so the card shows exactly what the decision covers; text is sent as data for the page to set as
//! text, never as markup, and every text from a model, a tool or a person leaves with its hiding
//! characters written visibly (`tau_api::display`, the rule every client shows text by); a
//! streamed delta is escaped knowing the last character of the turn's reply (or reasoning) sent
//! before it on the same stream, or on the stream a resumed one carries on ([`DeltaEdges`]), as
//! `tau chat` prints it, so an emoji sequence split between two deltas (or by a reconnection)
//! reads whole while a selector after ordinary text stays escaped.

use std::sync::Arc;

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

/// A person's or a model's text, whole: emoji sequences read as themselves.
fn prose(text: &str) -> String {
    escape_hidden_in_prose(None, text)
}

/// What one stream sent last of the running turn's reply and reasoning: the character a next
/// delta's emoji selector or joiner may follow. Bounded: one turn id and two characters; a delta
/// of another turn starts afresh.
#[derive(Debug, Default)]
pub struct DeltaEdges {
    turn_id: Option<String>,
    reply: Option<char>,
    reasoning: Option<char>,
}

impl DeltaEdges {
    /// The edges after `lead`, the deltas a resumed stream's page had before it
    /// (`EventStream::take_lead`), so a resumption between an emoji and its selector reads whole.
    pub fn after(lead: &[Arc<SessionEvent>]) -> Self {
        let mut edges = Self::default();
        for event in lead {
            let (reasoning, text) = match &event.kind {
                EventKind::TextDelta(text) => (false, text),
                EventKind::ReasoningDelta(text) => (true, text),
                _ => continue,
            };
            edges.delta(event.turn_id.as_deref(), reasoning, text);
        }
        edges
    }

    /// `text`, a delta of `turn_id`'s reply (or reasoning), escaped after what was sent of it.
    fn delta(&mut self, turn_id: Option<&str>, reasoning: bool, text: &str) -> String {
        if self.turn_id.as_deref() != turn_id {
            *self = Self {
                turn_id: turn_id.map(str::to_owned),
                ..Self::default()
            };
        }
        let edge = if reasoning {
            &mut self.reasoning
        } else {
            &mut self.reply
        };
        let shown = escape_hidden_in_prose(*edge, text);
        *edge = text.chars().last().or(*edge);
        shown
    }
}

/// One event: `{"seq", "turn_id", "type", …}`; `edges` is what the same stream sent before it.
pub fn event(event: &SessionEvent, edges: &mut DeltaEdges) -> Value {
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
        EventKind::TextDelta(text) => {
            json!({"text": edges.delta(event.turn_id.as_deref(), false, text)})
        }
        EventKind::ReasoningDelta(text) => {
            json!({"text": edges.delta(event.turn_id.as_deref(), true, text)})
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
        let json = event(
            &event_of(EventKind::TextDelta(
                "rm \u{202e}txt.exe\u{e0041}\u{200b} \u{2764}\u{fe0f}".into(),
            )),
            &mut DeltaEdges::default(),
        );
        assert_eq!(
            json["text"],
            "rm \\u{202e}txt.exe\\u{e0041}\\u{200b} \u{2764}\u{fe0f}"
        );
        let json = event(
            &event_of(EventKind::ToolUseStarted {
                tool_use_id: "u".into(),
                name: "lamp\u{ad}on".into(),
            }),
            &mut DeltaEdges::default(),
        );
        assert_eq!(json["tool"], "lamp\\u{ad}on");
    }

    /// The page's text of `deltas` (turn id, reply or reasoning, text) sent on one stream.
    fn streamed(deltas: &[(&str, bool, &str)]) -> Vec<String> {
        let mut edges = DeltaEdges::default();
        deltas
            .iter()
            .map(|&(turn, reasoning, text)| {
                let kind = if reasoning {
                    EventKind::ReasoningDelta(text.into())
                } else {
                    EventKind::TextDelta(text.into())
                };
                let mut delta = event_of(kind);
                delta.turn_id = Some(turn.into());
                event(&delta, &mut edges)["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    /// An emoji and its selector, or a ZWJ sequence, split between two deltas reach the page
    /// whole, as `tau chat` prints them; a tool's start between them changes nothing.
    #[test]
    fn an_emoji_sequence_split_between_deltas_reads_whole() {
        assert_eq!(
            streamed(&[("t", false, "I \u{2764}"), ("t", false, "\u{fe0f} it")]).concat(),
            "I \u{2764}\u{fe0f} it"
        );
        assert_eq!(
            streamed(&[("t", false, "\u{1f469}"), ("t", false, "\u{200d}\u{1f4bb}")]).concat(),
            "\u{1f469}\u{200d}\u{1f4bb}"
        );
        let mut edges = DeltaEdges::default();
        let mut delta = |kind| {
            let mut delta = event_of(kind);
            delta.turn_id = Some("t".into());
            event(&delta, &mut edges)
        };
        delta(EventKind::TextDelta("\u{2764}".into()));
        delta(EventKind::ToolUseStarted {
            tool_use_id: "u".into(),
            name: "lamp".into(),
        });
        assert_eq!(
            delta(EventKind::TextDelta("\u{fe0f}".into()))["text"],
            "\u{fe0f}"
        );
    }

    /// A stream resumed between an emoji and its selector carries on from the deltas the page had
    /// before it (`EventStream::take_lead`): the selector reads whole, as on one stream; with no
    /// lead (a fresh page, which was never sent the emoji) it stays escaped.
    #[test]
    fn a_resumed_stream_carries_on_from_the_deltas_before_it() {
        let mut had = event_of(EventKind::TextDelta("I \u{2764}".into()));
        had.seq = 3;
        let mut thought = event_of(EventKind::ReasoningDelta("hmm".into()));
        thought.seq = 2;
        let lead = [Arc::new(thought), Arc::new(had)];
        let selector = event_of(EventKind::TextDelta("\u{fe0f} it".into()));
        assert_eq!(
            event(&selector, &mut DeltaEdges::after(&lead))["text"],
            "\u{fe0f} it"
        );
        assert_ne!(
            event(&selector, &mut DeltaEdges::after(&[]))["text"],
            "\u{fe0f} it"
        );
    }

    /// A selector with no emoji before it in its turn's reply stays escaped: at the start, after
    /// ordinary text, after the reasoning's emoji, or after the last turn's.
    #[test]
    fn a_selector_without_its_emoji_stays_escaped() {
        let escaped = "\\u{fe0f}";
        assert_eq!(streamed(&[("t", false, "\u{fe0f}")]), [escaped]);
        assert_eq!(
            streamed(&[("t", false, "ok"), ("t", false, "\u{fe0f}")])[1],
            escaped
        );
        assert_eq!(
            streamed(&[("t", true, "\u{2764}"), ("t", false, "\u{fe0f}")])[1],
            escaped
        );
        assert_eq!(
            streamed(&[("t", false, "\u{2764}"), ("u", false, "\u{fe0f}")])[1],
            escaped
        );
        // An empty delta keeps the edge.
        assert_eq!(
            streamed(&[
                ("t", false, "\u{2764}"),
                ("t", false, ""),
                ("t", false, "\u{fe0f}")
            ])[2],
            "\u{fe0f}"
        );
    }
}
