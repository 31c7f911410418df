//! ConverseStream frames → [`ModelEvent`]s, and Bedrock errors (HTTP and exception frames) →
//! retry decisions.
//!
//! Invariants: state is keyed by `contentBlockIndex` (text blocks usually have no start event);
//! the padding field `p` and unknown members are ignored; `messageStop` yields `MessageStop`, the
//! `metadata` frame after it yields `Metadata` and ends the stream; a body that ends before
//! `messageStop` is a retryable failure; an exception frame is a typed failure (throttling →
//! `Throttled`, server-side trouble → `Unavailable`, both retryable; an exceeded service quota →
//! `Throttled` that is never retried; validation → `Request` or
//! `ContextOverflow`); a `stopReason` that makes the reply unusable (context window exceeded,
//! malformed output or tool use) is a fatal failure; a CRC or framing error is a fatal stream error.

use serde_json::Value;
use tracing::warn;

use super::eventstream::{Decoder, Frame};
use crate::message::{Metrics, Usage};
use crate::model::{ModelError, ModelEvent, ReasoningDelta, StopReason};
use crate::provider::http::FrameDecoder;
use crate::provider::retry::Failure;
use std::time::Duration;

/// The stop reason for a Converse `stopReason`, or the error a reply ending so is.
///
/// `model_context_window_exceeded` is a context overflow (not the output limit);
/// `malformed_model_output` and `malformed_tool_use` are a reply that cannot be used: all three end
/// the call as an error, never as a quiet or misleading stop.
pub fn stop_reason(value: &str) -> Result<StopReason, ModelError> {
    Ok(match value {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "guardrail_intervened" => StopReason::GuardrailIntervened,
        "content_filtered" => StopReason::ContentFiltered,
        "model_context_window_exceeded" => {
            return Err(ModelError::ContextOverflow(
                "the reply reached the model's context window \
                 (stop reason model_context_window_exceeded)"
                    .into(),
            ));
        }
        "malformed_model_output" => {
            return Err(ModelError::MalformedOutput(
                "Bedrock reports malformed model output (stop reason malformed_model_output)"
                    .into(),
            ));
        }
        "malformed_tool_use" => {
            return Err(ModelError::MalformedOutput(
                "Bedrock reports a malformed tool call (stop reason malformed_tool_use)".into(),
            ));
        }
        other => {
            warn!(
                stop_reason = other,
                "unknown Bedrock stop reason; ending the turn"
            );
            StopReason::EndTurn
        }
    })
}

/// The failure for a Bedrock error code (an exception type, either case of its first letter).
pub fn error_failure(
    code: &str,
    message: &str,
    status: Option<u16>,
    hint: Option<Duration>,
) -> Failure {
    let text = match status {
        Some(status) => format!("HTTP {status} {code}: {message}"),
        None => format!("{code}: {message}"),
    };
    let mut chars = code.chars();
    let code = match chars.next() {
        Some(first) => first.to_ascii_uppercase().to_string() + chars.as_str(),
        None => String::new(),
    };
    let lowered = message.to_ascii_lowercase();
    match code.as_str() {
        "ThrottlingException"
        | "ThrottledException"
        | "TooManyRequestsException"
        | "ModelNotReadyException" => Failure::retryable(ModelError::Throttled(text), hint),
        // An account quota: retrying soon cannot help, so no retry; it still counts as a
        // throttle, so a configured fallback model answers instead.
        "ServiceQuotaExceededException" => Failure::fatal(ModelError::Throttled(text)),
        "InternalServerException"
        | "ServiceUnavailableException"
        | "ModelStreamErrorException"
        | "ModelTimeoutException"
        | "ModelErrorException" => Failure::retryable(ModelError::Unavailable(text), hint),
        "ValidationException"
            if lowered.contains("too long")
                || lowered.contains("too many tokens")
                || lowered.contains("context") =>
        {
            Failure::fatal(ModelError::ContextOverflow(text))
        }
        _ => match status {
            Some(429) => Failure::retryable(ModelError::Throttled(text), hint),
            Some(500 | 502 | 503 | 504) => Failure::retryable(ModelError::Unavailable(text), hint),
            _ => Failure::fatal(ModelError::Request(text)),
        },
    }
}

