//! [`MessageAssembler`]: turns a call's [`ModelEvent`]s into one assistant message.
//!
//! Invariants: blocks are keyed by index and emitted in index order; a tool input is the
//! concatenated JSON text, parsed once at the end: empty means `{}`, and text that is not a JSON
//! object becomes `{}` in the history *and* an [`InvalidToolInput`] (the loop answers it with an
//! error result instead of running the tool); `end_turn` with tool calls means `tool_use`, and
//! `tool_use` without one means `end_turn`; on `max_tokens` every tool call becomes the Strands
//! "incomplete" text so nothing half-written runs, and on any other stop reason but `tool_use`
//! (`stop_sequence`, `content_filtered`, `guardrail_intervened`) every tool call becomes a "not
//! run" text, so a reply that ends the turn never holds a toolUse without its toolResult; an
//! empty reply becomes `[blank text]`, because
//! providers reject empty messages. A block whose deltas disagree with its kind is a protocol error.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{ModelError, ModelEvent, ReasoningDelta, StopReason};
use crate::message::{
    ContentBlock, Message, MessageMetadata, Metrics, ReasoningContent, ReasoningText, Role,
    ToolUse, Usage,
};

/// The text stored for an assistant reply that had no content.
pub fn blank_text() -> &'static str {
    "[blank text]"
}

/// The text that replaces a tool call cut off by the output-token limit.
pub fn max_tokens_text(tool: &str) -> String {
    format!(
        "The selected tool {tool}'s tool use was incomplete due to maximum token limits being reached."
    )
}

/// The text that replaces a tool call in a reply that stopped for `reason` (not `tool_use` or
/// `max_tokens`): the turn ends there, so the call is not run.
pub fn stopped_tool_text(tool: &str, reason: StopReason) -> String {
    format!("The selected tool {tool}'s tool use was not run because the reply stopped ({reason}).")
}

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: String,
    },
    Reasoning {
        text: String,
        signature: Option<String>,
        redacted: Option<String>,
    },
}

/// A tool call whose input could not be read as a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidToolInput {
    pub tool_use_id: String,
    pub problem: String,
}

/// The assembled reply of one model call.
#[derive(Debug, Clone, PartialEq)]
pub struct AssembledMessage {
    /// The assistant message, with usage and metrics in its metadata.
    pub message: Message,
    pub stop_reason: StopReason,
    pub usage: Usage,
    pub invalid_tool_inputs: Vec<InvalidToolInput>,
}

/// Collects the events of one model call.
#[derive(Debug, Default)]
pub struct MessageAssembler {
    blocks: BTreeMap<u32, Block>,
    stop_reason: Option<StopReason>,
    usage: Option<Usage>,
    metrics: Option<Metrics>,
}

