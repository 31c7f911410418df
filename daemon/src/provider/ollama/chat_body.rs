//! The `/api/chat` request body, translated from tau's Converse-shaped request.
//!
//! Invariants: `stream` is always true; the system prompt's text blocks are joined into one
//! `system` message (cache points dropped: Ollama caches the prompt prefix itself); a user
//! message's tool results become `tool` messages (named after the call they answer, carrying its
//! id, an error result prefixed `error: `) *before* the message's text, as the protocol wants them
//! right after the assistant's calls; tool-call arguments go back as JSON objects; reasoning goes
//! back as the assistant's `thinking`; `num_predict` is the role's `max_tokens`, and `num_ctx`,
//! `temperature` and `keep_alive` are sent only when the role sets them. Images go base64 in the
//! `images` of a user message: a tool result's images on the user message right after its `tool`
//! messages (models read images only from user turns), one standing alone when the message has no
//! text; an assistant turn carries none (an image there is its note).

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tau_api::config::{KeepAlive, ModelTuning};

use crate::message::{ContentBlock, Message, Role, SystemContentBlock};
use crate::model::ModelRequest;
use crate::provider::chat_blocks::{
    IMAGES_FROM_TOOLS, ToolDef, message_images, tool_defs, tool_result_text,
};

/// One `/api/chat` body.
#[derive(Debug, Serialize)]
pub struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: Vec<ChatMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDef<'a>>,
    pub stream: bool,
    pub options: Options,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<Value>,
}

/// `options`: the model parameters.
#[derive(Debug, Serialize)]
pub struct Options {
    pub num_predict: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_ctx: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
}

/// One message.
#[derive(Debug, Default, Serialize)]
pub struct ChatMessage {
    pub role: &'static str,
    pub content: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub thinking: String,
    /// Base64 images (no `data:` prefix).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// A tool call the assistant made, sent back in the history.
#[derive(Debug, Serialize)]
pub struct ToolCall {
    pub id: String,
    pub function: FunctionCall,
}

#[derive(Debug, Serialize)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: Value,
}

/// The body of one streaming `/api/chat` call.
pub fn body<'a>(
    request: &'a ModelRequest,
    model_id: &'a str,
    max_tokens: u32,
    tuning: &ModelTuning,
) -> ChatRequest<'a> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    let system = SystemContentBlock::join(&request.system);
    if !system.is_empty() {
        messages.push(ChatMessage {
            role: "system",
            content: system,
            ..ChatMessage::default()
        });
    }
    for message in &request.messages {
        translate(message, &request.messages, &mut messages);
    }
    ChatRequest {
        model: model_id,
        messages,
        tools: tool_defs(request),
        stream: true,
        options: Options {
            num_predict: max_tokens,
            num_ctx: tuning.num_ctx,
            temperature: tuning.temperature.map(|t| t.get()),
        },
        keep_alive: tuning.keep_alive.as_ref().map(|k| match k {
            KeepAlive::Seconds(s) => Value::from(*s),
            KeepAlive::Duration(d) => Value::from(d.as_str()),
        }),
    }
}

