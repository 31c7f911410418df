//! What happens in a session, as the hub tells its clients: [`SessionEvent`] (one numbered event)
//! and its [`EventKind`]s, plus the small value types they carry ([`TurnInfo`], [`PendingInfo`]);
//! how an approval ended is the gate's [`ApprovalOutcome`].
//!
//! Invariants: these are domain types (no tonic, no prost); an event is immutable once published
//! (the bus shares it as `Arc<SessionEvent>`); `seq` is assigned by the session's bus only.

use std::time::Duration;

use crate::agent::TurnEnd;
use crate::gate::{ApprovalOutcome, ApprovalRequest, ErrorEvent, ToolCallEvent};
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_utc() {
        assert!(now_rfc3339().ends_with('Z'));
    }
}
