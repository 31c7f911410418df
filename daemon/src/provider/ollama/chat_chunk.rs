//! `/api/chat` stream records → [`ModelEvent`]s.
//!
//! Invariants: each NDJSON line is one typed [`Record`] (unknown fields ignored); `thinking`
//! becomes reasoning deltas and `content` text deltas, each in its own block; a tool call arrives
//! whole in one record and becomes `ToolUseStart` + its arguments as one JSON fragment (its id is
//! the server's, else one made up unique to this reply); the `done` record ends the stream with
//! `MessageStop` (`ToolUse` when the reply called a tool, `MaxTokens` for `length`) and the usage
//! (`prompt_eval_count` in, `eval_count` out); an `{"error": …}` record is a failure; a line that
//! is not JSON is a protocol failure, but a last line cut off by the body's end, like a body that
//! ends before `done`, is a retryable failure.

use serde::Deserialize;
use serde_json::Value;

use crate::message::Metrics;
use crate::model::{ModelEvent, StopReason};
use crate::provider::chat_blocks::ChatBlocks;
use crate::provider::compat::{self, Family};
use crate::provider::ndjson::NdjsonDecoder;
use crate::provider::record_stream::{RecordDecoder, cut_off, ended_early, protocol};
use crate::provider::reply_mapping::{tool_input, unknown_stop_reason, usage_with_total};
use crate::provider::retry::Failure;

/// One line of the stream.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Record {
    /// `{"error": "…"}`: the server gave up mid-reply.
    Failed { error: String },
    /// A piece of the reply; the last one has `done: true`.
    Chunk(Chunk),
}

/// A piece of the reply.
#[derive(Debug, Deserialize)]
pub struct Chunk {
    #[serde(default)]
    pub message: Option<ChunkMessage>,
    #[serde(default)]
    pub done: bool,
    #[serde(default)]
    pub done_reason: Option<String>,
    #[serde(default)]
    pub prompt_eval_count: Option<u64>,
    #[serde(default)]
    pub eval_count: Option<u64>,
    /// Nanoseconds.
    #[serde(default)]
    pub total_duration: Option<u64>,
}

/// The message part of a chunk.
#[derive(Debug, Default, Deserialize)]
pub struct ChunkMessage {
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub thinking: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
}

/// One tool call, delivered whole.
#[derive(Debug, Deserialize)]
pub struct ToolCall {
    #[serde(default)]
    pub id: Option<String>,
    pub function: FunctionCall,
}

#[derive(Debug, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: Value,
}

/// The stop reason for a `done_reason`, given whether the reply called a tool.
pub fn stop_reason(done_reason: Option<&str>, called_tool: bool) -> StopReason {
    match done_reason {
        Some("length") => StopReason::MaxTokens,
        _ if called_tool => StopReason::ToolUse,
        Some("stop") | None => StopReason::EndTurn,
        Some(other) => unknown_stop_reason("Ollama", "done_reason", other),
    }
}

/// Decodes one response body.
#[derive(Debug)]
pub struct OllamaDecoder {
    lines: NdjsonDecoder,
    blocks: ChatBlocks,
    model_id: String,
    id_prefix: String,
    calls: u64,
    finished: bool,
    /// The body has ended: a record that does not parse now was cut off, not malformed.
    at_end: bool,
}

impl OllamaDecoder {
    /// A decoder for a reply of `model_id`; tool calls without an id get `<id_prefix><n>`.
    pub fn new(model_id: &str, id_prefix: impl Into<String>) -> Self {
        Self {
            lines: NdjsonDecoder::new(),
            blocks: ChatBlocks::new(),
            model_id: model_id.to_owned(),
            id_prefix: id_prefix.into(),
            calls: 0,
            finished: false,
            at_end: false,
        }
    }
}

impl RecordDecoder for OllamaDecoder {
    type Splitter = NdjsonDecoder;

    fn splitter(&mut self) -> &mut NdjsonDecoder {
        &mut self.lines
    }

