//! What happens in a session, as the hub tells its clients: [`SessionEvent`] (one numbered event)
//! and its [`EventKind`]s, plus the small value types they carry ([`TurnInfo`], [`PendingInfo`]);
//! how an approval ended is the gate's [`ApprovalOutcome`]; a `tool_call`'s arguments as a person
//! reads them ([`shown_arguments`]).
//!
//! Invariants: these are domain types (no tonic, no prost); an event is immutable once published
//! (the bus shares it as `Arc<SessionEvent>`); `seq` is assigned by the session's bus only.

use std::time::Duration;

use crate::agent::TurnEnd;
use crate::gate::{
    ApprovalOutcome, ApprovalRequest, ErrorEvent, ToolCallEvent, format_approval_arguments,
};
use crate::tool::ToolProgress;

/// One event of a session, numbered by the session's bus.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    /// Contiguous per session (and hub process): each event's seq is the previous one's plus one.
    pub seq: u64,
    pub session_id: String,
    /// The turn it belongs to, if any.
    pub turn_id: Option<String>,
    /// When it was published (RFC 3339, UTC).
    pub at: String,
    pub kind: EventKind,
}

impl SessionEvent {
    /// About how many bytes this event holds in memory: its own size and the text it carries
    /// (what bounds the session's replay buffer; an estimate, not an allocator's count).
    pub fn estimated_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.session_id.len()
            + self.turn_id.as_ref().map_or(0, String::len)
            + self.at.len()
            + self.kind.text_bytes()
    }
}

/// The heap bytes of a JSON value, about.
fn json_bytes(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        Value::String(text) => text.len(),
        Value::Array(items) => items
            .iter()
            .map(|v| std::mem::size_of::<Value>() + json_bytes(v))
            .sum(),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| k.len() + 2 * std::mem::size_of::<Value>() + json_bytes(v))
            .sum(),
    }
}

fn opt_len(text: Option<&String>) -> usize {
    text.map_or(0, String::len)
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// A turn was accepted and waits behind `ahead` others.
    TurnQueued { turn: TurnInfo, ahead: u32 },
    /// A turn began to run.
    TurnStarted { turn: TurnInfo },
    /// Streamed answer text.
    TextDelta(String),
    /// Streamed reasoning text.
    ReasoningDelta(String),
    /// The model started a tool call.
    ToolUseStarted { tool_use_id: String, name: String },
    /// A running tool's latest progress report (live only: never stored, not replayed after a
    /// restart; rate-limited by the agent).
    ToolProgress {
        tool_use_id: String,
        tool: String,
        progress: ToolProgress,
    },
    /// A tool call finished, was refused or cancelled (the stored `tool_call` record).
    ToolCall(ToolCallEvent),
    /// A tier-2 call waits for a decision; it is already recorded in the session's events.
    ApprovalRequested(PendingInfo),
    /// A pending approval ended.
    ApprovalResolved {
        approval_id: String,
        tool: String,
        tool_use_id: String,
        resolution: ApprovalOutcome,
        /// The channel whose client decided; `None` when nobody did.
        decided_by_channel: Option<String>,
    },
    /// The provider was throttled; text streamed so far in this model call is void.
    Throttled { delay: Duration },
    /// Text and tool input streamed so far in this model call are void; the call goes on.
    OutputDiscarded,
    /// The turn is over (exactly one per turn).
    TurnEnded(TurnEnd),
    /// Something went wrong around a tool call.
    Error(ErrorEvent),
    /// The session's agent now runs on another role.
    RoleSwitched { role: String, previous_role: String },
}

