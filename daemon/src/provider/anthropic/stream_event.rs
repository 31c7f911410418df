//! Messages API stream events → [`ModelEvent`]s, and Anthropic errors → retry decisions.
//!
//! Invariants: events are dispatched on the JSON `type` (unknown events, deltas and block types are
//! ignored); usage starts from `message_start` and each `message_delta` overwrites the fields it
//! carries (cumulative counts); `message_stop` yields `MessageStop` then the final `Metadata` and
//! ends the stream; an `error` event is a failure (retryable when the API says so), never a quiet
//! end; a body that ends before `message_stop` is a retryable failure; every `stop_reason` maps to a
//! [`StopReason`] (unknown ones end the turn and are logged) or, when the reply cannot be used
//! (context window exceeded, a paused turn), to a fatal failure at `message_stop`.
//! `Usage.input_tokens` is the API's uncached input; `total_tokens` adds output, cache reads and
//! cache writes, so token budgets count everything the model processed.

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tracing::warn;

use super::sse::{SseDecoder, SseEvent};
use crate::message::Usage;
use crate::model::{ModelError, ModelEvent, ReasoningDelta, StopReason};
use crate::provider::http::FrameDecoder;
use crate::provider::retry::Failure;

/// The stop reason for an API `stop_reason` string, or the error a reply ending so is.
///
/// `model_context_window_exceeded` is a context overflow (not the output limit), and `pause_turn`
/// (a long server-tool turn the API wants sent back to continue) cannot be resumed by tau, which
/// offers no server tools: both end the call as an error, never as a quiet or misleading stop.
pub fn stop_reason(value: &str) -> Result<StopReason, ModelError> {
    Ok(match value {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "refusal" => StopReason::ContentFiltered,
        "model_context_window_exceeded" => {
            return Err(ModelError::ContextOverflow(
                "the reply reached the model's context window \
                 (stop reason model_context_window_exceeded)"
                    .into(),
            ));
        }
        "pause_turn" => {
            return Err(ModelError::Incomplete(
                "the model paused a long server-tool turn (stop reason pause_turn), \
                 which tau does not resume"
                    .into(),
            ));
        }
        other => {
            warn!(
                stop_reason = other,
                "unknown Anthropic stop reason; ending the turn"
            );
            StopReason::EndTurn
        }
    })
}

/// An API error body: `{"type":"error","error":{"type","message"}}`.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ApiError,
}

#[derive(Debug, Deserialize)]
struct ApiError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// The failure for an API error of `kind` (an `error.type`), as an HTTP error or an `error` event.
pub fn api_failure(
    kind: &str,
    message: &str,
    status: Option<u16>,
    hint: Option<Duration>,
) -> Failure {
    let text = match status {
        Some(status) => format!("HTTP {status} {kind}: {message}"),
        None => format!("{kind}: {message}"),
    };
    let lowered = message.to_ascii_lowercase();
    match (kind, status) {
        ("rate_limit_error", _) | (_, Some(429)) => {
            Failure::retryable(ModelError::Throttled(text), hint)
        }
        ("overloaded_error" | "api_error" | "timeout_error", _) => {
            Failure::retryable(ModelError::Unavailable(text), hint)
        }
        (_, Some(408 | 409)) => Failure::retryable(ModelError::Unavailable(text), hint),
        (_, Some(s)) if s >= 500 => Failure::retryable(ModelError::Unavailable(text), hint),
        ("invalid_request_error", _)
            if lowered.contains("prompt is too long") || lowered.contains("context window") =>
        {
            Failure::fatal(ModelError::ContextOverflow(text))
        }
        _ => Failure::fatal(ModelError::Request(text)),
    }
}

/// The failure for a non-200 response; `should_retry` is the `x-should-retry` header.
pub fn http_failure(
    status: u16,
    body: &str,
    hint: Option<Duration>,
    should_retry: Option<bool>,
) -> Failure {
    let (kind, message) = match serde_json::from_str::<ErrorBody>(body) {
        Ok(parsed) => (parsed.error.kind, parsed.error.message),
        Err(_) => (String::new(), body.chars().take(300).collect()),
    };
    let mut failure = api_failure(&kind, &message, Some(status), hint);
    match should_retry {
        Some(true) if failure.retry == crate::provider::retry::RetryAdvice::Never => {
            failure = Failure::retryable(failure.error, hint);
        }
        Some(false) => failure = Failure::fatal(failure.error),
        _ => {}
    }
    failure
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    ToolUse,
    Thinking,
    Other,
}

