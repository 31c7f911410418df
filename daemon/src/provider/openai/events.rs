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
//! is a retryable failure; a `data` that is not JSON is a protocol failure.

use serde::Deserialize;
use serde_json::Value;
use tracing::warn;

use crate::message::Usage;
use crate::model::{ModelError, ModelEvent, StopReason};
use crate::provider::anthropic::sse::{SseDecoder, SseEvent};
use crate::provider::chat_blocks::ChatBlocks;
use crate::provider::compat::{self, Family};
use crate::provider::http::FrameDecoder;
use crate::provider::retry::Failure;

/// One `data:` record.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Record {
    /// `{"error": {"message", "type", "code"}}`: the server gave up mid-reply.
    Failed { error: ApiError },
    /// A chunk (vLLM's flat `{"object": "error", "message": …}` is one too, told by `object`).
    Chunk(Chunk),
}

/// An error object.
#[derive(Debug, Deserialize)]
pub struct ApiError {
    #[serde(default)]
    pub message: String,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub code: Option<Value>,
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
        other => {
            warn!(
                finish_reason = other,
                "unknown finish_reason; ending the turn"
            );
            StopReason::EndTurn
        }
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
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::fatal(ModelError::Stream(message.into()))
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
        if let Some(arguments) = &function.arguments {
            ChatBlocks::tool_arguments(index, arguments, out);
        }
    }

    fn record(&mut self, record: &SseEvent, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let data = record.data.trim();
        if data == "[DONE]" {
            return self.finish(out);
        }
        let parsed: Record = serde_json::from_str(data)
            .map_err(|e| protocol(format!("a chat completion chunk is not JSON ({e})")))?;
        let chunk = match parsed {
            Record::Failed { error } => {
                let code = match error.code {
                    Some(Value::String(code)) => code,
                    Some(Value::Number(n)) => n.to_string(),
                    _ => error.kind.unwrap_or_default(),
                };
                return Err(self.error(&error.message, &code));
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
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens - cached,
                output_tokens: usage.completion_tokens,
                total_tokens: usage.prompt_tokens.saturating_add(usage.completion_tokens),
                cache_read_input_tokens: (cached > 0).then_some(cached),
                cache_write_input_tokens: None,
            });
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

    fn records(
        &mut self,
        records: Vec<SseEvent>,
        out: &mut Vec<ModelEvent>,
    ) -> Result<bool, Failure> {
        for record in &records {
            if self.finished {
                break;
            }
            self.record(record, out)?;
        }
        Ok(self.finished)
    }
}

impl FrameDecoder for OpenAiDecoder {
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
        if self.finish.is_some() {
            // Some servers close the stream after the finish without `[DONE]`.
            return self.finish(out);
        }
        Err(Failure::retryable(
            ModelError::Unavailable("the chat completion stream ended before it finished".into()),
            None,
        ))
    }
}