/// The name of the tool call `id` in `history` (empty when no call has that id).
pub fn tool_name_of(history: &[Arc<Message>], id: &str) -> String {
    history
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|block| match block {
            ContentBlock::ToolUse(call) if call.tool_use_id == id => Some(call.name.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn translate(message: &Message, history: &[Arc<Message>], out: &mut Vec<ChatMessage>) {
    let mut text: Vec<std::borrow::Cow<'_, str>> = Vec::new();
    let mut thinking = String::new();
    let mut tool_calls = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text(t) if !t.is_empty() => text.push(t.as_str().into()),
            ContentBlock::Image(image) if message.role == Role::Assistant => {
                text.push(image.note().into());
            }
            ContentBlock::ToolUse(call) => tool_calls.push(ToolCall {
                id: call.tool_use_id.clone(),
                function: FunctionCall {
                    name: call.name.clone(),
                    arguments: call.input.clone(),
                },
            }),
            ContentBlock::ToolResult(result) => out.push(ChatMessage {
                role: "tool",
                content: tool_result_text(result),
                tool_name: Some(tool_name_of(history, &result.tool_use_id)),
                tool_call_id: Some(result.tool_use_id.clone()),
                ..ChatMessage::default()
            }),
            ContentBlock::ReasoningContent(r) => {
                if let Some(t) = &r.reasoning_text {
                    thinking.push_str(&t.text);
                }
            }
            ContentBlock::Text(_)
            | ContentBlock::Image(_)
            | ContentBlock::CachePoint(_)
            | ContentBlock::Other(_) => {}
        }
    }
    let (role, images) = match message.role {
        Role::User => (
            "user",
            message_images(message)
                .into_iter()
                .map(|image| image.base64().to_owned())
                .collect(),
        ),
        Role::Assistant => ("assistant", Vec::new()),
    };
    if text.is_empty() && tool_calls.is_empty() {
        let after_tools =
            message.role == Role::User && out.last().is_some_and(|m| m.role == "tool");
        match (after_tools, images.is_empty()) {
            // A user message of tool results only needs no message of its own.
            (true, true) => return,
            (true, false) => text.push(IMAGES_FROM_TOOLS.into()),
            (false, _) => text.push(crate::model::blank_text().into()),
        }
    }
    out.push(ChatMessage {
        role,
        content: text.join("\n"),
        thinking,
        images,
        tool_calls,
        ..ChatMessage::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{
        CachePoint, ReasoningContent, ReasoningText, ToolResult, ToolResultStatus, ToolUse,
    };
    use crate::tool::{Tier, ToolSpec};
    use serde_json::json;
    use tau_api::config::Temperature;

    #[test]
    fn history_translates_to_ollama_messages() {
        let request = ModelRequest {
            system: vec![
                SystemContentBlock::Text("persona".into()),
                SystemContentBlock::CachePoint(CachePoint::default()),
                SystemContentBlock::Text("## Now".into()),
            ],
            messages: vec![
                Message::user_text("what time is it?"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::ReasoningContent(ReasoningContent {
                            reasoning_text: Some(ReasoningText {
                                text: "ask the clock".into(),
                                signature: None,
                            }),
                            redacted_content: None,
                        }),
                        ContentBlock::ToolUse(ToolUse {
                            tool_use_id: "call_1".into(),
                            name: "current_time".into(),
                            input: json!({"tz": "UTC"}),
                        }),
                    ],
                    ..Message::user_text("")
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult(ToolResult::text(
                        "call_1",
                        ToolResultStatus::Error,
                        "refused",
                    ))],
                    ..Message::user_text("")
                },
            ]
            .into_iter()
            .map(Arc::new)
            .collect(),
            tools: vec![
                ToolSpec::builder("current_time", "the time")
                    .input_schema(json!({"type": "object"}))
                    .tier(Tier::Read)
                    .build(),
            ]
            .into(),
        };
        let tuning = ModelTuning {
            num_ctx: Some(32768),
            keep_alive: Some(KeepAlive::Duration("30m".into())),
            temperature: Temperature::new(0.5),
        };
        let sent = serde_json::to_value(body(&request, "qwen3:8b", 512, &tuning)).unwrap();
        assert_eq!(
            sent,
            json!({
                "model": "qwen3:8b",
                "stream": true,
                "keep_alive": "30m",
                "options": {"num_predict": 512, "num_ctx": 32768, "temperature": 0.5},
                "tools": [{"type": "function", "function": {
                    "name": "current_time", "description": "the time",
                    "parameters": {"type": "object"}}}],
                "messages": [
                    {"role": "system", "content": "persona\n## Now"},
                    {"role": "user", "content": "what time is it?"},
                    {"role": "assistant", "content": "", "thinking": "ask the clock",
                     "tool_calls": [{"id": "call_1", "function": {
                         "name": "current_time", "arguments": {"tz": "UTC"}}}]},
                    {"role": "tool", "content": "error: refused",
                     "tool_name": "current_time", "tool_call_id": "call_1"},
                ],
            })
        );
        let plain = serde_json::to_value(body(&request, "m", 10, &ModelTuning::default())).unwrap();
        assert_eq!(plain["options"], json!({"num_predict": 10}));
        assert!(plain.get("keep_alive").is_none());
    }
}
