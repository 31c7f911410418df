//! The Chat Completions request body, translated from tau's Converse-shaped request.
//!
//! Invariants: `stream` is always true and usage is asked for (`stream_options.include_usage`);
//! the system prompt's text blocks are joined into one `system` message (cache points dropped);
//! a user message's tool results become `tool` messages (error results prefixed `error: `)
//! *before* the message's text, right after the assistant's `tool_calls`; tool-call arguments go
//! back as the JSON text the protocol wants; reasoning is not sent back (servers reject it);
//! the output limit is `max_completion_tokens` on the public OpenAI API (its reasoning models
//! refuse `max_tokens`) and `max_tokens` elsewhere (what local servers read); `temperature` only
//! when the role sets it. A `tool` message's content is text, so a tool result's images (and a
//! user message's own) go as `image_url` data-URL parts of the user message right after (one
//! standing alone when the message has no text); an assistant turn carries its images' notes.

use serde::Serialize;
use tau_api::config::ModelTuning;

use crate::message::{ContentBlock, Message, Role, SystemContentBlock};
use crate::model::ModelRequest;
use crate::provider::chat_blocks::{
    IMAGES_FROM_TOOLS, ToolDef, message_images, tool_defs, tool_result_text,
};

/// One `/chat/completions` body.
#[derive(Debug, Serialize)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: Vec<ChatMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef<'a>>,
    pub stream: bool,
    pub stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct StreamOptions {
    pub include_usage: bool,
}

