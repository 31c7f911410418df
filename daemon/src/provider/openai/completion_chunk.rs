//! Chat Completions stream chunks → [`ModelEvent`]s.
//!
//! Invariants: each SSE `data` is one typed [`Record`] (unknown fields ignored) until `[DONE]`;
//! only choice 0 is read; `reasoning_content` (or `reasoning`) becomes reasoning deltas, `content`
//! (and a `refusal`) text deltas, each tool call its own block keyed by the protocol's tool index,
//! so arguments spread over many chunks join in one block and several calls stay apart; the
//! `finish_reason` maps to a [`StopReason`] (`stop` with tool calls is `ToolUse`, as some servers
//! say); usage (sent after the finish by `include_usage`) counts cached prompt tokens as cache
//! reads, not input; `[DONE]` (or the body's end after a finish) ends the stream with
//! `MessageStop` then `Metadata`; an error record is a failure; a body that ends before any finish
//! is a retryable failure; a `data` that is not JSON is a protocol failure, unless the body's end
//! cut it off (retryable).

use serde::Deserialize;
use tracing::warn;

use crate::message::Usage;
use crate::model::{ModelEvent, StopReason};
use crate::provider::chat_blocks::ChatBlocks;
use crate::provider::compat::{self, ApiError, Family};
use crate::provider::record_stream::{RecordDecoder, cut_off, ended_early, protocol};
use crate::provider::reply_mapping::{tool_input, unknown_stop_reason, usage_with_total};
use crate::provider::retry::Failure;
use crate::provider::sse::{SseDecoder, SseEvent};

/// One `data:` record.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Record {
    /// `{"error": {"message", "type", "code"}}`: the server gave up mid-reply.
    Failed { error: ApiError },
    /// A chunk (vLLM's flat `{"object": "error", "message": …}` is one too, told by `object`).
    Chunk(Chunk),
}

/// One `chat.completion.chunk`.
#[derive(Debug, Deserialize)]
pub struct Chunk {
    #[serde(default)]
    pub object: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<ChunkUsage>,
}

#[derive(Debug, Deserialize)]
pub struct Choice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub delta: Option<Delta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Delta {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub reasoning_content: Option<String>,
    #[serde(default)]
    pub reasoning: Option<String>,
    #[serde(default)]
    pub refusal: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
pub struct ToolCallDelta {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
pub struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ChunkUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Deserialize)]
pub struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// The stop reason for a `finish_reason`, given whether the reply called a tool.
pub fn stop_reason(finish_reason: &str, called_tool: bool) -> StopReason {
    match finish_reason {
        "length" => StopReason::MaxTokens,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "content_filter" => StopReason::ContentFiltered,
        _ if called_tool => StopReason::ToolUse,
        "stop" => StopReason::EndTurn,
        other => unknown_stop_reason("OpenAI-compatible", "finish_reason", other),
    }
}

/// Decodes one response body.
#[derive(Debug)]
pub struct OpenAiDecoder {
    sse: SseDecoder,
    blocks: ChatBlocks,
    model_id: String,
    finish: Option<String>,
    usage: Option<Usage>,
    /// The protocol index of the tool call that got the last fragment.
    last_tool: Option<u64>,
    tools_seen: u64,
    finished: bool,
    /// The body has ended: a record that does not parse now was cut off, not malformed.
    at_end: bool,
}

impl OpenAiDecoder {
    pub fn new(model_id: &str) -> Self {
        Self {
            sse: SseDecoder::new(),
            blocks: ChatBlocks::new(),
            model_id: model_id.to_owned(),
            finish: None,
            usage: None,
            last_tool: None,
            tools_seen: 0,
            finished: false,
            at_end: false,
        }
    }

    fn error(&self, message: &str, code: &str) -> Failure {
        compat::failure(Family::OpenAi, &self.model_id, None, message, code, None)
    }

    fn tool_delta(&mut self, call: ToolCallDelta, out: &mut Vec<ModelEvent>) {
        // Servers that leave out `index` send each call whole, or its later fragments without id.
        let key = match (call.index, &call.id) {
            (Some(index), _) => index,
            (None, Some(_)) => self.tools_seen,
            (None, None) => self.last_tool.unwrap_or(self.tools_seen),
        };
        let function = call.function.unwrap_or(FunctionDelta {
            name: None,
            arguments: None,
        });
        let index = match self.blocks.tool(key) {
            Some(index) => index,
            None => {
                self.tools_seen = self.tools_seen.max(key.saturating_add(1));
                let id = call.id.unwrap_or_else(|| format!("call_{key}"));
                let name = function.name.clone().unwrap_or_default();
                self.blocks.start_tool(key, id, name, out)
            }
        };
        self.last_tool = Some(key);
        if let Some(arguments) = function.arguments {
            tool_input(index, arguments, out);
        }
    }

