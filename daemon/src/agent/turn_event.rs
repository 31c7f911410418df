//! What a turn tells its caller ([`TurnEvent`]), how a turn ends ([`TurnEnd`]), the per-turn
//! [`Limits`], and the system-prompt hook ([`SystemPromptSource`]).
//!
//! Invariants: every turn's event stream ends with exactly one `TurnEnd`; a `ToolResult` event
//! follows every tool call of the turn; `ApprovalAsked` precedes its `ApprovalDecided`.

use std::time::Duration;

use crate::gate::{ApprovalOutcome, ApprovalRequest, CallApproval, ToolCallStatus};
use crate::message::{SystemContentBlock, Usage};
use crate::model::StopReason;
use crate::tool::{Tier, ToolProgress};

/// One event of a running turn.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEvent {
    /// Streamed answer text.
    TextDelta(String),
    /// Streamed reasoning text.
    ReasoningDelta(String),
    /// The model started a tool call.
    ToolUseStarted { tool_use_id: String, name: String },
    /// A fragment of a tool call's input JSON (progress).
    ToolUseInput {
        tool_use_id: String,
        partial_json: String,
    },
    /// The provider was throttled and retries after `delay`; text streamed so far in this call is void.
    Throttled { delay: Duration },
    /// Text and tool input streamed so far in this model call are void (the provider gave up on
    /// that attempt, e.g. to answer with a fallback model); the call goes on.
    OutputDiscarded,
    /// A tier-2 call waits for a decision (already recorded as pending).
    ApprovalAsked(ApprovalRequest),
    /// The decision for an asked approval.
    ApprovalDecided {
        approval_id: String,
        tool_use_id: String,
        tool: String,
        decision: ApprovalOutcome,
    },
    /// A running tool reported progress (the latest report, at most one per
    /// `PROGRESS_INTERVAL` per call; never stored). The call's `ToolResult` follows its last one.
    ToolProgress {
        tool_use_id: String,
        tool: String,
        progress: ToolProgress,
    },
    /// A tool call finished (or was refused or cancelled).
    ToolResult {
        tool_use_id: String,
        tool: String,
        tier: Option<Tier>,
        status: ToolCallStatus,
        approval: CallApproval,
        summary: String,
        duration_ms: u64,
    },
    /// The turn is over.
    TurnEnd(TurnEnd),
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEnd {
    pub stop_reason: StopReason,
    /// The text of the last assistant message of this turn (empty when there was none).
    pub text: String,
    /// Usage summed over the turn's model calls.
    pub usage: Usage,
    pub model_calls: u32,
    /// A short English notice for the person when the turn did not end normally (limit, cancel,
    /// error); the next turn repeats it to the model when the history was left dangling.
    pub notice: Option<String>,
}

/// Per-turn budgets, checked before each model call; hitting one ends the turn with a `limit_*`
/// stop reason (the last call may overshoot `total_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Model calls per user turn (`[agent] max_turns`).
    pub turns: Option<u32>,
    /// Tokens (input + output, summed over the turn's calls) per user turn (`[agent] max_total_tokens`).
    pub total_tokens: Option<u64>,
}

impl Limits {
    /// The `[agent]` default: 12 model calls, no token budget.
    pub const DEFAULT_TURNS: u32 = 12;

    /// No limits at all.
    pub fn unlimited() -> Self {
        Self {
            turns: None,
            total_tokens: None,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            turns: Some(Self::DEFAULT_TURNS),
            total_tokens: None,
        }
    }
}

/// Builds the system prompt; asked before every model call, so it must answer quickly (the persona
/// implements it over cached files).
pub trait SystemPromptSource: Send + Sync {
    fn system_content(&self) -> Vec<SystemContentBlock>;
}

/// A fixed system prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticSystemPrompt {
    blocks: Vec<SystemContentBlock>,
}

impl StaticSystemPrompt {
    /// One text block; an empty string means no system prompt.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let blocks = if text.is_empty() {
            Vec::new()
        } else {
            vec![SystemContentBlock::Text(text)]
        };
        Self { blocks }
    }

    /// Exactly these blocks.
    pub fn blocks(blocks: Vec<SystemContentBlock>) -> Self {
        Self { blocks }
    }
}

impl SystemPromptSource for StaticSystemPrompt {
    fn system_content(&self) -> Vec<SystemContentBlock> {
        self.blocks.clone()
    }
}

/// The sending side of a turn's bounded event channel. A caller that went away does not stop the
/// turn: sends to a closed channel are dropped (the turn still finishes and is stored).
#[derive(Debug, Clone)]
pub(crate) struct TurnOutput {
    sender: tokio::sync::mpsc::Sender<TurnEvent>,
}

impl TurnOutput {
    pub(crate) fn new(sender: tokio::sync::mpsc::Sender<TurnEvent>) -> Self {
        Self { sender }
    }

    pub(crate) async fn send(&self, event: TurnEvent) {
        // An error only means the receiver is gone; the turn goes on without it.
        let _ = self.sender.send(event).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_prompt_and_default_limits() {
        assert!(StaticSystemPrompt::new("").system_content().is_empty());
        assert_eq!(
            StaticSystemPrompt::new("Be brief.").system_content(),
            vec![SystemContentBlock::Text("Be brief.".into())]
        );
        assert_eq!(Limits::default().turns, Some(12));
        assert_eq!(Limits::unlimited().turns, None);
    }
}
