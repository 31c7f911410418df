//! Agent events the gate emits (`tool_call`, `approval`, `error`), the turn events the hub adds
//! (`turn_stopped`, `turn_repaired`), and the [`EventSink`] they go to (the hub's session recorder
//! implements it; tests use `testing::MemorySink`).
//!
//! Invariants: the vocabulary is additive: a new kind is a new `type`, and readers of events.jsonl
//! skip a `type` they do not know (an old file without the turn kinds reads as before); the events' field names and the string forms of their statuses ([`ToolCallStatus`]
//! here, the approval words in `super::approval`) are the stored vocabulary of events.jsonl and
//! never change meaning; `EventSink::emit` is synchronous and must not block, because the gate calls
//! it on the path of every tool call (a sink that needs I/O queues internally).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::approval::{ApprovalState, CallApproval};
use crate::tool::Tier;

/// What happened to a call, as recorded in a `tool_call` event's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    /// The tool ran and succeeded.
    Success,
    /// The tool ran and failed, or its input could not be read.
    Error,
    /// The gate refused the call (unknown tool, or a tier-2 call not approved); it did not run.
    Refused,
    /// The turn was cancelled before or while the tool ran.
    Cancelled,
}

impl ToolCallStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Refused => "refused",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One gated tool call, whatever its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallEvent {
    pub tool: String,
    /// `None` for a tool that is not registered.
    pub tier: Option<Tier>,
    pub arguments: Value,
    pub status: ToolCallStatus,
    pub result_summary: String,
    pub approval: CallApproval,
    /// How long the tool itself ran (0 when it did not run).
    pub duration_ms: u64,
    pub tool_use_id: String,
    pub session_id: String,
    pub channel: String,
}

/// One tier-2 question: emitted as `pending` before the approver is asked, then with the decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalEvent {
    pub approval_id: String,
    pub status: ApprovalState,
    pub tool: String,
    pub tier: Tier,
    pub arguments: Value,
    pub effect: String,
    pub tool_use_id: String,
    pub session_id: String,
    pub channel: String,
    /// The approver's name.
    pub approver: String,
    /// How long the question may stay open, when a timeout applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// How long the question was open (decided events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// Something went wrong around a call (an unknown tool, a failing approver or exemption).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorEvent {
    /// Where it happened, e.g. `tier_gate`.
    #[serde(rename = "where")]
    pub location: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    pub session_id: String,
}

/// A turn that did not end normally: a limit, a failed model call, a cancel. Written after the
/// turn, so the stored record says why it stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStoppedEvent {
    pub turn_id: String,
    /// The turn's stop reason: `limit_turns`, `limit_total_tokens`, `error` or `cancelled`.
    pub stop_reason: String,
    /// The notice the person was shown (and the next turn repeats to the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    pub model_calls: u32,
    pub session_id: String,
    pub channel: String,
    /// Where the event sits among the session's stored messages: the index of the first message
    /// stored after it (the session's message count when it was written). Absent in records
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_message: Option<u64>,
}

/// A turn that began by repairing an unfinished history: the notice put in front of its prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnRepairedEvent {
    pub turn_id: String,
    pub notice: String,
    pub session_id: String,
    pub channel: String,
    /// The index of the first message stored after the event (see
    /// [`TurnStoppedEvent::before_message`]): the repair and the turn's prompt come after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_message: Option<u64>,
}

/// An agent event, stored one per line in a session's events.jsonl (`{"type": "tool_call", ...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    ToolCall(ToolCallEvent),
    Approval(ApprovalEvent),
    Error(ErrorEvent),
    TurnStopped(TurnStoppedEvent),
    TurnRepaired(TurnRepairedEvent),
}

impl AgentEvent {
    /// The event's type name: `tool_call`, `approval`, `error`, `turn_stopped` or `turn_repaired`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ToolCall(_) => "tool_call",
            Self::Approval(_) => "approval",
            Self::Error(_) => "error",
            Self::TurnStopped(_) => "turn_stopped",
            Self::TurnRepaired(_) => "turn_repaired",
        }
    }
}

/// Receives agent events. `emit` must return quickly and never block; it is called while a tool
/// call is in flight (the `pending` approval event before anyone is asked, so a sink that persists
/// makes approvals durable).
pub trait EventSink: Send + Sync {
    fn emit(&self, event: AgentEvent);

    /// Records `event` and answers whether it is durably stored. The gate records an `approved`
    /// decision this way and issues the permit only on `Ok`. The default emits and reports success:
    /// a sink that does not persist has nothing that could fail.
    fn record(&self, event: AgentEvent) -> Result<(), SinkError> {
        self.emit(event);
        Ok(())
    }

    /// Takes `event` to be stored with the sink's next write, not on its own: the agent's turn
    /// hands a call's `tool_call` record over this way, since the message with the call's result
    /// is written right after it. The default emits at once.
    fn stage(&self, event: AgentEvent) {
        self.emit(event);
    }
}

/// An event that could not be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the event could not be stored: {0}")]
pub struct SinkError(pub String);

/// A sink that drops every event (an agent nobody records).
#[derive(Debug, Clone, Copy, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, _event: AgentEvent) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_call_event_serializes_with_type_and_vocabulary() {
        let event = AgentEvent::ToolCall(ToolCallEvent {
            tool: "current_time".into(),
            tier: Some(Tier::Read),
            arguments: json!({}),
            status: ToolCallStatus::Success,
            result_summary: "ok".into(),
            approval: CallApproval::NotRequired,
            duration_ms: 1,
            tool_use_id: "t1".into(),
            session_id: "s".into(),
            channel: "cli".into(),
        });
        let value = serde_json::to_value(&event).unwrap();
        assert_eq!(value["type"], "tool_call");
        assert_eq!(value["tier"], 0);
        assert_eq!(value["approval"], "not_required");
        assert_eq!(value["status"], "success");
        assert_eq!(event.kind(), "tool_call");
        assert_eq!(serde_json::from_value::<AgentEvent>(value).unwrap(), event);
    }

    #[test]
    fn turn_events_serialize_with_their_type() {
        let stopped = AgentEvent::TurnStopped(TurnStoppedEvent {
            turn_id: "t".into(),
            stop_reason: "limit_turns".into(),
            notice: Some("limit".into()),
            model_calls: 2,
            session_id: "s".into(),
            channel: "cli".into(),
            before_message: Some(3),
        });
        let value = serde_json::to_value(&stopped).unwrap();
        assert_eq!(value["before_message"], 3);
        assert_eq!(value["type"], "turn_stopped");
        assert_eq!(value["stop_reason"], "limit_turns");
        assert_eq!(stopped.kind(), "turn_stopped");
        assert_eq!(
            serde_json::from_value::<AgentEvent>(value).unwrap(),
            stopped
        );
        let repaired = AgentEvent::TurnRepaired(TurnRepairedEvent {
            turn_id: "t".into(),
            notice: "n".into(),
            session_id: "s".into(),
            channel: "cli".into(),
            before_message: None,
        });
        let value = serde_json::to_value(&repaired).unwrap();
        assert_eq!(value["type"], "turn_repaired");
        assert_eq!(repaired.kind(), "turn_repaired");
        assert!(value.get("before_message").is_none());
        assert_eq!(
            serde_json::from_value::<AgentEvent>(value).unwrap(),
            repaired
        );
    }
}