impl MessageAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets everything streamed so far (a throttled call is retried from scratch).
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Adds one event.
    pub fn push(&mut self, event: &ModelEvent) -> Result<(), ModelError> {
        match event {
            ModelEvent::TextDelta { index, text } => {
                match self
                    .blocks
                    .entry(*index)
                    .or_insert_with(|| Block::Text(String::new()))
                {
                    Block::Text(buffer) => buffer.push_str(text),
                    _ => return Err(mismatch(*index, "text")),
                }
            }
            ModelEvent::ToolUseStart {
                index,
                tool_use_id,
                name,
            } => {
                if self.blocks.contains_key(index) {
                    return Err(ModelError::Stream(format!("block {index} started twice")));
                }
                self.blocks.insert(
                    *index,
                    Block::ToolUse {
                        id: tool_use_id.clone(),
                        name: name.clone(),
                        input: String::new(),
                    },
                );
            }
            ModelEvent::ToolUseInputDelta {
                index,
                partial_json,
            } => match self.blocks.get_mut(index) {
                Some(Block::ToolUse { input, .. }) => input.push_str(partial_json),
                _ => return Err(mismatch(*index, "tool input")),
            },
            ModelEvent::ReasoningDelta { index, delta } => {
                let block = self
                    .blocks
                    .entry(*index)
                    .or_insert_with(|| Block::Reasoning {
                        text: String::new(),
                        signature: None,
                        redacted: None,
                    });
                let Block::Reasoning {
                    text,
                    signature,
                    redacted,
                } = block
                else {
                    return Err(mismatch(*index, "reasoning"));
                };
                match delta {
                    ReasoningDelta::Text(t) => text.push_str(t),
                    ReasoningDelta::Signature(s) => {
                        signature.get_or_insert_with(String::new).push_str(s)
                    }
                    ReasoningDelta::Redacted(r) => {
                        redacted.get_or_insert_with(String::new).push_str(r)
                    }
                }
            }
            ModelEvent::BlockStop { .. }
            | ModelEvent::Throttled { .. }
            | ModelEvent::OutputDiscarded => {}
            ModelEvent::Metadata { usage, metrics } => {
                if usage.is_some() {
                    self.usage = *usage;
                }
                if metrics.is_some() {
                    self.metrics = *metrics;
                }
            }
            ModelEvent::MessageStop { stop_reason } => self.stop_reason = Some(*stop_reason),
        }
        Ok(())
    }

    /// The finished reply. `latency_ms` is stored when the provider sent no metrics.
    pub fn finish(self, latency_ms: u64) -> AssembledMessage {
        let mut stop_reason = self.stop_reason.unwrap_or(StopReason::EndTurn);
        let has_tool_use = self
            .blocks
            .values()
            .any(|b| matches!(b, Block::ToolUse { .. }));
        if stop_reason == StopReason::EndTurn && has_tool_use {
            stop_reason = StopReason::ToolUse;
        } else if stop_reason == StopReason::ToolUse && !has_tool_use {
            stop_reason = StopReason::EndTurn;
        }
        let mut content = Vec::new();
        let mut invalid_tool_inputs = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(text) => {
                    if !(has_tool_use && text.trim().is_empty()) {
                        content.push(ContentBlock::Text(text));
                    }
                }
                Block::ToolUse { name, .. } if stop_reason == StopReason::MaxTokens => {
                    content.push(ContentBlock::Text(max_tokens_text(&name)));
                }
                Block::ToolUse { name, .. } if stop_reason != StopReason::ToolUse => {
                    content.push(ContentBlock::Text(stopped_tool_text(&name, stop_reason)));
                }
                Block::ToolUse { id, name, input } => {
                    let parsed = parse_input(&input);
                    let input = match parsed {
                        Ok(value) => value,
                        Err(problem) => {
                            invalid_tool_inputs.push(InvalidToolInput {
                                tool_use_id: id.clone(),
                                problem,
                            });
                            Value::Object(serde_json::Map::new())
                        }
                    };
                    content.push(ContentBlock::ToolUse(ToolUse {
                        tool_use_id: id,
                        name,
                        input,
                    }));
                }
                Block::Reasoning {
                    text,
                    signature,
                    redacted,
                } => content.push(ContentBlock::ReasoningContent(ReasoningContent {
                    reasoning_text: (!text.is_empty() || signature.is_some())
                        .then_some(ReasoningText { text, signature }),
                    redacted_content: redacted,
                })),
            }
        }
        if content.is_empty() || content.iter().all(is_blank_text) {
            content = vec![ContentBlock::Text(blank_text().to_owned())];
        }
        let usage = self.usage.unwrap_or_default();
        let metrics = self.metrics.unwrap_or(Metrics {
            latency_ms,
            time_to_first_byte_ms: None,
        });
        AssembledMessage {
            message: Message {
                role: Role::Assistant,
                content,
                metadata: Some(MessageMetadata {
                    usage: Some(usage),
                    metrics: Some(metrics),
                }),
            },
            stop_reason,
            usage,
            invalid_tool_inputs,
        }
    }
}

fn is_blank_text(block: &ContentBlock) -> bool {
    matches!(block, ContentBlock::Text(text) if text.trim().is_empty())
}

fn parse_input(raw: &str) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("the input is not a JSON object".to_owned()),
        Err(error) => Err(error.to_string()),
    }
}

