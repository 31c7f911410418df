//! The Messages API request body, translated from tau's Converse-shaped request.
//!
//! Invariants: `stream` is always true; tool results become `tool_result` blocks with `is_error`
//! set from the result's status (so a refusal reads as an error to the model); thinking blocks go
//! back unmodified with their signature (reasoning without a signature cannot be verified and is
//! left out); empty text blocks are left out (the API rejects them); with caching on, breakpoints
//! are the last tool, each system cache point (or the last system block), and the last block of
//! the newest user message, at most [`MAX_BREAKPOINTS`] in all, and with caching off none is sent.
//! Images (in a user message or a tool result) go as base64 `image` blocks; the API takes none
//! in an assistant turn, where an image is its one-line note.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tau_api::config::CacheTtl;

use crate::message::{
    ContentBlock, ImageBlock, Message, ReasoningContent, Role, SystemContentBlock, ToolResult,
    ToolResultContent, ToolResultStatus,
};
use crate::model::ModelRequest;
use crate::provider::cache::CachePlan;

/// The API's limit on explicit cache breakpoints per request.
pub const MAX_BREAKPOINTS: usize = 4;

/// The JSON body of one streaming Messages call.
pub fn body(request: &ModelRequest, model_id: &str, max_tokens: u32, cache: CachePlan) -> Value {
    let mut budget = if cache.enabled { MAX_BREAKPOINTS } else { 0 };
    let mut body = Map::new();
    body.insert("model".into(), json!(model_id));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));

    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|spec| {
            json!({
                "name": spec.name,
                "description": spec.description,
                "input_schema": spec.input_schema.json,
            })
        })
        .collect();
    if let Some(last) = tools.last_mut()
        && budget > 0
    {
        mark(last, cache.tools_ttl);
        budget -= 1;
    }

    let system = system_blocks(&request.system, cache, &mut budget);
    // Keep one breakpoint for the newest message.
    let messages = messages(&request.messages, cache, &mut budget);

    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

fn cache_control(ttl: Option<CacheTtl>) -> Value {
    match ttl {
        Some(ttl) => json!({"type": "ephemeral", "ttl": ttl.as_str()}),
        None => json!({"type": "ephemeral"}),
    }
}

fn mark(block: &mut Value, ttl: Option<CacheTtl>) {
    if let Value::Object(map) = block {
        map.insert("cache_control".into(), cache_control(ttl));
    }
}

fn system_blocks(
    blocks: &[SystemContentBlock],
    cache: CachePlan,
    budget: &mut usize,
) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let mut marked = false;
    // One breakpoint is kept back for the newest message.
    let mut allowed = budget.saturating_sub(1);
    for block in blocks {
        match block {
            SystemContentBlock::Text(text) if !text.is_empty() => {
                out.push(json!({"type": "text", "text": text}));
            }
            SystemContentBlock::Text(_) => {}
            SystemContentBlock::CachePoint(_) => {
                if let Some(last) = out.last_mut()
                    && allowed > 0
                    && last.get("cache_control").is_none()
                {
                    mark(last, cache.system_ttl);
                    allowed -= 1;
                    *budget -= 1;
                    marked = true;
                }
            }
        }
    }
    if !marked
        && allowed > 0
        && let Some(last) = out.last_mut()
    {
        mark(last, cache.system_ttl);
        *budget -= 1;
    }
    out
}

fn messages(history: &[Arc<Message>], cache: CachePlan, budget: &mut usize) -> Vec<Value> {
    let newest_user = history.iter().rposition(|m| m.role == Role::User);
    history
        .iter()
        .enumerate()
        .map(|(i, message)| {
            let mut content: Vec<Value> = Vec::new();
            for block in &message.content {
                match block {
                    ContentBlock::CachePoint(_) => {}
                    ContentBlock::Image(image) if message.role == Role::Assistant => {
                        content.push(json!({"type": "text", "text": image.note()}));
                    }
                    other => content.extend(content_block(other)),
                }
            }
            if content.is_empty() {
                // Every block was dropped (e.g. unsigned reasoning); the API rejects empty content.
                content.push(json!({"type": "text", "text": crate::model::blank_text()}));
            }
            if Some(i) == newest_user
                && *budget > 0
                && let Some(last) = content.last_mut()
            {
                mark(last, cache.messages_ttl);
                *budget -= 1;
            }
            json!({
                "role": match message.role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                },
                "content": content,
            })
        })
        .collect()
}

fn content_block(block: &ContentBlock) -> Option<Value> {
    match block {
        ContentBlock::Text(text) if text.is_empty() => None,
        ContentBlock::Text(text) => Some(json!({"type": "text", "text": text})),
        ContentBlock::ToolUse(tool_use) => Some(json!({
            "type": "tool_use",
            "id": tool_use.tool_use_id,
            "name": tool_use.name,
            "input": tool_use.input,
        })),
        ContentBlock::ToolResult(result) => Some(tool_result(result)),
        ContentBlock::ReasoningContent(reasoning) => thinking(reasoning),
        ContentBlock::Image(image) => Some(image_block(image)),
        // Blocks this version does not know never reach a model.
        ContentBlock::CachePoint(_) | ContentBlock::Other(_) => None,
    }
}

fn tool_result(result: &ToolResult) -> Value {
    let content: Vec<Value> = result
        .content
        .iter()
        .map(|part| match part {
            ToolResultContent::Text(text) => json!({"type": "text", "text": text}),
            ToolResultContent::Json(value) => json!({"type": "text", "text": value.to_string()}),
            ToolResultContent::Image(image) => image_block(image),
        })
        .filter(|v| v["type"] != "text" || v["text"].as_str().is_some_and(|t| !t.is_empty()))
        .collect();
    json!({
        "type": "tool_result",
        "tool_use_id": result.tool_use_id,
        "content": content,
        "is_error": result.status == ToolResultStatus::Error,
    })
}

