//! [`StopReason`]: why a model call or a whole turn ended.
//!
//! Invariants: the string forms are the stored and wire vocabulary (`STOP_REASONS`) and never change;
//! limits, cancels and errors end a turn with a stop reason, not with an error value.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why a turn (or one model call) stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model asked for tools (a model call; a turn ends so only through a stop request).
    ToolUse,
    /// The model ran out of output tokens.
    MaxTokens,
    StopSequence,
    ContentFiltered,
    GuardrailIntervened,
    /// The turn was cancelled.
    Cancelled,
    /// The turn was interrupted and handed back (reserved for interrupt-based approvals).
    Interrupt,
    /// `Limits::turns` model calls were made.
    LimitTurns,
    /// `Limits::total_tokens` were used.
    LimitTotalTokens,
    /// The model call failed (or the history could not be stored).
    Error,
}

/// Every stop reason, in the order of the enum.
pub const STOP_REASONS: [StopReason; 11] = [
    StopReason::EndTurn,
    StopReason::ToolUse,
    StopReason::MaxTokens,
    StopReason::StopSequence,
    StopReason::ContentFiltered,
    StopReason::GuardrailIntervened,
    StopReason::Cancelled,
    StopReason::Interrupt,
    StopReason::LimitTurns,
    StopReason::LimitTotalTokens,
    StopReason::Error,
];

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EndTurn => "end_turn",
            Self::ToolUse => "tool_use",
            Self::MaxTokens => "max_tokens",
            Self::StopSequence => "stop_sequence",
            Self::ContentFiltered => "content_filtered",
            Self::GuardrailIntervened => "guardrail_intervened",
            Self::Cancelled => "cancelled",
            Self::Interrupt => "interrupt",
            Self::LimitTurns => "limit_turns",
            Self::LimitTotalTokens => "limit_total_tokens",
            Self::Error => "error",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of [`STOP_REASONS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown stop reason: {0}")]
pub struct UnknownStopReason(pub String);

impl FromStr for StopReason {
    type Err = UnknownStopReason;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        STOP_REASONS
            .into_iter()
            .find(|reason| reason.as_str() == s)
            .ok_or_else(|| UnknownStopReason(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_and_match_serde() {
        let names: Vec<&str> = STOP_REASONS.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "end_turn",
                "tool_use",
                "max_tokens",
                "stop_sequence",
                "content_filtered",
                "guardrail_intervened",
                "cancelled",
                "interrupt",
                "limit_turns",
                "limit_total_tokens",
                "error"
            ]
        );
        for reason in STOP_REASONS {
            assert_eq!(reason.as_str().parse::<StopReason>(), Ok(reason));
            assert_eq!(
                serde_json::to_value(reason).unwrap(),
                serde_json::json!(reason.as_str())
            );
        }
        assert!("checkpoint".parse::<StopReason>().is_err());
    }
}