    fn chunk(&mut self, record: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let data = record.data.trim();
        if data == "[DONE]" {
            return self.finish(out);
        }
        let parsed: Record = serde_json::from_str(data).map_err(|e| {
            if self.at_end {
                cut_off()
            } else {
                protocol(format!("a chat completion chunk is not JSON ({e})"))
            }
        })?;
        let chunk = match parsed {
            Record::Failed { error } => {
                let (message, code) = error.message_and_code();
                return Err(self.error(&message, &code));
            }
            Record::Chunk(chunk) => chunk,
        };
        if chunk.object.as_deref() == Some("error") {
            return Err(self.error(chunk.message.as_deref().unwrap_or("error"), ""));
        }
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(delta) = choice.delta {
                let reasoning = delta.reasoning_content.or(delta.reasoning);
                self.blocks
                    .reasoning(reasoning.as_deref().unwrap_or_default(), out);
                self.blocks
                    .text(delta.content.as_deref().unwrap_or_default(), out);
                self.blocks
                    .text(delta.refusal.as_deref().unwrap_or_default(), out);
                for call in delta.tool_calls.unwrap_or_default() {
                    self.tool_delta(call, out);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(reason);
            }
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0)
                .min(usage.prompt_tokens);
            // The cached tokens are part of the prompt: the total is prompt plus completion.
            self.usage = Some(usage_with_total(
                usage.prompt_tokens - cached,
                usage.completion_tokens,
                (cached > 0).then_some(cached),
                None,
            ));
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let reason = self.finish.take().unwrap_or_else(|| {
            warn!("the chat completion stream ended without a finish_reason");
            "stop".to_owned()
        });
        self.blocks.close_all(out);
        out.push(ModelEvent::MessageStop {
            stop_reason: stop_reason(&reason, self.blocks.has_tools()),
        });
        out.push(ModelEvent::Metadata {
            usage: self.usage,
            metrics: None,
        });
        self.finished = true;
        Ok(())
    }
}

impl RecordDecoder for OpenAiDecoder {
    type Splitter = SseDecoder;

    fn splitter(&mut self) -> &mut SseDecoder {
        &mut self.sse
    }

    fn record(&mut self, record: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        self.chunk(record, out)
    }

    fn finished(&self) -> bool {
        self.finished
    }

    fn body_ended(&mut self) {
        self.at_end = true;
    }

    fn unfinished(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        if self.finish.is_some() {
            // Some servers close the stream after the finish without `[DONE]`.
            return self.finish(out);
        }
        Err(ended_early(
            "the chat completion stream ended before it finished",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelError;
    use crate::provider::retry::RetryAdvice;

    const TEXT_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/openai/text_turn.sse");
    const TOOL_TURN: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/openai/tool_turn.sse");
    const ERROR_MID_STREAM: &[u8] =
        include_bytes!("../../../tests/fixtures/providers/openai/error_mid_stream.sse");

    fn decode(body: &[u8], piece: usize) -> (Vec<ModelEvent>, Option<Failure>) {
        crate::provider::http::decode_in_pieces(&mut OpenAiDecoder::new("gpt-4.1"), body, piece)
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
    fn a_text_turn_with_reasoning_and_cached_usage() {
        let (events, failure) = decode(TEXT_TURN, 11);
        assert!(failure.is_none(), "{failure:?}");
        let reasoning = crate::provider::http::reasoning_text(&events, 0);
        assert_eq!(reasoning, "The user greets me in Turkish.");
        let text = crate::provider::http::block_text(&events, 1);
        assert_eq!(text, "Merhaba! Saat 15:30, efendim. Çay ister misiniz? 🍵");
        let n = events.len();
        assert_eq!(events[n - 3], ModelEvent::BlockStop { index: 1 });
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
                    input_tokens: 176,
                    output_tokens: 21,
                    total_tokens: 1221,
                    cache_read_input_tokens: Some(1024),
                    cache_write_input_tokens: None,
                }),
                metrics: None,
            }
        );
    }

    #[test]
    fn arguments_spread_over_deltas_join_per_call() {
        let (events, failure) = decode(TOOL_TURN, 3);
        assert!(failure.is_none(), "{failure:?}");
        let args = |block: u32| -> String {
            events
                .iter()
                .filter_map(|e| match e {
                    ModelEvent::ToolUseInputDelta {
                        index,
                        partial_json,
                    } if *index == block => Some(partial_json.as_str()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(args(0), r#"{"timezone":"Europe/İstanbul"}"#);
        assert_eq!(args(1), r#"{"action":"kettle on"}"#);
        assert!(events.contains(&ModelEvent::ToolUseStart {
            index: 1,
            tool_use_id: "call_Zr7p".into(),
            name: "demo_physical_action".into()
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
        assert!(matches!(&failure.error, ModelError::Unavailable(m) if m.contains("server_error")));
    }

    #[test]
    fn a_cut_body_is_retryable_and_malformed_data_is_not() {
        let cut = &TEXT_TURN[..TEXT_TURN.len() / 2];
        let (_, failure) = decode(cut, 4);
        let failure = failure.expect("a failure");
        assert_eq!(failure.retry, RetryAdvice::After(None));
        assert!(matches!(failure.error, ModelError::Unavailable(_)));

        let (_, failure) = decode(b"data: {\"choices\":[]}\n\ndata: {oops\n\n", 3);
        let failure = failure.expect("a failure");
        assert_eq!(failure.retry, RetryAdvice::Never);
        assert!(matches!(failure.error, ModelError::Stream(m) if m.contains("not JSON")));
    }

    #[test]
    fn a_finish_without_done_still_ends_and_finish_reasons_map() {
        let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"length\"}]}\n\n";
        let (events, failure) = decode(body, 5);
        assert!(failure.is_none());
        assert!(events.contains(&ModelEvent::MessageStop {
            stop_reason: StopReason::MaxTokens
        }));
        assert_eq!(stop_reason("stop", true), StopReason::ToolUse);
        assert_eq!(
            stop_reason("content_filter", false),
            StopReason::ContentFiltered
        );
        assert_eq!(stop_reason("weird", false), StopReason::EndTurn);
    }
}
