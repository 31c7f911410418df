//! Histories the context tests build from: plain turns, tool calls and their results, and whole
//! tool turns (a request, `calls` call/result pairs, an answer).

use serde_json::json;

use crate::message::{ContentBlock, Message, Role, ToolResult, ToolResultStatus, ToolUse};

/// A user question and the assistant's answer.
pub(crate) fn turn(n: usize) -> Vec<Message> {
    vec![
        Message::user_text(format!("q{n}")),
        Message::assistant_text(format!("a{n}")),
    ]
}

/// An assistant message calling the tool `lamp` as `id`.
pub(crate) fn tool_call(id: &str) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse(ToolUse {
            tool_use_id: id.into(),
            name: "lamp".into(),
            input: json!({}),
        })],
        metadata: None,
    }
}

/// The user message carrying the successful result of call `id`.
pub(crate) fn tool_result(id: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult(ToolResult::text(
            id,
            ToolResultStatus::Success,
            "ok",
        ))],
        metadata: None,
    }
}

/// A request, `calls` call/result pairs, and the answer.
pub(crate) fn tool_turn(n: usize, calls: usize) -> Vec<Message> {
    let mut messages = vec![Message::user_text(format!("job{n}"))];
    for i in 0..calls {
        let id = format!("t{n}-{i}");
        messages.push(tool_call(&id));
        messages.push(tool_result(&id));
    }
    messages.push(Message::assistant_text(format!("done{n}")));
    messages
}
