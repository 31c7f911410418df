//! [`FakeReply`]: one reply of the fake model, built by tests (or by the demo rules) and played
//! back as the model events a real provider would stream.
//!
//! Invariants: blocks stream in the order they were added, each ending with `BlockStop`; a tool
//! call's input arrives in two deltas; the stream ends with `MessageStop` (`tool_use` when a tool
//! is called, else `end_turn`, unless scripted) and `Metadata` with the scripted usage or the
//! estimate (output characters / 4) — except a reply scripted to fail or to hang.

use std::time::Duration;

use serde_json::Value;

use crate::message::Usage;
use crate::model::{ModelError, ModelEvent, ReasoningDelta, StopReason};

#[derive(Debug, Clone, PartialEq)]
enum FakeBlock {
    Text(Vec<String>),
    Reasoning(String),
    ToolUse {
        id: Option<String>,
        name: String,
        raw_input: String,
    },
}

/// One scripted model reply.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeReply {
    blocks: Vec<FakeBlock>,
    stop_reason: Option<StopReason>,
    usage: Option<Usage>,
    throttled: Option<Duration>,
    pub(super) open_error: Option<ModelError>,
    stream_error: Option<ModelError>,
    pub(super) hang: bool,
}

impl FakeReply {
    fn empty() -> Self {
        Self {
            blocks: Vec::new(),
            stop_reason: None,
            usage: None,
            throttled: None,
            open_error: None,
            stream_error: None,
            hang: false,
        }
    }