/// Decodes one response body.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    sse: SseDecoder,
    blocks: HashMap<u32, BlockKind>,
    usage: Usage,
    stop_reason: Option<Result<StopReason, ModelError>>,
    finished: bool,
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::fatal(ModelError::Stream(message.into()))
}

fn u64_of(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn index_of(value: &Value) -> Result<u32, Failure> {
    u64_of(value, "index")
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| protocol("a content block event without an index"))
}

impl AnthropicDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn apply_usage(&mut self, usage: &Value) {
        if let Some(v) = u64_of(usage, "input_tokens") {
            self.usage.input_tokens = v;
        }
        if let Some(v) = u64_of(usage, "output_tokens") {
            self.usage.output_tokens = v;
        }
        if let Some(v) = u64_of(usage, "cache_read_input_tokens") {
            self.usage.cache_read_input_tokens = Some(v);
        }
        if let Some(v) = u64_of(usage, "cache_creation_input_tokens") {
            self.usage.cache_write_input_tokens = Some(v);
        }
    }

    fn final_usage(&self) -> Usage {
        let mut usage = self.usage;
        usage.total_tokens = usage
            .input_tokens
            .saturating_add(usage.output_tokens)
            .saturating_add(usage.cache_read_input_tokens.unwrap_or(0))
            .saturating_add(usage.cache_write_input_tokens.unwrap_or(0));
        usage
    }

    /// Handles one SSE record.
    fn event(&mut self, record: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let value: Value = serde_json::from_str(&record.data)
            .map_err(|e| protocol(format!("an event is not JSON ({e})")))?;
        match str_of(&value, "type") {
            "message_start" => {
                if let Some(usage) = value.get("message").and_then(|m| m.get("usage")) {
                    self.apply_usage(usage);
                }
            }
            "content_block_start" => {
                let index = index_of(&value)?;
                let block = value.get("content_block").unwrap_or(&Value::Null);
                let kind = match str_of(block, "type") {
                    "text" => {
                        let text = str_of(block, "text");
                        if !text.is_empty() {
                            out.push(ModelEvent::TextDelta {
                                index,
                                text: text.to_owned(),
                            });
                        }
                        BlockKind::Text
                    }
                    "tool_use" => {
                        out.push(ModelEvent::ToolUseStart {
                            index,
                            tool_use_id: str_of(block, "id").to_owned(),
                            name: str_of(block, "name").to_owned(),
                        });
                        if let Some(input) = block
                            .get("input")
                            .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                        {
                            out.push(ModelEvent::ToolUseInputDelta {
                                index,
                                partial_json: input.to_string(),
                            });
                        }
                        BlockKind::ToolUse
                    }
                    "thinking" => {
                        let text = str_of(block, "thinking");
                        if !text.is_empty() {
                            out.push(ModelEvent::ReasoningDelta {
                                index,
                                delta: ReasoningDelta::Text(text.to_owned()),
                            });
                        }
                        BlockKind::Thinking
                    }
                    "redacted_thinking" => {
                        out.push(ModelEvent::ReasoningDelta {
                            index,
                            delta: ReasoningDelta::Redacted(str_of(block, "data").to_owned()),
                        });
                        BlockKind::Thinking
                    }
                    _ => BlockKind::Other,
                };
                self.blocks.insert(index, kind);
            }
            "content_block_delta" => {
                let index = index_of(&value)?;
                let delta = value.get("delta").unwrap_or(&Value::Null);
                let kind = self.blocks.get(&index).copied();
                let event = match str_of(delta, "type") {
                    "text_delta" => Some(ModelEvent::TextDelta {
                        index,
                        text: str_of(delta, "text").to_owned(),
                    }),
                    "input_json_delta" => {
                        let partial = str_of(delta, "partial_json");
                        (!partial.is_empty()).then(|| ModelEvent::ToolUseInputDelta {
                            index,
                            partial_json: partial.to_owned(),
                        })
                    }
                    "thinking_delta" => Some(ModelEvent::ReasoningDelta {
                        index,
                        delta: ReasoningDelta::Text(str_of(delta, "thinking").to_owned()),
                    }),
                    "signature_delta" => Some(ModelEvent::ReasoningDelta {
                        index,
                        delta: ReasoningDelta::Signature(str_of(delta, "signature").to_owned()),
                    }),
                    _ => None,
                };
                if kind != Some(BlockKind::Other) {
                    out.extend(event);
                }
            }
            "content_block_stop" => {
                let index = index_of(&value)?;
                if self.blocks.get(&index) != Some(&BlockKind::Other) {
                    out.push(ModelEvent::BlockStop { index });
                }
            }
            "message_delta" => {
                if let Some(reason) = value
                    .get("delta")
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(stop_reason(reason));
                }
                if let Some(usage) = value.get("usage") {
                    self.apply_usage(usage);
                }
            }
            "message_stop" => {
                let stop_reason = self
                    .stop_reason
                    .take()
                    .unwrap_or(Ok(StopReason::EndTurn))
                    .map_err(Failure::fatal)?;
                out.push(ModelEvent::MessageStop { stop_reason });
                out.push(ModelEvent::Metadata {
                    usage: Some(self.final_usage()),
                    metrics: None,
                });
                self.finished = true;
            }
            "error" => {
                let error = value.get("error").unwrap_or(&Value::Null);
                return Err(api_failure(
                    str_of(error, "type"),
                    str_of(error, "message"),
                    None,
                    None,
                ));
            }
            _ => {}
        }
        Ok(())
    }

    fn records(
        &mut self,
        records: Vec<SseEvent>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<bool, Failure> {
        for record in &records {
            if self.finished {
                break;
            }
            self.event(record, out)?;
        }
        Ok(self.finished)
    }
}

