//! Messages API stream events → [`ModelEvent`]s. See ARCHITECTURE.md, `provider/`.
//!
//! Invariants: each SSE `data` is one typed [`StreamEvent`] (unknown events, deltas and block
//! types are ignored, and so are the deltas and stop of a block of an unknown type); usage starts
//! from `message_start` and each `message_delta` overwrites the fields it carries (cumulative
//! counts); `message_stop` yields `MessageStop` then the final `Metadata` and ends the stream; an
//! `error` event is a failure (retryable when the API says so), never a quiet end; a body that
//! ends before `message_stop` is a retryable failure; a `stop_reason` that makes the reply
//! unusable is a fatal failure at `message_stop`. `Usage.input_tokens` is the API's uncached
//! input; `total_tokens` adds output, cache reads and cache writes, so token budgets count
//! everything the model processed.

use std::collections::HashMap;

use super::messages_error::{api_failure, stop_reason};
use super::stream_event::{BlockDelta, ContentBlock, StreamEvent, WireUsage};
use crate::model::{ModelError, ModelEvent, ReasoningDelta, StopReason};
use crate::provider::record_stream::{RecordDecoder, ended_early, protocol};
use crate::provider::reply_mapping::{tool_input, usage_with_total};
use crate::provider::retry::Failure;
use crate::provider::sse::{SseDecoder, SseEvent};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    ToolUse,
    Thinking,
    Other,
}

/// The counts seen so far; each field is overwritten by the next event that carries it.
#[derive(Debug, Default)]
struct Counts {
    input: u64,
    output: u64,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
}

impl Counts {
    fn apply(&mut self, usage: WireUsage) {
        if let Some(v) = usage.input_tokens {
            self.input = v;
        }
        if let Some(v) = usage.output_tokens {
            self.output = v;
        }
        if let Some(v) = usage.cache_read_input_tokens {
            self.cache_read = Some(v);
        }
        if let Some(v) = usage.cache_creation_input_tokens {
            self.cache_write = Some(v);
        }
    }
}

/// Decodes one response body.
#[derive(Debug, Default)]
pub struct AnthropicDecoder {
    sse: SseDecoder,
    blocks: HashMap<u32, BlockKind>,
    counts: Counts,
    stop_reason: Option<Result<StopReason, ModelError>>,
    finished: bool,
}

fn block_index(index: Option<u64>) -> Result<u32, Failure> {
    index
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| protocol("a content block event without an index"))
}

impl AnthropicDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    fn block_start(&mut self, index: u32, block: Option<ContentBlock>, out: &mut Vec<ModelEvent>) {
        let kind = match block.unwrap_or(ContentBlock::Other) {
            ContentBlock::Text { text } => {
                if !text.is_empty() {
                    out.push(ModelEvent::TextDelta { index, text });
                }
                BlockKind::Text
            }
            ContentBlock::ToolUse { id, name, input } => {
                out.push(ModelEvent::ToolUseStart {
                    index,
                    tool_use_id: id,
                    name,
                });
                if let Some(input) = input.filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                {
                    tool_input(index, input.to_string(), out);
                }
                BlockKind::ToolUse
            }
            ContentBlock::Thinking { thinking } => {
                if !thinking.is_empty() {
                    out.push(ModelEvent::ReasoningDelta {
                        index,
                        delta: ReasoningDelta::Text(thinking),
                    });
                }
                BlockKind::Thinking
            }
            ContentBlock::RedactedThinking { data } => {
                out.push(ModelEvent::ReasoningDelta {
                    index,
                    delta: ReasoningDelta::Redacted(data),
                });
                BlockKind::Thinking
            }
            ContentBlock::Other => BlockKind::Other,
        };
        self.blocks.insert(index, kind);
    }

    fn block_delta(&self, index: u32, delta: Option<BlockDelta>, out: &mut Vec<ModelEvent>) {
        if self.blocks.get(&index) == Some(&BlockKind::Other) {
            return;
        }
        match delta.unwrap_or(BlockDelta::Other) {
            BlockDelta::TextDelta { text } => out.push(ModelEvent::TextDelta { index, text }),
            BlockDelta::InputJsonDelta { partial_json } => tool_input(index, partial_json, out),
            BlockDelta::ThinkingDelta { thinking } => out.push(ModelEvent::ReasoningDelta {
                index,
                delta: ReasoningDelta::Text(thinking),
            }),
            BlockDelta::SignatureDelta { signature } => out.push(ModelEvent::ReasoningDelta {
                index,
                delta: ReasoningDelta::Signature(signature),
            }),
            BlockDelta::Other => {}
        }
    }

    fn message_stop(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let stop_reason = self
            .stop_reason
            .take()
            .unwrap_or(Ok(StopReason::EndTurn))
            .map_err(Failure::fatal)?;
        out.push(ModelEvent::MessageStop { stop_reason });
        let counts = &self.counts;
        out.push(ModelEvent::Metadata {
            usage: Some(usage_with_total(
                counts.input,
                counts.output,
                counts.cache_read,
                counts.cache_write,
            )),
            metrics: None,
        });
        self.finished = true;
        Ok(())
    }
}