fn image_block(image: &ImageBlock) -> Value {
    json!({"type": "image", "source": {
        "type": "base64",
        "media_type": image.mime(),
        "data": image.base64(),
    }})
}

fn thinking(reasoning: &ReasoningContent) -> Option<Value> {
    if let Some(data) = &reasoning.redacted_content {
        return Some(json!({"type": "redacted_thinking", "data": data}));
    }
    let text = reasoning.reasoning_text.as_ref()?;
    let signature = text.signature.as_ref()?;
    Some(json!({"type": "thinking", "thinking": text.text, "signature": signature}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{CachePoint, ReasoningText, ToolUse};
    use crate::tool::{Tier, ToolSpec};

    fn spec(name: &str) -> ToolSpec {
        ToolSpec::builder(name, format!("{name} tool"))
            .tier(Tier::Read)
            .build()
    }

    fn plan() -> CachePlan {
        CachePlan {
            enabled: true,
            tools_ttl: Some(CacheTtl::OneHour),
            system_ttl: Some(CacheTtl::OneHour),
            messages_ttl: None,
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            system: vec![
                SystemContentBlock::Text("persona".into()),
                SystemContentBlock::CachePoint(CachePoint::default()),
                SystemContentBlock::Text("## Now".into()),
            ],
            messages: vec![
                Message::user_text("switch on the lamp"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::ReasoningContent(ReasoningContent {
                            reasoning_text: Some(ReasoningText {
                                text: "hmm".into(),
                                signature: Some("sig".into()),
                            }),
                            redacted_content: None,
                        }),
                        ContentBlock::ReasoningContent(ReasoningContent {
                            reasoning_text: Some(ReasoningText {
                                text: "unsigned".into(),
                                signature: None,
                            }),
                            redacted_content: None,
                        }),
                        ContentBlock::Text(String::new()),
                        ContentBlock::ToolUse(ToolUse {
                            tool_use_id: "toolu_1".into(),
                            name: "lamp".into(),
                            input: json!({"on": true}),
                        }),
                    ],
                    metadata: None,
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult(ToolResult::text(
                        "toolu_1",
                        ToolResultStatus::Error,
                        "The user did not approve this action: lamp.",
                    ))],
                    metadata: None,
                },
            ]
            .into_iter()
            .map(Arc::new)
            .collect(),
            tools: vec![spec("clock"), spec("lamp")].into(),
        }
    }

    #[test]
    fn full_body_with_cache_breakpoints_and_a_refused_tool() {
        let body = body(&request(), "claude-sonnet-4-5", 1024, plan());
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-5",
                "max_tokens": 1024,
                "stream": true,
                "system": [
                    {"type": "text", "text": "persona",
                     "cache_control": {"type": "ephemeral", "ttl": "1h"}},
                    {"type": "text", "text": "## Now"}
                ],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "switch on the lamp"}]},
                    {"role": "assistant", "content": [
                        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                        {"type": "tool_use", "id": "toolu_1", "name": "lamp", "input": {"on": true}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                         "content": [{"type": "text",
                                      "text": "The user did not approve this action: lamp."}],
                         "cache_control": {"type": "ephemeral"}}
                    ]}
                ],
                "tools": [
                    {"name": "clock", "description": "clock tool",
                     "input_schema": {"type": "object", "properties": {}, "required": []}},
                    {"name": "lamp", "description": "lamp tool",
                     "input_schema": {"type": "object", "properties": {}, "required": []},
                     "cache_control": {"type": "ephemeral", "ttl": "1h"}}
                ]
            })
        );
    }

    #[test]
    fn a_message_left_empty_gets_blank_text() {
        let request = ModelRequest {
            system: Vec::new(),
            messages: vec![
                Message::user_text("hi"),
                Message {
                    role: Role::Assistant,
                    content: vec![ContentBlock::ReasoningContent(ReasoningContent {
                        reasoning_text: Some(ReasoningText {
                            text: "unsigned, from another provider".into(),
                            signature: None,
                        }),
                        redacted_content: None,
                    })],
                    metadata: None,
                },
            ]
            .into_iter()
            .map(Arc::new)
            .collect(),
            tools: Vec::new().into(),
        };
        let body = body(&request, "claude-sonnet-4-5", 10, CachePlan::OFF);
        assert_eq!(
            body["messages"][1]["content"],
            json!([{"type": "text", "text": "[blank text]"}])
        );
    }

    #[test]
    fn no_cache_setting_means_no_breakpoints() {
        let body = body(&request(), "claude-sonnet-4-5", 1024, CachePlan::OFF);
        assert!(!body.to_string().contains("cache_control"));
    }

    #[test]
    fn breakpoints_never_exceed_the_limit() {
        let mut request = request();
        request.system = (0..6)
            .flat_map(|i| {
                [
                    SystemContentBlock::Text(format!("part {i}")),
                    SystemContentBlock::CachePoint(CachePoint::default()),
                ]
            })
            .collect();
        let body = body(&request, "claude-sonnet-4-5", 1024, plan());
        assert_eq!(
            body.to_string().matches("cache_control").count(),
            MAX_BREAKPOINTS
        );
        let last_user = &body["messages"][2]["content"][0];
        assert!(
            last_user.get("cache_control").is_some(),
            "the newest message keeps its breakpoint"
        );
    }
}