impl FrameDecoder for AnthropicDecoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, Failure> {
        let mut records = Vec::new();
        self.sse
            .push(chunk, &mut records)
            .map_err(|e| protocol(e.to_string()))?;
        self.records(records, out)
    }

    fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let mut records = Vec::new();
        self.sse
            .finish(&mut records)
            .map_err(|e| protocol(e.to_string()))?;
        if self.records(records, out)? {
            return Ok(());
        }
        Err(Failure::retryable(
            ModelError::Unavailable("the stream ended before message_stop".into()),
            None,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MessageAssembler;

    const TEXT_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/anthropic/text_turn.sse");
    const TOOL_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/anthropic/tool_turn.sse");
    const ERROR_AFTER_200: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/anthropic/error_after_200.sse");

    /// Decodes `body` in pieces of `piece` bytes: the events, and the failure if any.
    fn decode(body: &[u8], piece: usize) -> (Vec<ModelEvent>, Option<Failure>) {
        let mut decoder = AnthropicDecoder::new();
        let mut out = Vec::new();
        for chunk in body.chunks(piece) {
            match decoder.feed(chunk, &mut out) {
                Ok(true) => return (out, None),
                Ok(false) => {}
                Err(failure) => return (out, Some(failure)),
            }
        }
        let end = decoder.end(&mut out).err();
        (out, end)
    }

    #[test]
    fn fixtures_decode_the_same_whole_and_in_odd_pieces() {
        for body in [TEXT_TURN, TOOL_TURN, ERROR_AFTER_200] {
            let whole = decode(body, body.len());
            for piece in [1, 2, 3, 5, 7, 13, 64, 333] {
                assert_eq!(decode(body, piece), whole, "piece size {piece}");
            }
        }
    }

    #[test]
    fn text_turn_events() {
        let (events, failure) = decode(TEXT_TURN, 11);
        assert!(failure.is_none());
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::TextDelta { index: 0, text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "Merhaba! Saat 15:30, efendim. Çay ister misiniz? 🍵");
        let n = events.len();
        assert_eq!(events[n - 3], ModelEvent::BlockStop { index: 0 });
        assert_eq!(
            events[n - 2],
            ModelEvent::MessageStop {
                stop_reason: StopReason::EndTurn
            }
        );
        assert_eq!(
            events[n - 1],
            ModelEvent::Metadata {
                usage: Some(Usage {
                    input_tokens: 412,
                    output_tokens: 17,
                    total_tokens: 809,
                    cache_read_input_tokens: Some(380),
                    cache_write_input_tokens: Some(0),
                }),
                metrics: None,
            }
        );
    }

    #[test]
    fn tool_turn_assembles_the_escaped_input() {
        let (events, failure) = decode(TOOL_TURN, 17);
        assert!(failure.is_none());
        let mut assembler = MessageAssembler::new();
        for event in &events {
            assembler.push(event).unwrap();
        }
        let done = assembler.finish(0);
        assert_eq!(done.stop_reason, StopReason::ToolUse);
        assert_eq!(done.message.text(), "Checking the lamp.");
        let tool = done.message.tool_uses().next().unwrap();
        assert_eq!(tool.name, "demo_physical_action");
        assert_eq!(
            tool.input,
            serde_json::json!({"action": "turn on the desk lamp", "note": "path C:\\lamp \"quoted\""})
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ModelEvent::ToolUseInputDelta { partial_json, .. } if partial_json.is_empty()))
        );
    }

    #[test]
    fn error_after_200_is_a_retryable_failure() {
        let (events, failure) = decode(ERROR_AFTER_200, 9);
        let failure = failure.unwrap();
        assert!(
            matches!(failure.error, ModelError::Unavailable(ref m) if m.contains("Overloaded"))
        );
        assert_eq!(
            failure.retry,
            crate::provider::retry::RetryAdvice::After(None)
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ModelEvent::MessageStop { .. }))
        );
    }

    #[test]
    fn thinking_blocks_and_every_stop_reason() {
        let body = concat!(
            "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQB\"}}\n\n",
            "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"b64\"}}\n\n",
            "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
            "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\"},\"usage\":{\"output_tokens\":3}}\n\n",
            "data: {\"type\":\"message_stop\"}\n\n",
        );
        let (events, failure) = decode(body.as_bytes(), 4);
        assert!(failure.is_none());
        assert!(events.contains(&ModelEvent::ReasoningDelta {
            index: 0,
            delta: ReasoningDelta::Signature("EqQB".into())
        }));
        assert!(events.contains(&ModelEvent::ReasoningDelta {
            index: 1,
            delta: ReasoningDelta::Redacted("b64".into())
        }));
        assert!(events.contains(&ModelEvent::MessageStop {
            stop_reason: StopReason::ContentFiltered
        }));
        for (wire, ours) in [
            ("end_turn", StopReason::EndTurn),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::MaxTokens),
            ("stop_sequence", StopReason::StopSequence),
            ("refusal", StopReason::ContentFiltered),
            ("something_new", StopReason::EndTurn),
        ] {
            assert_eq!(stop_reason(wire), Ok(ours), "{wire}");
        }
    }

    /// A short text reply ending with `reason`.
    fn reply_ending(reason: &str) -> String {
        format!(
            concat!(
                "data: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":5,\"output_tokens\":1}}}}}}\n\n",
                "data: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n",
                "data: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"Part\"}}}}\n\n",
                "data: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n",
                "data: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{}\"}},\"usage\":{{\"output_tokens\":9}}}}\n\n",
                "data: {{\"type\":\"message_stop\"}}\n\n",
            ),
            reason
        )
    }

    #[test]
    fn replies_that_cannot_be_used_end_as_errors_not_as_stops() {
        let (events, failure) = decode(reply_ending("model_context_window_exceeded").as_bytes(), 7);
        let failure = failure.expect("a failure");
        assert!(
            matches!(failure.error, ModelError::ContextOverflow(ref m) if m.contains("model_context_window_exceeded")),
            "{failure:?}"
        );
        assert_eq!(failure.retry, crate::provider::retry::RetryAdvice::Never);
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ModelEvent::MessageStop { .. }))
        );

        let (events, failure) = decode(reply_ending("pause_turn").as_bytes(), 5);
        let failure = failure.expect("a failure");
        assert!(
            matches!(failure.error, ModelError::Incomplete(ref m) if m.contains("pause_turn")),
            "{failure:?}"
        );
        assert_eq!(failure.retry, crate::provider::retry::RetryAdvice::Never);
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ModelEvent::MessageStop { .. }))
        );

        let (events, failure) = decode(reply_ending("max_tokens").as_bytes(), 5);
        assert!(failure.is_none());
        assert!(events.contains(&ModelEvent::MessageStop {
            stop_reason: StopReason::MaxTokens
        }));
    }

    #[test]
    fn http_errors_are_classified() {
        let retryable = |status, body: &str| http_failure(status, body, None, None).retry;
        use crate::provider::retry::RetryAdvice::{After, Never};
        assert_eq!(retryable(429, "{}"), After(None));
        assert_eq!(retryable(529, "not json"), After(None));
        assert_eq!(retryable(503, ""), After(None));
        assert_eq!(retryable(408, ""), After(None));
        assert_eq!(
            retryable(
                401,
                r#"{"type":"error","error":{"type":"authentication_error","message":"bad key"}}"#
            ),
            Never
        );
        assert_eq!(retryable(413, "<html>too large</html>"), Never);
        assert_eq!(http_failure(400, "", None, Some(true)).retry, After(None));
        assert_eq!(http_failure(500, "", None, Some(false)).retry, Never);
    }
}
