//! `/api/chat` stream records → [`ModelEvent`]s.
//!
//! Invariants: each NDJSON line is one typed [`Record`] (unknown fields ignored); `thinking`
//! becomes reasoning deltas and `content` text deltas, each in its own block; a tool call arrives
//! whole in one record and becomes `ToolUseStart` + its arguments as one JSON fragment (its id is
//! the server's, else one made up unique to this reply); the `done` record ends the stream with
//! `MessageStop` (`ToolUse` when the reply called a tool, `MaxTokens` for `length`) and the usage
//! (`prompt_eval_count` in, `eval_count` out); an `{"error": …}` record is a failure; a line that
//! is not JSON is a protocol failure; a body that ends before `done` is a retryable failure.

use serde::Deserialize;
use serde_json::Value;
use tracing::warn;

use crate::message::{Metrics, Usage};
use crate::model::{ModelError, ModelEvent, StopReason};
use crate::provider::chat_blocks::ChatBlocks;
use crate::provider::compat::{self, Family};
use crate::provider::http::FrameDecoder;
use crate::provider::ndjson::NdjsonDecoder;
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
        Some(other) => {
            warn!(
                done_reason = other,
                "unknown Ollama done_reason; ending the turn"
            );
            StopReason::EndTurn
        }
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
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::fatal(ModelError::Stream(message.into()))
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
        }
    }

    fn line(&mut self, line: &str, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let record: Record = serde_json::from_str(line)
            .map_err(|e| protocol(format!("a line of the Ollama stream is not JSON ({e})")))?;
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
                ChatBlocks::tool_arguments(index, &arguments, out);
            }
        }
        if chunk.done {
            self.blocks.close_all(out);
            out.push(ModelEvent::MessageStop {
                stop_reason: stop_reason(chunk.done_reason.as_deref(), self.blocks.has_tools()),
            });
            let input = chunk.prompt_eval_count.unwrap_or(0);
            let output = chunk.eval_count.unwrap_or(0);
            out.push(ModelEvent::Metadata {
                usage: Some(Usage {
                    input_tokens: input,
                    output_tokens: output,
                    total_tokens: input.saturating_add(output),
                    cache_read_input_tokens: None,
                    cache_write_input_tokens: None,
                }),
                metrics: chunk.total_duration.map(|ns| Metrics {
                    latency_ms: ns / 1_000_000,
                    time_to_first_byte_ms: None,
                }),
            });
            self.finished = true;
        }
        Ok(())
    }

    fn lines(&mut self, lines: Vec<String>, out: &mut Vec<ModelEvent>) -> Result<bool, Failure> {
        for line in &lines {
            if self.finished {
                break;
            }
            self.line(line, out)?;
        }
        Ok(self.finished)
    }
}

impl FrameDecoder for OllamaDecoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, Failure> {
        let mut lines = Vec::new();
        self.lines
            .push(chunk, &mut lines)
            .map_err(|e| protocol(e.to_string()))?;
        self.lines(lines, out)
    }

    fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), Failure> {
        let mut lines = Vec::new();
        self.lines
            .finish(&mut lines)
            .map_err(|e| protocol(e.to_string()))?;
        if self.lines(lines, out)? {
            return Ok(());
        }
        Err(Failure::retryable(
            ModelError::Unavailable("the Ollama stream ended before its done record".into()),
            None,
        ))
    }
}