/// The failure for a non-200 response: the code from `x-amzn-ErrorType` (before the first `:`),
/// else the body's `__type` / `code`.
pub fn http_failure(
    status: u16,
    error_type: Option<&str>,
    body: &str,
    hint: Option<Duration>,
) -> Failure {
    let (code, message) = error_parts(error_type, body);
    error_failure(&code, &message, Some(status), hint)
}

/// The error code and message of a non-200 response: the code from `x-amzn-ErrorType` (before the
/// first `:`), else the body's `__type` / `code`; the body's `message`, else its first 300
/// characters.
pub fn error_parts(error_type: Option<&str>, body: &str) -> (String, String) {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let from_body = parsed
        .get("__type")
        .or_else(|| parsed.get("code"))
        .and_then(Value::as_str)
        .map(|t| t.rsplit('#').next().unwrap_or(t));
    let code = error_type
        .map(|t| t.split(':').next().unwrap_or(t))
        .or(from_body)
        .unwrap_or_default();
    let message = parsed
        .get("message")
        .or_else(|| parsed.get("Message"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| body.chars().take(300).collect());
    (code.to_owned(), message)
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::fatal(ModelError::Stream(message.into()))
}

/// Decodes one response body.
#[derive(Debug, Default)]
pub struct BedrockDecoder {
    frames: Decoder,
    stopped: bool,
    finished: bool,
}

fn index_of(payload: &Value) -> Result<u32, Failure> {
    payload
        .get("contentBlockIndex")
        .and_then(Value::as_u64)
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| protocol("a content block event without contentBlockIndex"))
}

