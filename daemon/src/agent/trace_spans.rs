//! [`TurnTrace`]: the `tracing` spans a turn runs in: the turn, each model call and each tool
//! call, so the log of a busy hub can be followed per session (with `TAU_LOG_FORMAT=json` every
//! line carries its spans' fields; see ARCHITECTURE.md, "The path of a turn").
//!
//! Invariants: every span carries the seed's trace attributes `tau.session_id`, `tau.channel` and
//! `tau.profile` and the turn's id (`turn_id`, empty for a turn started without one), so a span is
//! read on its own; a model call adds `model` and its number in the turn (`call`), a tool call its
//! `tool` and `tool_use_id`. Spans are INFO, the file log's level; they hold no data beyond these
//! fields and close with the work they cover.

use tracing::{Span, info_span};

/// What a turn's spans say about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TurnTrace {
    pub(crate) session_id: String,
    pub(crate) channel: String,
    pub(crate) profile: String,
    pub(crate) turn_id: String,
}

impl TurnTrace {
    /// The span of the whole turn (from its place in the queue to its end).
    pub(crate) fn turn_span(&self) -> Span {
        info_span!(
            "turn",
            "tau.session_id" = %self.session_id,
            "tau.channel" = %self.channel,
            "tau.profile" = %self.profile,
            turn_id = %self.turn_id,
        )
    }

    /// The span of the turn's `call`-th model call (from 1) on `model`.
    pub(crate) fn model_call_span(&self, model: &str, call: u32) -> Span {
        info_span!(
            "model_call",
            "tau.session_id" = %self.session_id,
            "tau.channel" = %self.channel,
            "tau.profile" = %self.profile,
            turn_id = %self.turn_id,
            model = %model,
            call,
        )
    }

    /// The span of one tool call, from the gate's check to its recorded result.
    pub(crate) fn tool_call_span(&self, tool: &str, tool_use_id: &str) -> Span {
        info_span!(
            "tool_call",
            "tau.session_id" = %self.session_id,
            "tau.channel" = %self.channel,
            "tau.profile" = %self.profile,
            turn_id = %self.turn_id,
            tool = %tool,
            tool_use_id = %tool_use_id,
        )
    }
}
