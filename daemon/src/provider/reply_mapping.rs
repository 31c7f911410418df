//! What several providers map alike from the wire to tau's types: the stop reasons Anthropic and
//! Bedrock share, an unknown stop reason, usage totals, tool-input fragments, and the text of an
//! error (its quoted body, its `HTTP <status> <code>: <message>` line). See ARCHITECTURE.md,
//! `provider/`.
//!
//! Invariants: an unknown stop reason ends the turn and is logged, never an error; a reply that
//! reached the context window is a `ContextOverflow`, never a stop; a usage total counts
//! everything the model processed (input, output, cache reads and writes); an empty tool-input
//! fragment is never sent on; an error body is quoted to at most [`ERROR_QUOTE_CHARS`] characters.

use tracing::warn;

use crate::message::Usage;
use crate::model::{ModelError, ModelEvent, StopReason};

/// The most characters of an unreadable error body quoted in a message.
pub const ERROR_QUOTE_CHARS: usize = 300;

/// The stop reasons of the Messages vocabulary that Anthropic and Bedrock share, or the error a
/// reply ending so is; `None` for the ones each names on its own.
pub fn shared_stop_reason(value: &str) -> Option<Result<StopReason, ModelError>> {
    Some(Ok(match value {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "model_context_window_exceeded" => {
            return Some(Err(ModelError::ContextOverflow(
                "the reply reached the model's context window \
                 (stop reason model_context_window_exceeded)"
                    .into(),
            )));
        }
        _ => return None,
    }))
}

/// A stop reason `provider` sent that tau does not know (`field` names it on the wire): the turn
/// ends, and the log says so.
pub fn unknown_stop_reason(provider: &str, field: &str, value: &str) -> StopReason {
    warn!(
        provider,
        field,
        reason = value,
        "unknown {provider} {field}; ending the turn"
    );
    StopReason::EndTurn
}

/// Usage whose total counts input, output, cache reads and cache writes.
pub fn usage_with_total(
    input_tokens: u64,
    output_tokens: u64,
    cache_read_input_tokens: Option<u64>,
    cache_write_input_tokens: Option<u64>,
) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
        total_tokens: input_tokens
            .saturating_add(output_tokens)
            .saturating_add(cache_read_input_tokens.unwrap_or(0))
            .saturating_add(cache_write_input_tokens.unwrap_or(0)),
        cache_read_input_tokens,
        cache_write_input_tokens,
    }
}

/// A fragment of the JSON input of the tool call in block `index`; empty fragments are dropped.
pub fn tool_input(index: u32, partial_json: String, out: &mut Vec<ModelEvent>) {
    if !partial_json.is_empty() {
        out.push(ModelEvent::ToolUseInputDelta {
            index,
            partial_json,
        });
    }
}

/// The start of an error body that could not be read, for a message.
pub fn quote_body(body: &str) -> String {
    body.chars().take(ERROR_QUOTE_CHARS).collect()
}

/// `HTTP <status> <code>: <message>` (without the status for an error inside a stream).
pub fn error_text(status: Option<u16>, code: &str, message: &str) -> String {
    match status {
        Some(status) => format!("HTTP {status} {code}: {message}"),
        None => format!("{code}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_pieces() {
        assert_eq!(
            shared_stop_reason("tool_use"),
            Some(Ok(StopReason::ToolUse))
        );
        assert_eq!(shared_stop_reason("refusal"), None);
        assert!(matches!(
            shared_stop_reason("model_context_window_exceeded"),
            Some(Err(ModelError::ContextOverflow(_)))
        ));
        assert_eq!(
            unknown_stop_reason("Test", "stop reason", "new"),
            StopReason::EndTurn
        );
        assert_eq!(usage_with_total(1, 2, Some(3), None).total_tokens, 6);
        assert_eq!(
            usage_with_total(u64::MAX, 2, None, None).total_tokens,
            u64::MAX
        );
        let mut out = Vec::new();
        tool_input(0, String::new(), &mut out);
        tool_input(0, "{}".into(), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(quote_body(&"é".repeat(400)).chars().count(), 300);
        assert_eq!(error_text(Some(429), "x", "y"), "HTTP 429 x: y");
        assert_eq!(error_text(None, "x", "y"), "x: y");
    }
}