impl EventKind {
    /// The bytes of the text this event carries beyond its own size, about (see
    /// [`SessionEvent::estimated_bytes`]).
    pub fn text_bytes(&self) -> usize {
        match self {
            Self::TurnQueued { turn, .. } | Self::TurnStarted { turn } => turn.text_bytes(),
            Self::TextDelta(text) | Self::ReasoningDelta(text) => text.len(),
            Self::ToolUseStarted { tool_use_id, name } => tool_use_id.len() + name.len(),
            Self::ToolProgress {
                tool_use_id,
                tool,
                progress,
            } => tool_use_id.len() + tool.len() + progress.message.len(),
            Self::ToolCall(call) => {
                call.tool.len()
                    + json_bytes(&call.arguments)
                    + call.result_summary.len()
                    + call.tool_use_id.len()
                    + call.session_id.len()
                    + call.channel.len()
            }
            Self::ApprovalRequested(pending) => {
                let request = &pending.request;
                request.approval_id.len()
                    + request.tool.len()
                    + json_bytes(&request.arguments)
                    + request.effect.len()
                    + request.session_id.len()
                    + request.channel.len()
                    + request.tool_use_id.len()
                    + pending.turn_id.len()
                    + pending.asked_at.len()
                    + opt_len(pending.deadline.as_ref())
            }
            Self::ApprovalResolved {
                approval_id,
                tool,
                tool_use_id,
                decided_by_channel,
                ..
            } => {
                approval_id.len()
                    + tool.len()
                    + tool_use_id.len()
                    + opt_len(decided_by_channel.as_ref())
            }
            Self::Throttled { .. } | Self::OutputDiscarded => 0,
            Self::TurnEnded(end) => end.text.len() + opt_len(end.notice.as_ref()),
            Self::Error(error) => {
                error.location.len()
                    + error.message.len()
                    + opt_len(error.tool.as_ref())
                    + opt_len(error.tool_use_id.as_ref())
                    + error.session_id.len()
            }
            Self::RoleSwitched {
                role,
                previous_role,
            } => role.len() + previous_role.len(),
        }
    }

    /// A short name for logs and `--json` output.
    pub fn name(&self) -> &'static str {
        match self {
            Self::TurnQueued { .. } => "turn_queued",
            Self::TurnStarted { .. } => "turn_started",
            Self::TextDelta(_) => "text_delta",
            Self::ReasoningDelta(_) => "reasoning_delta",
            Self::ToolUseStarted { .. } => "tool_use_started",
            Self::ToolProgress { .. } => "tool_progress",
            Self::ToolCall(_) => "tool_call",
            Self::ApprovalRequested(_) => "approval_requested",
            Self::ApprovalResolved { .. } => "approval_resolved",
            Self::Throttled { .. } => "throttled",
            Self::OutputDiscarded => "output_discarded",
            Self::TurnEnded(_) => "turn_ended",
            Self::Error(_) => "error",
            Self::RoleSwitched { .. } => "role_switched",
        }
    }
}

/// A turn as snapshots and events show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnInfo {
    pub turn_id: String,
    pub channel: String,
    /// The user's text.
    pub text: String,
    /// When it was accepted (RFC 3339, UTC).
    pub accepted_at: String,
}

impl TurnInfo {
    fn text_bytes(&self) -> usize {
        self.turn_id.len() + self.channel.len() + self.text.len() + self.accepted_at.len()
    }
}

/// A tier-2 approval waiting for a decision, as clients see it: the gate's record of the question
/// and where and when the hub asked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingInfo {
    /// The question (its session, channel, tool, arguments …). Only a client attached on its
    /// channel may decide; clients are shown its arguments with
    /// [`ApprovalRequest::formatted_arguments`].
    pub request: ApprovalRequest,
    /// The turn that asked (empty when the call came from outside a turn).
    pub turn_id: String,
    /// RFC 3339, UTC.
    pub asked_at: String,
    /// RFC 3339, UTC; `None` when no timeout applies.
    pub deadline: Option<String>,
    /// Asked by a turn no client started (a routine's): it is shown to every client subscribed
    /// to its session, whatever their channel, and to the watchers of its channel; it does not end
    /// when they leave, only at its deadline (or a decision, a cancel, a restart).
    pub held: bool,
}

/// Now, as RFC 3339 UTC text.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now().to_string()
}

/// The arguments of a `tool_call` record as shown to a person.
pub fn shown_arguments(record: &ToolCallEvent) -> String {
    if record.arguments.is_null() {
        return String::new();
    }
    format_approval_arguments(&record.arguments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_utc() {
        assert!(now_rfc3339().ends_with('Z'));
    }
}
