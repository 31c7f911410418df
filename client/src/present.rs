//! One presentation of a session's events: a live event (`SessionEvent`) and a stored one
//! (`StoredEvent`, read once by `crate::stored_event`) have one line. The TUI's events pane shows
//! live and replayed sessions through here, and `tau ask --json` names statuses with the same
//! words.
//!
//! Invariants: the same event reads the same, live or replayed; a stored record that is not JSON,
//! or lacks a field, shows `?` for what is missing rather than failing; a tier is the number people
//! read (`tau_api::tiers`); every text from the hub goes through `render::one_line`.

use tau_api::proto::v1::{self as pb, session_event::Kind};

use crate::chat::render;
pub use crate::stored_event::{Stored, ToolCallFacts, read_stored};

impl ToolCallFacts {
    /// A live tool call's facts.
    pub fn live(call: &pb::ToolCallFinished) -> Self {
        Self {
            tool: Some(call.tool.clone()),
            tier: tau_api::tiers::tier_number(call.tier),
            status: Some(tool_status_name(call.status).to_owned()),
            approval: Some(call.approval.clone()),
            duration_ms: Some(call.duration_ms),
        }
    }

    /// Its line (`✓ tool · tier 2 · success · approved · 7 ms`), and whether it reads as an
    /// error (anything but a success).
    pub fn line(&self) -> (String, bool) {
        let ok = self.status.as_deref() == Some("success");
        let text = format!(
            "{} {} · tier {} · {} · {} · {} ms",
            if ok { "✓" } else { "✗" },
            shown(self.tool.as_deref()),
            self.tier.map_or_else(|| "?".to_owned(), |t| t.to_string()),
            shown(self.status.as_deref()),
            shown(self.approval.as_deref()),
            self.duration_ms
                .map_or_else(|| "?".to_owned(), |ms| ms.to_string()),
        );
        (text, !ok)
    }
}

/// A text from the hub on one line, `?` when absent.
fn shown(text: Option<&str>) -> String {
    text.map_or_else(|| "?".to_owned(), |t| render::one_line(t, 60))
}

/// The events-pane line of a live event, and whether it reads as an error; `None` for events the
/// pane does not list (text, progress and turn bookkeeping are shown elsewhere).
pub fn live_line(kind: &Kind) -> Option<(String, bool)> {
    match kind {
        Kind::ToolCall(call) => Some(ToolCallFacts::live(call).line()),
        Kind::ApprovalRequested(requested) => requested.approval.as_ref().map(|approval| {
            let text = format!(
                "? {} (tier {}) [{}]",
                render::one_line(&approval.tool, 60),
                tau_api::tiers::tier_text(approval.tier),
                render::one_line(&approval.channel, 20)
            );
            (text, false)
        }),
        Kind::ApprovalResolved(resolved) => Some((
            approval_line(
                Some(&resolved.tool),
                Some(resolution_name(resolved.resolution)),
            ),
            false,
        )),
        _ => None,
    }
}

/// The events-pane line of a stored event, and whether it reads as an error.
pub fn stored_line(stored: &Stored) -> (String, bool) {
    match stored {
        Stored::ToolCall(facts) => facts.line(),
        Stored::Approval { tool, status } => {
            (approval_line(tool.as_deref(), status.as_deref()), false)
        }
        Stored::Error { message } => (format!("! {}", shown_long(message.as_deref())), true),
        Stored::TurnStopped {
            stop_reason,
            notice,
            ..
        } => {
            let reason = shown(stop_reason.as_deref());
            let text = format!("■ stopped: {reason} · {}", shown_long(notice.as_deref()));
            (text, reason == "error")
        }
        Stored::TurnRepaired { notice, .. } => (
            format!("↺ repaired: {}", shown_long(notice.as_deref())),
            false,
        ),
        Stored::Other(name) => (render::one_line(name, 60), false),
    }
}

