//! Content-block bookkeeping for chat protocols that stream a reply as one message (Ollama's
//! `/api/chat`, OpenAI Chat Completions) rather than as indexed blocks: reasoning, text and each
//! tool call get their own block index, in order of first appearance.
//!
//! Invariants: an index is allocated only when a block has content (empty deltas open nothing);
//! a tool call is keyed by the protocol's own tool index, so its later argument fragments land in
//! the same block (its fragments go out through
//! [`crate::provider::reply_mapping::tool_input`]); every opened block gets exactly one `BlockStop`, in index order, from
//! [`ChatBlocks::close_all`]. Also the one flattening of a tool result into text that both
//! protocols' `tool` messages carry ([`tool_result_text`]: an image there is a note saying it
//! follows in the next user message, where [`message_images`] puts it), and the one shape of the
//! tools offered ([`tool_defs`]).

use serde::Serialize;
use serde_json::Value;

use crate::message::{
    ContentBlock, ImageBlock, Message, ToolResult, ToolResultContent, ToolResultStatus,
};
use crate::model::{ModelEvent, ModelRequest, ReasoningDelta};

/// A tool the model may call.
#[derive(Debug, Serialize)]
pub struct ToolDef<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionDef<'a>,
}

#[derive(Debug, Serialize)]
pub struct FunctionDef<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: &'a Value,
}

/// The request's tools as both chat protocols declare them (`{"type": "function", ...}`).
pub fn tool_defs(request: &ModelRequest) -> Vec<ToolDef<'_>> {
    request
        .tools
        .iter()
        .map(|spec| ToolDef {
            kind: "function",
            function: FunctionDef {
                name: &spec.name,
                description: &spec.description,
                parameters: &spec.input_schema.json,
            },
        })
        .collect()
}

/// A tool result's content as one text (JSON parts as JSON text); an error result is prefixed
/// `error: ` so the model reads it as a failure.
pub fn tool_result_text(result: &ToolResult) -> String {
    let parts: Vec<String> = result
        .content
        .iter()
        .map(|part| match part {
            ToolResultContent::Image(image) => format!(
                "[image {} of {} bytes, attached in the next user message]",
                image.mime(),
                image.decoded_len()
            ),
            other => other.as_text(),
        })
        .collect();
    let text = parts.join("\n");
    match result.status {
        ToolResultStatus::Success => text,
        ToolResultStatus::Error => format!("error: {text}"),
    }
}

/// The images of a user message, in order: its own image blocks and those inside its tool results
/// (which a chat protocol's `tool` message cannot carry, so they ride on the user message after).
pub fn message_images(message: &Message) -> Vec<&ImageBlock> {
    let mut images = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Image(image) => images.push(image),
            ContentBlock::ToolResult(result) => {
                images.extend(result.content.iter().filter_map(|part| match part {
                    ToolResultContent::Image(image) => Some(image),
                    _ => None,
                }));
            }
            _ => {}
        }
    }
    images
}

/// The text of a user message that only carries tool results' images.
pub const IMAGES_FROM_TOOLS: &str = "(images returned by the tool calls above)";

/// The blocks of one reply.
#[derive(Debug, Default)]
pub struct ChatBlocks {
    next: u32,
    reasoning: Option<u32>,
    text: Option<u32>,
    /// (protocol tool index, block index).
    tools: Vec<(u64, u32)>,
    open: Vec<u32>,
}

impl ChatBlocks {
    pub fn new() -> Self {
        Self::default()
    }

    fn allocate(&mut self) -> u32 {
        let index = self.next;
        self.next = self.next.saturating_add(1);
        self.open.push(index);
        index
    }

    /// A piece of reasoning.
    pub fn reasoning(&mut self, text: &str, out: &mut Vec<ModelEvent>) {
        if text.is_empty() {
            return;
        }
        let index = match self.reasoning {
            Some(index) => index,
            None => {
                let index = self.allocate();
                self.reasoning = Some(index);
                index
            }
        };
        out.push(ModelEvent::ReasoningDelta {
            index,
            delta: ReasoningDelta::Text(text.to_owned()),
        });
    }

    /// A piece of the reply's text.
    pub fn text(&mut self, text: &str, out: &mut Vec<ModelEvent>) {
        if text.is_empty() {
            return;
        }
        let index = match self.text {
            Some(index) => index,
            None => {
                let index = self.allocate();
                self.text = Some(index);
                index
            }
        };
        out.push(ModelEvent::TextDelta {
            index,
            text: text.to_owned(),
        });
    }

    /// The block of tool call `key`, if it was started.
    pub fn tool(&self, key: u64) -> Option<u32> {
        self.tools.iter().find(|(k, _)| *k == key).map(|(_, i)| *i)
    }

    /// Starts tool call `key`; returns its block index.
    pub fn start_tool(
        &mut self,
        key: u64,
        tool_use_id: String,
        name: String,
        out: &mut Vec<ModelEvent>,
    ) -> u32 {
        let index = self.allocate();
        self.tools.push((key, index));
        out.push(ModelEvent::ToolUseStart {
            index,
            tool_use_id,
            name,
        });
        index
    }

    /// Whether the reply called a tool.
    pub fn has_tools(&self) -> bool {
        !self.tools.is_empty()
    }

    /// Ends every open block, in index order.
    pub fn close_all(&mut self, out: &mut Vec<ModelEvent>) {
        self.open.sort_unstable();
        out.extend(
            self.open
                .drain(..)
                .map(|index| ModelEvent::BlockStop { index }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_message_gathers_its_own_and_its_tool_results_images_in_order() {
        use crate::message::Role;
        let png = ImageBlock::from_base64("image/png", "iVBORw0KGgo=").unwrap();
        let gif = ImageBlock::from_base64("image/gif", "R0lGODlh").unwrap();
        let result = ToolResult {
            tool_use_id: "c1".into(),
            status: ToolResultStatus::Error,
            content: vec![
                ToolResultContent::Text("blurry".into()),
                ToolResultContent::Image(png.clone()),
            ],
        };
        let message = Message {
            role: Role::User,
            content: vec![
                ContentBlock::ToolResult(result.clone()),
                ContentBlock::Image(gif.clone()),
            ],
            metadata: None,
        };
        assert_eq!(message_images(&message), vec![&png, &gif]);
        assert_eq!(
            tool_result_text(&result),
            "error: blurry\n[image image/png of 8 bytes, attached in the next user message]"
        );
    }

    #[test]
    fn blocks_are_numbered_by_first_appearance_and_closed_once() {
        let mut blocks = ChatBlocks::new();
        let mut out = Vec::new();
        blocks.text("", &mut out);
        blocks.reasoning("hmm", &mut out);
        blocks.text("hi", &mut out);
        blocks.reasoning(" more", &mut out);
        let tool = blocks.start_tool(7, "c1".into(), "t".into(), &mut out);
        crate::provider::reply_mapping::tool_input(tool, "{}".into(), &mut out);
        assert_eq!(blocks.tool(7), Some(2));
        assert_eq!(blocks.tool(8), None);
        blocks.close_all(&mut out);
        blocks.close_all(&mut out);
        let stops: Vec<&ModelEvent> = out
            .iter()
            .filter(|e| matches!(e, ModelEvent::BlockStop { .. }))
            .collect();
        assert_eq!(
            stops,
            [
                &ModelEvent::BlockStop { index: 0 },
                &ModelEvent::BlockStop { index: 1 },
                &ModelEvent::BlockStop { index: 2 }
            ]
        );
        assert!(matches!(&out[1], ModelEvent::TextDelta { index: 1, .. }));
        assert!(blocks.has_tools());
    }
}