    /// Whether this reply calls a tool.
    #[cfg(test)]
    pub(super) fn calls_a_tool(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| matches!(b, FakeBlock::ToolUse { .. }))
    }

    /// A plain text answer in one delta.
    pub fn text(text: impl Into<String>) -> Self {
        Self::empty().and_text(text)
    }

    /// A text answer streamed in these deltas.
    pub fn deltas<S: Into<String>>(deltas: impl IntoIterator<Item = S>) -> Self {
        let mut reply = Self::empty();
        reply.blocks.push(FakeBlock::Text(
            deltas.into_iter().map(Into::into).collect(),
        ));
        reply
    }

    /// One tool call (id generated: `fake-<call>-<block>`).
    pub fn tool_call(name: impl Into<String>, input: Value) -> Self {
        Self::empty().and_tool_call(name, input)
    }

    /// Several tool calls in one message, in this order.
    pub fn tool_calls<S: Into<String>>(calls: impl IntoIterator<Item = (S, Value)>) -> Self {
        calls
            .into_iter()
            .fold(Self::empty(), |reply, (name, input)| {
                reply.and_tool_call(name, input)
            })
    }

    /// `Model::stream` itself fails.
    pub fn error(message: impl Into<String>) -> Self {
        let mut reply = Self::empty();
        reply.open_error = Some(ModelError::Request(message.into()));
        reply
    }

    /// `Model::stream` itself fails with `error` (e.g. an unavailable provider).
    pub fn fail(error: ModelError) -> Self {
        let mut reply = Self::empty();
        reply.open_error = Some(error);
        reply
    }

    /// Adds a text block.
    pub fn and_text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(FakeBlock::Text(vec![text.into()]));
        self
    }

    /// Adds a reasoning block.
    pub fn and_reasoning(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(FakeBlock::Reasoning(text.into()));
        self
    }

    /// Adds a tool call.
    pub fn and_tool_call(mut self, name: impl Into<String>, input: Value) -> Self {
        self.blocks.push(FakeBlock::ToolUse {
            id: None,
            name: name.into(),
            raw_input: input.to_string(),
        });
        self
    }

    /// Adds a tool call with this id.
    pub fn and_tool_call_with_id(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Self {
        self.blocks.push(FakeBlock::ToolUse {
            id: Some(id.into()),
            name: name.into(),
            raw_input: input.to_string(),
        });
        self
    }

    /// Adds a tool call whose input is this raw (possibly broken) JSON text.
    pub fn and_raw_tool_call(
        mut self,
        name: impl Into<String>,
        raw_input: impl Into<String>,
    ) -> Self {
        self.blocks.push(FakeBlock::ToolUse {
            id: None,
            name: name.into(),
            raw_input: raw_input.into(),
        });
        self
    }

    /// Reports this usage instead of the estimate.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(Usage {
            input_tokens,
            output_tokens,
            total_tokens: input_tokens + output_tokens,
            ..Usage::default()
        });
        self
    }

    /// Ends with this stop reason instead of `end_turn`/`tool_use`.
    pub fn with_stop_reason(mut self, stop_reason: StopReason) -> Self {
        self.stop_reason = Some(stop_reason);
        self
    }

    /// Announces a throttle of `delay` before the reply.
    pub fn throttled_first(mut self, delay: Duration) -> Self {
        self.throttled = Some(delay);
        self
    }

    /// After the blocks, the stream fails with this error instead of stopping.
    pub fn then_fail(mut self, message: impl Into<String>) -> Self {
        self.stream_error = Some(ModelError::Stream(message.into()));
        self
    }

    /// After the blocks, the stream never ends (until the caller gives up).
    pub fn then_hang(mut self) -> Self {
        self.hang = true;
        self
    }

    /// The events of this reply as the `call`-th call's stream, with `input_tokens` as the
    /// estimate when no usage was scripted.
    pub(super) fn events(
        &self,
        call: usize,
        input_tokens: u64,
    ) -> Vec<Result<ModelEvent, ModelError>> {
        let mut events = Vec::new();
        if let Some(delay) = self.throttled {
            events.push(Ok(ModelEvent::Throttled { delay }));
        }
        let mut output_chars = 0usize;
        let mut has_tool = false;
        for (index, block) in self.blocks.iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            match block {
                FakeBlock::Text(deltas) => {
                    for text in deltas {
                        output_chars += text.chars().count();
                        events.push(Ok(ModelEvent::TextDelta {
                            index,
                            text: text.clone(),
                        }));
                    }
                }
                FakeBlock::Reasoning(text) => {
                    output_chars += text.chars().count();
                    events.push(Ok(ModelEvent::ReasoningDelta {
                        index,
                        delta: ReasoningDelta::Text(text.clone()),
                    }));
                }
                FakeBlock::ToolUse {
                    id,
                    name,
                    raw_input,
                } => {
                    has_tool = true;
                    output_chars += raw_input.chars().count() + name.len();
                    let tool_use_id = id.clone().unwrap_or_else(|| format!("fake-{call}-{index}"));
                    events.push(Ok(ModelEvent::ToolUseStart {
                        index,
                        tool_use_id,
                        name: name.clone(),
                    }));
                    let split = raw_input.char_indices().nth(raw_input.chars().count() / 2);
                    let (head, tail) = raw_input.split_at(split.map_or(0, |(at, _)| at));
                    for part in [head, tail].into_iter().filter(|p| !p.is_empty()) {
                        events.push(Ok(ModelEvent::ToolUseInputDelta {
                            index,
                            partial_json: part.to_owned(),
                        }));
                    }
                }
            }
            events.push(Ok(ModelEvent::BlockStop { index }));
        }
        if let Some(error) = &self.stream_error {
            events.push(Err(error.clone()));
            return events;
        }
        if self.hang {
            return events;
        }
        let stop_reason = self.stop_reason.unwrap_or(if has_tool {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        });
        events.push(Ok(ModelEvent::MessageStop { stop_reason }));
        let usage = self.usage.unwrap_or_else(|| {
            let output_tokens = (output_chars as u64).div_ceil(4);
            Usage {
                input_tokens,
                output_tokens,
                total_tokens: input_tokens + output_tokens,
                ..Usage::default()
            }
        });
        events.push(Ok(ModelEvent::Metadata {
            usage: Some(usage),
            metrics: None,
        }));
        events
    }
}
