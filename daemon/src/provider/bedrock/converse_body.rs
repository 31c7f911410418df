//! The ConverseStream request body. tau's messages are already Converse-shaped, so this mostly
//! copies them, placing `cachePoint` blocks per the role's cache setting.
//!
//! Invariants: with caching off, no `cachePoint` is sent (those in the system prompt or history are
//! dropped); with caching on, cache points go after the last tool, where the system prompt has them
//! (or after its last block), and after the newest user message's content, at most
//! [`MAX_CACHE_POINTS`] in all; empty text blocks are left out (Bedrock rejects blank text);
//! `toolConfig` is sent only when there are tools.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tau_api::config::CacheTtl;

use crate::message::{ContentBlock, Message, Role, SystemContentBlock};
use crate::model::ModelRequest;
use crate::provider::cache::CachePlan;

/// Claude's limit on cache points per request.
pub const MAX_CACHE_POINTS: usize = 4;

fn cache_point(ttl: Option<CacheTtl>) -> Value {
    match ttl {
        Some(ttl) => json!({"cachePoint": {"type": "default", "ttl": ttl.as_str()}}),
        None => json!({"cachePoint": {"type": "default"}}),
    }
}

/// The JSON body of one ConverseStream call.
pub fn body(request: &ModelRequest, max_tokens: u32, cache: CachePlan) -> Value {
    let mut budget = if cache.enabled { MAX_CACHE_POINTS } else { 0 };
    let mut body = Map::new();

    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|spec| {
            json!({"toolSpec": {
                "name": spec.name,
                "description": spec.description,
                "inputSchema": {"json": spec.input_schema.json},
            }})
        })
        .collect();
    if !tools.is_empty() && budget > 0 {
        tools.push(cache_point(cache.tools_ttl));
        budget -= 1;
    }

    let system = system(&request.system, cache, &mut budget);
    let messages = messages(&request.messages, cache, &mut budget);

    body.insert("messages".into(), Value::Array(messages));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("inferenceConfig".into(), json!({"maxTokens": max_tokens}));
    if !tools.is_empty() {
        body.insert("toolConfig".into(), json!({"tools": tools}));
    }
    Value::Object(body)
}

fn system(blocks: &[SystemContentBlock], cache: CachePlan, budget: &mut usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut placed = false;
    let mut allowed = budget.saturating_sub(1);
    let mut after_text = false;
    for block in blocks {
        match block {
            SystemContentBlock::Text(text) if !text.is_empty() => {
                out.push(json!({"text": text}));
                after_text = true;
            }
            SystemContentBlock::Text(_) => {}
            SystemContentBlock::CachePoint(_) => {
                if after_text && allowed > 0 {
                    out.push(cache_point(cache.system_ttl));
                    allowed -= 1;
                    *budget -= 1;
                    placed = true;
                    after_text = false;
                }
            }
        }
    }
    if !placed && allowed > 0 && after_text {
        out.push(cache_point(cache.system_ttl));
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
            let mut content: Vec<Value> = message
                .content
                .iter()
                .filter(|block| match block {
                    ContentBlock::Text(text) => !text.trim().is_empty(),
                    // Blocks this version does not know never reach a model.
                    ContentBlock::CachePoint(_) | ContentBlock::Other(_) => false,
                    _ => true,
                })
                .filter_map(|block| serde_json::to_value(block).ok())
                .collect();
            if content.is_empty() {
                // Every block was blank; Bedrock rejects an empty message.
                content.push(json!({"text": crate::model::blank_text()}));
            }
            if Some(i) == newest_user && *budget > 0 {
                content.push(cache_point(cache.messages_ttl));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{CachePoint, ToolResult, ToolResultStatus, ToolUse};
    use crate::tool::{Tier, ToolSpec};

    #[test]
    fn converse_body_with_cache_points_and_a_refused_tool() {
        let request = ModelRequest {
            system: vec![
                SystemContentBlock::Text("persona".into()),
                SystemContentBlock::CachePoint(CachePoint::default()),
                SystemContentBlock::Text("## Now".into()),
            ],
            messages: vec![
                Message::user_text("lamp on"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        ContentBlock::Text(" ".into()),
                        ContentBlock::ToolUse(ToolUse {
                            tool_use_id: "tooluse_1".into(),
                            name: "lamp".into(),
                            input: json!({"on": true}),
                        }),
                    ],
                    metadata: None,
                },
                Message {
                    role: Role::User,
                    content: vec![ContentBlock::ToolResult(ToolResult::text(
                        "tooluse_1",
                        ToolResultStatus::Error,
                        "not approved",
                    ))],
                    metadata: None,
                },
            ]
            .into_iter()
            .map(Arc::new)
            .collect(),
            tools: vec![
                ToolSpec::builder("lamp", "Switch the lamp")
                    .tier(Tier::Physical)
                    .build(),
            ]
            .into(),
        };
        let plan = CachePlan {
            enabled: true,
            tools_ttl: Some(CacheTtl::OneHour),
            system_ttl: Some(CacheTtl::OneHour),
            messages_ttl: None,
        };
        assert_eq!(
            body(&request, 2048, plan),
            json!({
                "messages": [
                    {"role": "user", "content": [{"text": "lamp on"}]},
                    {"role": "assistant", "content": [
                        {"toolUse": {"toolUseId": "tooluse_1", "name": "lamp", "input": {"on": true}}}
                    ]},
                    {"role": "user", "content": [
                        {"toolResult": {"toolUseId": "tooluse_1", "status": "error",
                                        "content": [{"text": "not approved"}]}},
                        {"cachePoint": {"type": "default"}}
                    ]}
                ],
                "system": [
                    {"text": "persona"},
                    {"cachePoint": {"type": "default", "ttl": "1h"}},
                    {"text": "## Now"}
                ],
                "inferenceConfig": {"maxTokens": 2048},
                "toolConfig": {"tools": [
                    {"toolSpec": {"name": "lamp", "description": "Switch the lamp",
                                  "inputSchema": {"json": {"type": "object", "properties": {}, "required": []}}}},
                    {"cachePoint": {"type": "default", "ttl": "1h"}}
                ]}
            })
        );
        let plain = body(&request, 2048, CachePlan::OFF);
        assert!(!plain.to_string().contains("cachePoint"));
    }
}