fn u64_of(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

impl BedrockDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn frame(&mut self, frame: &Frame, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        match frame.header(":message-type") {
            Some("event") => {}
            Some("exception") => {
                let payload: Value = serde_json::from_slice(&frame.payload).unwrap_or(Value::Null);
                let message = payload
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let code = frame.header(":exception-type").unwrap_or("exception");
                return Err(error_failure(code, message, None, None));
            }
            other => {
                let code = frame.header(":error-code").unwrap_or("error");
                let message = frame.header(":error-message").unwrap_or_default();
                return Err(protocol(format!(
                    "event-stream {} frame: {code}: {message}",
                    other.unwrap_or("untyped")
                )));
            }
        }
        let payload: Value = serde_json::from_slice(&frame.payload)
            .map_err(|e| protocol(format!("an event payload is not JSON ({e})")))?;
        match frame.header(":event-type").unwrap_or_default() {
            "contentBlockStart" => {
                let index = index_of(&payload)?;
                if let Some(tool) = payload.get("start").and_then(|s| s.get("toolUse")) {
                    out.push(ModelEvent::ToolUseStart {
                        index,
                        tool_use_id: tool
                            .get("toolUseId")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        name: tool
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    });
                }
            }
            "contentBlockDelta" => {
                let index = index_of(&payload)?;
                let delta = payload.get("delta").unwrap_or(&Value::Null);
                if let Some(text) = delta.get("text").and_then(Value::as_str) {
                    out.push(ModelEvent::TextDelta {
                        index,
                        text: text.to_owned(),
                    });
                } else if let Some(input) = delta
                    .get("toolUse")
                    .and_then(|t| t.get("input"))
                    .and_then(Value::as_str)
                {
                    if !input.is_empty() {
                        out.push(ModelEvent::ToolUseInputDelta {
                            index,
                            partial_json: input.to_owned(),
                        });
                    }
                } else if let Some(reasoning) = delta.get("reasoningContent") {
                    let piece = |key: &str| {
                        reasoning
                            .get(key)
                            .and_then(Value::as_str)
                            .map(str::to_owned)
                    };
                    let delta = if let Some(text) = piece("text") {
                        Some(ReasoningDelta::Text(text))
                    } else if let Some(signature) = piece("signature") {
                        Some(ReasoningDelta::Signature(signature))
                    } else {
                        piece("redactedContent").map(ReasoningDelta::Redacted)
                    };
                    out.extend(delta.map(|delta| ModelEvent::ReasoningDelta { index, delta }));
                }
            }
            "contentBlockStop" => out.push(ModelEvent::BlockStop {
                index: index_of(&payload)?,
            }),
            "messageStop" => {
                let reason = payload
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .unwrap_or("end_turn");
                let stop_reason = stop_reason(reason).map_err(Failure::fatal)?;
                out.push(ModelEvent::MessageStop { stop_reason });
                self.stopped = true;
            }
            "metadata" => {
                let usage = payload.get("usage").map(|u| Usage {
                    input_tokens: u64_of(u, "inputTokens").unwrap_or(0),
                    output_tokens: u64_of(u, "outputTokens").unwrap_or(0),
                    total_tokens: u64_of(u, "totalTokens").unwrap_or(0),
                    cache_read_input_tokens: u64_of(u, "cacheReadInputTokens"),
                    cache_write_input_tokens: u64_of(u, "cacheWriteInputTokens"),
                });
                let metrics = payload
                    .get("metrics")
                    .and_then(|m| u64_of(m, "latencyMs"))
                    .map(|latency_ms| Metrics {
                        latency_ms,
                        time_to_first_byte_ms: None,
                    });
                out.push(ModelEvent::Metadata { usage, metrics });
                if self.stopped {
                    self.finished = true;
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl FrameDecoder for BedrockDecoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, Failure> {
        let mut frames = Vec::new();
        let decoded = self.frames.push(chunk, &mut frames);
        for frame in &frames {
            if self.finished {
                break;
            }
            self.frame(frame, out)?;
        }
        decoded.map_err(|e| protocol(e.to_string()))?;
        Ok(self.finished)
    }

    fn end(&mut self, _out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        self.frames
            .finish()
            .map_err(|e| Failure::retryable(ModelError::Unavailable(e.to_string()), None))?;
        if self.stopped {
            Ok(())
        } else {
            Err(Failure::retryable(
                ModelError::Unavailable("the stream ended before messageStop".into()),
                None,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MessageAssembler;
    use crate::provider::retry::RetryAdvice;

    const TEXT_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/bedrock/text_turn.bin");
    const TOOL_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/bedrock/tool_turn.bin");
    const THROTTLED: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/bedrock/throttled_mid_stream.bin");

    fn decode(body: &[u8], piece: usize) -> (Vec<ModelEvent>, Option<Failure>) {
        let mut decoder = BedrockDecoder::new();
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

    fn assembled(events: &[ModelEvent]) -> crate::model::AssembledMessage {
        let mut assembler = MessageAssembler::new();
        for event in events {
            assembler.push(event).unwrap();
        }
        assembler.finish(0)
    }

    #[test]
    fn fixtures_decode_the_same_whole_and_in_odd_pieces() {
        for body in [TEXT_TURN, TOOL_TURN, THROTTLED] {
            let whole = decode(body, body.len());
            for piece in [1, 3, 7, 12, 13, 64, 101] {
                assert_eq!(decode(body, piece), whole, "piece {piece}");
            }
        }
    }

    #[test]
    fn text_turn_without_block_start() {
        let (events, failure) = decode(TEXT_TURN, 9);
        assert!(failure.is_none());
        let done = assembled(&events);
        assert_eq!(done.message.text(), "Saat 15:30, efendim. Çay? 🍵");
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        assert_eq!(done.usage.total_tokens, 306);
        assert_eq!(
            done.message.metadata.unwrap().metrics.unwrap().latency_ms,
            42
        );
    }

    #[test]
    fn tool_turn_assembles_its_input() {
        let (events, failure) = decode(TOOL_TURN, 5);
        assert!(failure.is_none());
        let done = assembled(&events);
        assert_eq!(done.stop_reason, StopReason::ToolUse);
        let tool = done.message.tool_uses().next().unwrap();
        assert_eq!(tool.tool_use_id, "tooluse_LampVector");
        assert_eq!(tool.name, "demo_physical_action");
        assert_eq!(
            tool.input,
            serde_json::json!({"action": "turn on the desk lamp"})
        );
        assert!(done.invalid_tool_inputs.is_empty());
    }

    #[test]
    fn a_throttling_exception_frame_is_a_retryable_throttle() {
        let (events, failure) = decode(THROTTLED, 4);
        let failure = failure.unwrap();
        assert!(
            matches!(failure.error, ModelError::Throttled(_)),
            "{failure:?}"
        );
        assert_eq!(failure.retry, RetryAdvice::After(None));
        assert!(
            events
                .iter()
                .any(|e| matches!(e, ModelEvent::TextDelta { .. }))
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ModelEvent::MessageStop { .. }))
        );
    }

    #[test]
    fn errors_are_typed() {
        let f = http_failure(
            429,
            Some("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            r#"{"message":"Too many requests"}"#,
            None,
        );
        assert!(matches!(f.error, ModelError::Throttled(ref m) if m.contains("Too many requests")));
        let f = http_failure(
            400,
            None,
            r#"{"__type":"ValidationException","message":"Input is too long for requested model."}"#,
            None,
        );
        assert!(matches!(f.error, ModelError::ContextOverflow(_)));
        assert_eq!(f.retry, RetryAdvice::Never);
        let f = http_failure(
            403,
            Some("AccessDeniedException"),
            r#"{"message":"no"}"#,
            None,
        );
        assert!(matches!(f.error, ModelError::Request(_)));
        assert_eq!(f.retry, RetryAdvice::Never);
        let f = http_failure(503, None, "", None);
        assert!(matches!(f.error, ModelError::Unavailable(_)));
        let f = error_failure("modelStreamErrorException", "boom", None, None);
        assert!(matches!(f.error, ModelError::Unavailable(_)));
    }

    #[test]
    fn an_exceeded_service_quota_is_not_retried() {
        let f = http_failure(
            400,
            Some(
                "ServiceQuotaExceededException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            ),
            r#"{"message":"Your request exceeds the service quota for your account."}"#,
            Some(Duration::from_secs(1)),
        );
        assert_eq!(f.retry, RetryAdvice::Never);
        assert!(
            matches!(f.error, ModelError::Throttled(ref m) if m.contains("service quota")),
            "{f:?}"
        );
        let f = error_failure("serviceQuotaExceededException", "quota", None, None);
        assert_eq!(f.retry, RetryAdvice::Never);
        // Real throttling is still retried.
        let f = error_failure("ThrottlingException", "Too many tokens", None, None);
        assert_eq!(f.retry, RetryAdvice::After(None));
    }

    #[test]
    fn every_stop_reason_maps_and_unusable_replies_are_errors() {
        for (wire, ours) in [
            ("end_turn", StopReason::EndTurn),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::MaxTokens),
            ("stop_sequence", StopReason::StopSequence),
            ("guardrail_intervened", StopReason::GuardrailIntervened),
            ("content_filtered", StopReason::ContentFiltered),
            ("something_new", StopReason::EndTurn),
        ] {
            assert_eq!(stop_reason(wire), Ok(ours), "{wire}");
        }
        use super::super::eventstream::encode_frame;
        let event = |kind: &str, payload: Value| {
            encode_frame(
                &[(":message-type", "event"), (":event-type", kind)],
                payload.to_string().as_bytes(),
            )
        };
        let ending = |reason: &str| {
            let mut body = Vec::new();
            body.extend(event(
                "contentBlockDelta",
                serde_json::json!({"contentBlockIndex": 0, "delta": {"text": "Part"}}),
            ));
            body.extend(event(
                "messageStop",
                serde_json::json!({"stopReason": reason}),
            ));
            body.extend(event(
                "metadata",
                serde_json::json!({"usage": {"inputTokens": 5, "outputTokens": 1, "totalTokens": 6}}),
            ));
            decode(&body, 7)
        };
        for reason in [
            "model_context_window_exceeded",
            "malformed_model_output",
            "malformed_tool_use",
        ] {
            let (events, failure) = ending(reason);
            let failure = failure.expect("a failure");
            match (&failure.error, reason) {
                (ModelError::ContextOverflow(m), "model_context_window_exceeded")
                | (
                    ModelError::MalformedOutput(m),
                    "malformed_model_output" | "malformed_tool_use",
                ) => {
                    assert!(m.contains(reason), "{m}");
                }
                (other, _) => panic!("{reason} → {other:?}"),
            }
            assert_eq!(failure.retry, RetryAdvice::Never, "{reason}");
            assert!(
                !events
                    .iter()
                    .any(|e| matches!(e, ModelEvent::MessageStop { .. })),
                "{reason}"
            );
        }
        let (events, failure) = ending("max_tokens");
        assert!(failure.is_none());
        assert!(events.contains(&ModelEvent::MessageStop {
            stop_reason: StopReason::MaxTokens
        }));
    }

    #[test]
    fn reasoning_deltas_and_a_generic_error_frame() {
        use super::super::eventstream::encode_frame;
        let event = |kind: &str, payload: Value| {
            encode_frame(
                &[(":message-type", "event"), (":event-type", kind)],
                payload.to_string().as_bytes(),
            )
        };
        let mut body = Vec::new();
        body.extend(event("contentBlockDelta", serde_json::json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hmm"}}})));
        body.extend(event("contentBlockDelta", serde_json::json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig"}}})));
        body.extend(event("contentBlockDelta", serde_json::json!({"contentBlockIndex": 1, "delta": {"reasoningContent": {"redactedContent": "b64"}}})));
        body.extend(event(
            "messageStop",
            serde_json::json!({"stopReason": "max_tokens"}),
        ));
        let (events, failure) = decode(&body, 6);
        assert!(failure.is_none());
        assert_eq!(
            events,
            vec![
                ModelEvent::ReasoningDelta {
                    index: 0,
                    delta: ReasoningDelta::Text("hmm".into())
                },
                ModelEvent::ReasoningDelta {
                    index: 0,
                    delta: ReasoningDelta::Signature("sig".into())
                },
                ModelEvent::ReasoningDelta {
                    index: 1,
                    delta: ReasoningDelta::Redacted("b64".into())
                },
                ModelEvent::MessageStop {
                    stop_reason: StopReason::MaxTokens
                },
            ]
        );
        let error = encode_frame(
            &[
                (":message-type", "error"),
                (":error-code", "InternalFailure"),
                (":error-message", "bad"),
            ],
            b"",
        );
        let (_, failure) = decode(&error, 100);
        assert!(
            matches!(failure.unwrap().error, ModelError::Stream(m) if m.contains("InternalFailure"))
        );
    }

    #[test]
    fn a_corrupted_crc_is_a_stream_error() {
        let mut body = TEXT_TURN.to_vec();
        let last = body.len() - 1;
        body[last] ^= 0xFF;
        let (_, failure) = decode(&body, 64);
        let failure = failure.unwrap();
        assert!(matches!(failure.error, ModelError::Stream(ref m) if m.contains("CRC")));
        assert_eq!(failure.retry, RetryAdvice::Never);
    }
}