fn mismatch(index: u32, what: &str) -> ModelError {
    ModelError::Stream(format!("a {what} delta for block {index} of another kind"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assemble(events: &[ModelEvent]) -> Result<AssembledMessage, ModelError> {
        let mut assembler = MessageAssembler::new();
        for event in events {
            assembler.push(event)?;
        }
        Ok(assembler.finish(7))
    }

    fn text(index: u32, t: &str) -> ModelEvent {
        ModelEvent::TextDelta {
            index,
            text: t.into(),
        }
    }

    fn tool(index: u32, id: &str, name: &str, input: &str) -> Vec<ModelEvent> {
        vec![
            ModelEvent::ToolUseStart {
                index,
                tool_use_id: id.into(),
                name: name.into(),
            },
            ModelEvent::ToolUseInputDelta {
                index,
                partial_json: input.into(),
            },
            ModelEvent::BlockStop { index },
        ]
    }

    #[test]
    fn joins_text_deltas_and_keeps_usage() {
        let done = assemble(&[
            text(0, "Hel"),
            text(0, "lo"),
            ModelEvent::MessageStop {
                stop_reason: StopReason::EndTurn,
            },
            ModelEvent::Metadata {
                usage: Some(Usage {
                    input_tokens: 3,
                    output_tokens: 2,
                    total_tokens: 5,
                    ..Usage::default()
                }),
                metrics: None,
            },
        ])
        .unwrap();
        assert_eq!(done.message.text(), "Hello");
        assert_eq!(done.stop_reason, StopReason::EndTurn);
        assert_eq!(done.usage.total_tokens, 5);
        let meta = done.message.metadata.unwrap();
        assert_eq!(meta.metrics.unwrap().latency_ms, 7);
    }

    #[test]
    fn interleaved_blocks_are_ordered_by_index_and_end_turn_becomes_tool_use() {
        let mut events = tool(1, "t1", "current_time", "{\"a\":");
        events.insert(1, text(0, "Let me check."));
        events.push(ModelEvent::ToolUseInputDelta {
            index: 1,
            partial_json: "1}".into(),
        });
        events.push(ModelEvent::MessageStop {
            stop_reason: StopReason::EndTurn,
        });
        let done = assemble(&events).unwrap();
        assert_eq!(done.stop_reason, StopReason::ToolUse);
        assert_eq!(done.message.text(), "Let me check.");
        let uses: Vec<_> = done.message.tool_uses().collect();
        assert_eq!(uses[0].input, json!({"a": 1}));
    }

    #[test]
    fn bad_tool_input_is_reported_not_silently_emptied() {
        let mut events = tool(0, "t1", "x", "{not json");
        events.extend(tool(1, "t2", "y", "[1]"));
        events.extend(tool(2, "t3", "z", ""));
        let done = assemble(&events).unwrap();
        let ids: Vec<_> = done
            .invalid_tool_inputs
            .iter()
            .map(|i| i.tool_use_id.as_str())
            .collect();
        assert_eq!(ids, vec!["t1", "t2"]);
        let uses: Vec<_> = done.message.tool_uses().collect();
        assert_eq!(uses.len(), 3);
        assert!(uses.iter().all(|u| u.input == json!({})));
    }

    #[test]
    fn max_tokens_turns_tool_calls_into_text() {
        let mut events = tool(0, "t1", "demo_physical_action", "{\"act");
        events.push(ModelEvent::MessageStop {
            stop_reason: StopReason::MaxTokens,
        });
        let done = assemble(&events).unwrap();
        assert_eq!(done.stop_reason, StopReason::MaxTokens);
        assert_eq!(done.message.tool_uses().count(), 0);
        assert_eq!(done.message.text(), max_tokens_text("demo_physical_action"));
        assert!(done.invalid_tool_inputs.is_empty());
    }

    #[test]
    fn other_stop_reasons_turn_tool_calls_into_text() {
        for reason in [
            StopReason::StopSequence,
            StopReason::ContentFiltered,
            StopReason::GuardrailIntervened,
        ] {
            let mut events = tool(0, "t1", "demo_physical_action", "{\"action\": \"on\"}");
            events.extend(tool(1, "t2", "x", "{not json"));
            events.push(ModelEvent::MessageStop {
                stop_reason: reason,
            });
            let done = assemble(&events).unwrap();
            assert_eq!(done.stop_reason, reason);
            assert_eq!(done.message.tool_uses().count(), 0, "{reason}");
            assert_eq!(
                done.message.text(),
                format!(
                    "{}\n{}",
                    stopped_tool_text("demo_physical_action", reason),
                    stopped_tool_text("x", reason)
                )
            );
            assert!(done.invalid_tool_inputs.is_empty());
        }
    }

    #[test]
    fn empty_reply_is_blank_text_and_tool_use_without_tools_ends_the_turn() {
        let done = assemble(&[ModelEvent::MessageStop {
            stop_reason: StopReason::ToolUse,
        }])
        .unwrap();
        assert_eq!(done.message.text(), "[blank text]");
        assert_eq!(done.stop_reason, StopReason::EndTurn);
    }

    #[test]
    fn reasoning_is_kept_and_kind_mismatch_is_an_error() {
        let done = assemble(&[
            ModelEvent::ReasoningDelta {
                index: 0,
                delta: ReasoningDelta::Text("think".into()),
            },
            ModelEvent::ReasoningDelta {
                index: 0,
                delta: ReasoningDelta::Signature("sig".into()),
            },
            text(1, "answer"),
        ])
        .unwrap();
        assert!(matches!(
            &done.message.content[0],
            ContentBlock::ReasoningContent(ReasoningContent {
                reasoning_text: Some(ReasoningText { text, signature: Some(sig) }),
                ..
            }) if text == "think" && sig == "sig"
        ));
        assert!(
            assemble(&[
                text(0, "x"),
                ModelEvent::ToolUseInputDelta {
                    index: 0,
                    partial_json: "{}".into()
                }
            ])
            .is_err()
        );
    }
}