impl RecordDecoder for AnthropicDecoder {
    type Splitter = SseDecoder;

    fn splitter(&mut self) -> &mut SseDecoder {
        &mut self.sse
    }

    fn record(&mut self, record: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let event = StreamEvent::parse(&record.data)
            .map_err(|e| protocol(format!("an event is not JSON ({e})")))?;
        match event {
            StreamEvent::MessageStart { message } => {
                if let Some(usage) = message.and_then(|m| m.usage) {
                    self.counts.apply(usage);
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.block_start(block_index(index)?, content_block, out),
            StreamEvent::ContentBlockDelta { index, delta } => {
                self.block_delta(block_index(index)?, delta, out);
            }
            StreamEvent::ContentBlockStop { index } => {
                let index = block_index(index)?;
                if self.blocks.get(&index) != Some(&BlockKind::Other) {
                    out.push(ModelEvent::BlockStop { index });
                }
            }
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(stop_reason(&reason));
                }
                if let Some(usage) = usage {
                    self.counts.apply(usage);
                }
            }
            StreamEvent::MessageStop => self.message_stop(out)?,
            StreamEvent::Error { error } => {
                let error = error.unwrap_or_default();
                return Err(api_failure(&error.kind, &error.message, None, None));
            }
            StreamEvent::Other => {}
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn unfinished(&mut self, _out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        Err(ended_early("the stream ended before message_stop"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Usage;
    use crate::model::MessageAssembler;

    const TEXT_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/anthropic/text_turn.sse");
    const TOOL_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/anthropic/tool_turn.sse");
    const ERROR_AFTER_200: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/anthropic/error_after_200.sse");

    /// Decodes `body` in pieces of `piece` bytes: the events, and the failure if any.
    fn decode(body: &[u8], piece: usize) -> (Vec<ModelEvent>, Option<Failure>) {
        crate::provider::http::decode_in_pieces(&mut AnthropicDecoder::new(), body, piece)
    }

    #[test]
    fn fixtures_decode_the_same_whole_and_in_odd_pieces() {
        crate::provider::http::assert_pieces_decode_alike(
            decode,
            &[TEXT_TURN, TOOL_TURN, ERROR_AFTER_200],
            &[1, 2, 3, 5, 7, 13, 64, 333],
        );
    }

    #[test]
    fn text_turn_events() {
        let (events, failure) = decode(TEXT_TURN, 11);
        assert!(failure.is_none());
        let text = crate::provider::http::block_text(&events, 0);
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
    fn odd_events_are_ignored_and_an_index_less_block_event_is_a_protocol_error() {
        let body = concat!(
            "data: 42\n\n",
            "data: {\"no_type\":true}\n\n",
            "data: {\"type\":\"ping\"}\n\n",
            "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s\"}}\n\n",
            "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hidden\"}}\n\n",
            "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":7,\"name\":\"t\",\"input\":{}}}\n\n",
            "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
            "data: {\"type\":\"message_stop\"}\n\n",
        );
        let (events, failure) = decode(body.as_bytes(), 6);
        assert!(failure.is_none(), "{failure:?}");
        assert_eq!(
            &events[..2],
            &[
                ModelEvent::ToolUseStart {
                    index: 1,
                    tool_use_id: String::new(),
                    name: "t".into()
                },
                ModelEvent::BlockStop { index: 1 },
            ]
        );
        let (_, failure) = decode(
            b"data: {\"type\":\"content_block_delta\",\"index\":\"0\",\"delta\":{}}\n\n",
            5,
        );
        let failure = failure.expect("a failure");
        assert!(
            matches!(failure.error, ModelError::Stream(ref m) if m.contains("without an index")),
            "{failure:?}"
        );
        let (_, failure) = decode(b"data: {\"type\":\"message_stop\"\n\n", 5);
        assert!(
            matches!(failure.expect("a failure").error, ModelError::Stream(ref m) if m.contains("not JSON"))
        );
    }
}