/// One message.
#[derive(Debug, Serialize)]
pub struct ChatMessage {
    pub role: &'static str,
    /// `None` (JSON null) for an assistant turn of tool calls only.
    pub content: Option<MessageContent>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// A message's content: plain text, or parts when it carries images.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One part of a user message with images.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Serialize)]
pub struct ImageUrl {
    /// A `data:<mime>;base64,…` URL.
    pub url: String,
}

impl ChatMessage {
    fn new(role: &'static str, content: Option<String>) -> Self {
        Self {
            role,
            content: content.map(MessageContent::Text),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool call the assistant made, sent back in the history.
#[derive(Debug, Serialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionCall,
}

#[derive(Debug, Serialize)]
pub struct FunctionCall {
    pub name: String,
    /// The arguments as JSON text.
    pub arguments: String,
}

/// The body of one streaming call; `public_api` picks `max_completion_tokens`.
pub fn body<'a>(
    request: &'a ModelRequest,
    model_id: &'a str,
    max_tokens: u32,
    tuning: &ModelTuning,
    public_api: bool,
) -> ChatRequest<'a> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    let system = SystemContentBlock::join(&request.system);
    if !system.is_empty() {
        messages.push(ChatMessage::new("system", Some(system)));
    }
    for message in &request.messages {
        translate(message, &mut messages);
    }
    ChatRequest {
        model: model_id,
        messages,
        tools: tool_defs(request),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        max_tokens: (!public_api).then_some(max_tokens),
        max_completion_tokens: public_api.then_some(max_tokens),
        temperature: tuning.temperature.map(|t| t.get()),
    }
}

fn translate(message: &Message, out: &mut Vec<ChatMessage>) {
    let mut text: Vec<std::borrow::Cow<'_, str>> = Vec::new();
    let mut tool_calls = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text(t) if !t.is_empty() => text.push(t.as_str().into()),
            ContentBlock::Image(image) if message.role == Role::Assistant => {
                text.push(image.note().into());
            }
            ContentBlock::ToolUse(call) => tool_calls.push(ToolCall {
                id: call.tool_use_id.clone(),
                kind: "function",
                function: FunctionCall {
                    name: call.name.clone(),
                    arguments: call.input.to_string(),
                },
            }),
            ContentBlock::ToolResult(result) => out.push(ChatMessage {
                tool_call_id: Some(result.tool_use_id.clone()),
                ..ChatMessage::new("tool", Some(tool_result_text(result)))
            }),
            ContentBlock::Text(_)
            | ContentBlock::Image(_)
            | ContentBlock::ReasoningContent(_)
            | ContentBlock::CachePoint(_)
            | ContentBlock::Other(_) => {}
        }
    }
    match message.role {
        Role::User => {
            let images = message_images(message);
            if text.is_empty() {
                let after_tools = out.last().is_some_and(|m| m.role == "tool");
                match (after_tools, images.is_empty()) {
                    (true, true) => return,
                    (true, false) => text.push(IMAGES_FROM_TOOLS.into()),
                    (false, _) => text.push(crate::model::blank_text().into()),
                }
            }
            let text = text.join("\n");
            if images.is_empty() {
                out.push(ChatMessage::new("user", Some(text)));
            } else {
                let mut parts = vec![ContentPart::Text { text }];
                parts.extend(images.into_iter().map(|image| ContentPart::ImageUrl {
                    image_url: ImageUrl {
                        url: image.data_url(),
                    },
                }));
                out.push(ChatMessage {
                    content: Some(MessageContent::Parts(parts)),
                    ..ChatMessage::new("user", None)
                });
            }
        }
        Role::Assistant => {
            let content = if text.is_empty() {
                if tool_calls.is_empty() {
                    Some(crate::model::blank_text().to_owned())
                } else {
                    None
                }
            } else {
                Some(text.join("\n"))
            };
            out.push(ChatMessage {
                tool_calls,
                ..ChatMessage::new("assistant", content)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolResult, ToolResultStatus, ToolUse};
    use serde_json::json;
    use std::sync::Arc;
    use tau_api::config::Temperature;

    #[test]
    fn history_translates_to_chat_messages() {
        let request = ModelRequest {
            system: vec![SystemContentBlock::Text("persona".into())],
            messages: vec![
                Message::user_text("two clocks"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::ToolUse(ToolUse {
                            tool_use_id: "call_a".into(),
                            name: "current_time".into(),
                            input: json!({"tz": "UTC"}),
                        }),
                        ContentBlock::ToolUse(ToolUse {
                            tool_use_id: "call_b".into(),
                            name: "current_time".into(),
                            input: json!({}),
                        }),
                    ],
                    metadata: None,
                },
                Message {
                    role: Role::User,
                    content: vec![
                        ContentBlock::ToolResult(ToolResult::text(
                            "call_a",
                            ToolResultStatus::Success,
                            "12:00",
                        )),
                        ContentBlock::ToolResult(ToolResult::text(
                            "call_b",
                            ToolResultStatus::Error,
                            "refused",
                        )),
                        ContentBlock::Text("and now?".into()),
                    ],
                    metadata: None,
                },
            ]
            .into_iter()
            .map(Arc::new)
            .collect(),
            tools: Vec::new().into(),
        };
        let tuning = ModelTuning {
            temperature: Temperature::new(0.0),
            ..ModelTuning::default()
        };
        let local = serde_json::to_value(body(&request, "m", 100, &tuning, false)).unwrap();
        assert_eq!(
            local,
            json!({
                "model": "m",
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 100,
                "temperature": 0.0,
                "messages": [
                    {"role": "system", "content": "persona"},
                    {"role": "user", "content": "two clocks"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_a", "type": "function",
                         "function": {"name": "current_time", "arguments": "{\"tz\":\"UTC\"}"}},
                        {"id": "call_b", "type": "function",
                         "function": {"name": "current_time", "arguments": "{}"}},
                    ]},
                    {"role": "tool", "tool_call_id": "call_a", "content": "12:00"},
                    {"role": "tool", "tool_call_id": "call_b", "content": "error: refused"},
                    {"role": "user", "content": "and now?"},
                ],
            })
        );
        let public =
            serde_json::to_value(body(&request, "m", 100, &ModelTuning::default(), true)).unwrap();
        assert_eq!(public["max_completion_tokens"], 100);
        assert!(public.get("max_tokens").is_none() && public.get("temperature").is_none());
    }
}
