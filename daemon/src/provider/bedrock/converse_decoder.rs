//! ConverseStream frames → [`ModelEvent`]s, and the AWS event stream as the [`RecordSplitter`] of
//! that body. See ARCHITECTURE.md, `provider/`.
//!
//! Invariants: state is keyed by `contentBlockIndex` (text blocks usually have no start event);
//! each event frame is one typed [`ConverseEvent`]; `messageStop` yields `MessageStop`, the
//! `metadata` frame after it yields `Metadata` and ends the stream; a body that ends before
//! `messageStop` is a retryable failure; an exception frame is a typed failure (see
//! [`super::converse_error`]); a `stopReason` that makes the reply unusable is a fatal failure; a
//! CRC or framing error is a fatal stream error.

use super::converse_error::{error_failure, stop_reason};
use super::converse_event::{BlockDelta, BlockStart, ConverseEvent, ExceptionBody, Metadata};
use super::eventstream::{Decoder, Frame};
use crate::message::{Metrics, Usage};
use crate::model::{ModelError, ModelEvent, ReasoningDelta};
use crate::provider::record_stream::{RecordDecoder, RecordSplitter, ended_early, protocol};
use crate::provider::reply_mapping::tool_input;
use crate::provider::retry::Failure;

/// The AWS event stream. The frames decoded before a corrupt one are delivered first; a body cut
/// inside a frame is a lost connection (retryable).
impl RecordSplitter for Decoder {
    type Record = Frame;

    fn split(&mut self, chunk: &[u8], out: &mut Vec<Frame>) -> Result<(), Failure> {
        self.push(chunk, out).map_err(|e| protocol(e.to_string()))
    }

    fn finish(&mut self, _out: &mut Vec<Frame>) -> Result<(), Failure> {
        Decoder::finish(self)
            .map_err(|e| Failure::retryable(ModelError::Unavailable(e.to_string()), None))
    }
}

/// Decodes one response body.
#[derive(Debug, Default)]
pub struct BedrockDecoder {
    frames: Decoder,
    stopped: bool,
    finished: bool,
}

fn block_index(index: Option<u64>) -> Result<u32, Failure> {
    index
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| protocol("a content block event without contentBlockIndex"))
}

impl BedrockDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn block_start(start: BlockStart, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let index = block_index(start.content_block_index)?;
        let tool_use = start.start.map(|s| s.tool_use).unwrap_or_default();
        if tool_use.is_present() {
            let tool = tool_use.fit().unwrap_or_default();
            out.push(ModelEvent::ToolUseStart {
                index,
                tool_use_id: tool.tool_use_id,
                name: tool.name,
            });
        }
        Ok(())
    }

    fn block_delta(delta: BlockDelta, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let index = block_index(delta.content_block_index)?;
        let delta = delta.delta.unwrap_or_default();
        if let Some(text) = delta.text {
            out.push(ModelEvent::TextDelta { index, text });
        } else if let Some(input) = delta.tool_use.and_then(|t| t.input) {
            tool_input(index, input, out);
        } else if let Some(reasoning) = delta.reasoning_content {
            let delta = if let Some(text) = reasoning.text {
                Some(ReasoningDelta::Text(text))
            } else if let Some(signature) = reasoning.signature {
                Some(ReasoningDelta::Signature(signature))
            } else {
                reasoning.redacted_content.map(ReasoningDelta::Redacted)
            };
            out.extend(delta.map(|delta| ModelEvent::ReasoningDelta { index, delta }));
        }
        Ok(())
    }

    fn metadata(&mut self, metadata: Metadata, out: &mut Vec<ModelEvent>) {
        let usage = metadata.usage.is_present().then(|| {
            let u = metadata.usage.fit().unwrap_or_default();
            Usage {
                input_tokens: u.input_tokens.unwrap_or(0),
                output_tokens: u.output_tokens.unwrap_or(0),
                total_tokens: u.total_tokens.unwrap_or(0),
                cache_read_input_tokens: u.cache_read_input_tokens,
                cache_write_input_tokens: u.cache_write_input_tokens,
            }
        });
        let metrics = metadata
            .metrics
            .and_then(|m| m.latency_ms)
            .map(|latency_ms| Metrics {
                latency_ms,
                time_to_first_byte_ms: None,
            });
        out.push(ModelEvent::Metadata { usage, metrics });
        if self.stopped {
            self.finished = true;
        }
    }
}

impl RecordDecoder for BedrockDecoder {
    type Splitter = Decoder;

    fn splitter(&mut self) -> &mut Decoder {
        &mut self.frames
    }

    fn record(&mut self, frame: &Frame, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        match frame.header(":message-type") {
            Some("event") => {}
            Some("exception") => {
                let body = ExceptionBody::parse(&frame.payload);
                let code = frame.header(":exception-type").unwrap_or("exception");
                return Err(error_failure(code, &body.message, None, None));
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
        let event_type = frame.header(":event-type").unwrap_or_default();
        let event = ConverseEvent::parse(event_type, &frame.payload)
            .map_err(|e| protocol(format!("an event payload is not JSON ({e})")))?;
        match event {
            ConverseEvent::ContentBlockStart(start) => Self::block_start(start, out)?,
            ConverseEvent::ContentBlockDelta(delta) => Self::block_delta(delta, out)?,
            ConverseEvent::ContentBlockStop(stop) => out.push(ModelEvent::BlockStop {
                index: block_index(stop.content_block_index)?,
            }),
            ConverseEvent::MessageStop(stop) => {
                let reason = stop.stop_reason.as_deref().unwrap_or("end_turn");
                let stop_reason = stop_reason(reason).map_err(Failure::fatal)?;
                out.push(ModelEvent::MessageStop { stop_reason });
                self.stopped = true;
            }
            ConverseEvent::Metadata(metadata) => self.metadata(metadata, out),
            ConverseEvent::Other => {}
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn unfinished(&mut self, _out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        if self.stopped {
            Ok(())
        } else {
            Err(ended_early("the stream ended before messageStop"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MessageAssembler, ModelError, StopReason};
    use crate::provider::retry::RetryAdvice;
    use serde_json::Value;

    const TEXT_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/bedrock/text_turn.bin");
    const TOOL_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/bedrock/tool_turn.bin");
    const THROTTLED: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/bedrock/throttled_mid_stream.bin");

    fn decode(body: &[u8], piece: usize) -> (Vec<ModelEvent>, Option<Failure>) {
        crate::provider::http::decode_in_pieces(&mut BedrockDecoder::new(), body, piece)
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
        crate::provider::http::assert_pieces_decode_alike(
            decode,
            &[TEXT_TURN, TOOL_TURN, THROTTLED],
            &[1, 3, 7, 12, 13, 64, 101],
        );
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