/// An approval's end (`= tool: approved`), live (its resolution) or stored (its status).
fn approval_line(tool: Option<&str>, how: Option<&str>) -> String {
    format!("= {}: {}", shown(tool), shown(how))
}

/// A longer text from the hub on one line, `?` when absent.
fn shown_long(text: Option<&str>) -> String {
    text.map_or_else(|| "?".to_owned(), |t| render::one_line(t, 300))
}

/// The lower-case name of a tool call's status.
pub fn tool_status_name(status: i32) -> &'static str {
    match pb::ToolCallStatus::try_from(status) {
        Ok(pb::ToolCallStatus::Success) => "success",
        Ok(pb::ToolCallStatus::Error) => "error",
        Ok(pb::ToolCallStatus::Refused) => "refused",
        Ok(pb::ToolCallStatus::Cancelled) => "cancelled",
        Ok(pb::ToolCallStatus::Unspecified) | Err(_) => "unknown",
    }
}

/// The lower-case name of an approval resolution.
pub fn resolution_name(resolution: i32) -> &'static str {
    match pb::ApprovalResolution::try_from(resolution) {
        Ok(pb::ApprovalResolution::Approved) => "approved",
        Ok(pb::ApprovalResolution::Rejected) => "rejected",
        Ok(pb::ApprovalResolution::Timeout) => "timeout",
        Ok(pb::ApprovalResolution::Cancelled) => "cancelled",
        Ok(pb::ApprovalResolution::ChannelClosed) => "channel_closed",
        Ok(pb::ApprovalResolution::ExpiredByRestart) => "expired_by_restart",
        Ok(pb::ApprovalResolution::Unspecified) | Err(_) => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(kind: &str, json: &str) -> pb::StoredEvent {
        pb::StoredEvent {
            r#type: kind.into(),
            json: json.into(),
        }
    }

    /// The gate's stored `tool_call` and the live `ToolCallFinished` of one call read the same.
    #[test]
    fn a_tool_call_reads_the_same_live_and_replayed() {
        let live = pb::ToolCallFinished {
            tool: "demo_physical_action".into(),
            tier: pb::Tier::Physical as i32,
            status: pb::ToolCallStatus::Success as i32,
            approval: "approved".into(),
            duration_ms: 7,
            ..Default::default()
        };
        let replayed = read_stored(&stored(
            "tool_call",
            r#"{"type":"tool_call","tool":"demo_physical_action","tier":2,"status":"success","approval":"approved","duration_ms":7,"v":1}"#,
        ));
        let expected = "✓ demo_physical_action · tier 2 · success · approved · 7 ms";
        assert_eq!(stored_line(&replayed), (expected.to_owned(), false));
        assert_eq!(
            live_line(&Kind::ToolCall(live)),
            Some((expected.to_owned(), false))
        );
    }

    #[test]
    fn an_approval_ends_the_same_live_and_replayed() {
        let live = live_line(&Kind::ApprovalResolved(pb::ApprovalResolved {
            tool: "lamp".into(),
            resolution: pb::ApprovalResolution::Rejected as i32,
            ..Default::default()
        }));
        let replayed = stored_line(&read_stored(&stored(
            "approval",
            r#"{"type":"approval","tool":"lamp","status":"rejected"}"#,
        )));
        assert_eq!(live, Some(replayed));
    }

    #[test]
    fn what_is_missing_or_broken_shows_as_a_question_mark() {
        assert_eq!(
            stored_line(&read_stored(&stored("tool_call", "not json"))),
            ("✗ ? · tier ? · ? · ? · ? ms".to_owned(), true)
        );
        assert_eq!(
            read_stored(&stored("tool_call", r#"{"tier":"two"}"#)),
            Stored::ToolCall(ToolCallFacts::default()),
            "a field of the wrong type loses the record's facts, never the replay"
        );
        assert_eq!(
            read_stored(&stored("routine_fired", "{}")),
            Stored::Other("routine_fired".into())
        );
    }
}