    fn record(&mut self, line: &String, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let record: Record = serde_json::from_str(line).map_err(|e| {
            if self.at_end {
                cut_off()
            } else {
                protocol(format!("a line of the Ollama stream is not JSON ({e})"))
            }
        })?;
        let chunk = match record {
            Record::Failed { error } => {
                return Err(compat::failure(
                    Family::Ollama,
                    &self.model_id,
                    None,
                    &error,
                    "",
                    None,
                ));
            }
            Record::Chunk(chunk) => chunk,
        };
        if let Some(message) = chunk.message {
            self.blocks.reasoning(&message.thinking, out);
            self.blocks.text(&message.content, out);
            for call in message.tool_calls {
                let key = self.calls;
                self.calls += 1;
                let id = call
                    .id
                    .filter(|id| !id.is_empty())
                    .unwrap_or_else(|| format!("{}{key}", self.id_prefix));
                let index = self.blocks.start_tool(key, id, call.function.name, out);
                let arguments = match call.function.arguments {
                    Value::Null => String::new(),
                    // Some models send the arguments as a JSON string.
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                tool_input(index, arguments, out);
            }
        }
        if chunk.done {
            self.blocks.close_all(out);
            out.push(ModelEvent::MessageStop {
                stop_reason: stop_reason(chunk.done_reason.as_deref(), self.blocks.has_tools()),
            });
            out.push(ModelEvent::Metadata {
                usage: Some(usage_with_total(
                    chunk.prompt_eval_count.unwrap_or(0),
                    chunk.eval_count.unwrap_or(0),
                    None,
                    None,
                )),
                metrics: chunk.total_duration.map(|ns| Metrics {
                    latency_ms: ns / 1_000_000,
                    time_to_first_byte_ms: None,
                }),
            });
            self.finished = true;
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn body_ended(&mut self) {
        self.at_end = true;
    }

    fn unfinished(&mut self, _out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        Err(ended_early(
            "the Ollama stream ended before its done record",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelError;
    use crate::provider::retry::RetryAdvice;

    const TEXT_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/ollama/text_turn.ndjson");
    const TOOL_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/ollama/tool_turn.ndjson");
    const ERROR_MID_STREAM: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/ollama/error_mid_stream.ndjson");

    fn decode(body: &[u8], piece: usize) -> (Vec<ModelEvent>, Option<Failure>) {
        crate::provider::http::decode_in_pieces(
            &mut OllamaDecoder::new("qwen3:8b", "gen_"),
            body,
            piece,
        )
    }

    #[test]
    fn fixtures_decode_the_same_whole_and_in_odd_pieces() {
        crate::provider::http::assert_pieces_decode_alike(
            decode,
            &[TEXT_TURN, TOOL_TURN, ERROR_MID_STREAM],
            &[1, 2, 3, 5, 7, 13, 64, 333],
        );
    }

    #[test]
    fn a_text_turn_with_thinking_and_usage() {
        let (events, failure) = decode(TEXT_TURN, 7);
        assert!(failure.is_none(), "{failure:?}");
        let reasoning = crate::provider::http::reasoning_text(&events, 0);
        assert_eq!(reasoning, "The user greets me in Turkish.");
        let text = crate::provider::http::block_text(&events, 1);
        assert_eq!(text, "Merhaba! Saat 15:30, efendim. Çay ister misiniz? 🍵");
        let n = events.len();
        assert_eq!(
            events[n - 2],
            ModelEvent::MessageStop {
                stop_reason: StopReason::EndTurn
            }
        );
        let ModelEvent::Metadata {
            usage: Some(usage),
            metrics: Some(metrics),
        } = &events[n - 1]
        else {
            panic!("no metadata: {events:?}");
        };
        assert_eq!(
            (usage.input_tokens, usage.output_tokens, usage.total_tokens),
            (26, 282, 308)
        );
        assert_eq!(metrics.latency_ms, 4883);
    }

    #[test]
    fn whole_tool_calls_become_tool_blocks_with_ids() {
        let (events, failure) = decode(TOOL_TURN, 5);
        assert!(failure.is_none(), "{failure:?}");
        let starts: Vec<(u32, &str, &str)> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::ToolUseStart {
                    index,
                    tool_use_id,
                    name,
                } => Some((*index, tool_use_id.as_str(), name.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(
            starts,
            [
                (1, "call_k3v9x2q1", "current_time"),
                (2, "gen_1", "demo_physical_action")
            ]
        );
        assert!(events.contains(&ModelEvent::ToolUseInputDelta {
            index: 1,
            partial_json: r#"{"timezone":"Europe/İstanbul"}"#.into()
        }));
        assert!(events.contains(&ModelEvent::MessageStop {
            stop_reason: StopReason::ToolUse
        }));
    }

    #[test]
    fn an_error_record_after_200_is_a_retryable_failure() {
        let (events, failure) = decode(ERROR_MID_STREAM, 9);
        assert!(
            events
                .iter()
                .any(|e| matches!(e, ModelEvent::TextDelta { .. }))
        );
        let failure = failure.expect("a failure");
        assert_eq!(failure.retry, RetryAdvice::After(None));
        assert!(
            matches!(&failure.error, ModelError::Unavailable(m) if m.contains("unexpected EOF"))
        );
    }

    #[test]
    fn a_cut_body_is_retryable_and_a_malformed_line_is_not() {
        let cut = &TEXT_TURN[..TEXT_TURN.len() / 2];
        let (_, failure) = decode(cut, 4);
        let failure = failure.expect("a failure");
        assert_eq!(failure.retry, RetryAdvice::After(None));
        assert!(matches!(failure.error, ModelError::Unavailable(_)));

        let (_, failure) = decode(
            b"{\"message\":{\"content\":\"a\"},\"done\":false}\n{oops\n",
            3,
        );
        let failure = failure.expect("a failure");
        assert_eq!(failure.retry, RetryAdvice::Never);
        assert!(matches!(failure.error, ModelError::Stream(m) if m.contains("not JSON")));
    }

    #[test]
    fn done_reasons_map() {
        assert_eq!(stop_reason(Some("length"), true), StopReason::MaxTokens);
        assert_eq!(stop_reason(Some("stop"), true), StopReason::ToolUse);
        assert_eq!(stop_reason(Some("stop"), false), StopReason::EndTurn);
        assert_eq!(stop_reason(Some("unload"), false), StopReason::EndTurn);
    }
}
