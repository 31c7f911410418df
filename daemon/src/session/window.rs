//! Conversation windows: which stored messages the model sees. The store keeps every message; the
//! window is a start index over the full history, recorded as `removed_message_count` in the agent
//! record's conversation manager state.
//!
//! Also owns the rule that a session remembers its conversation manager: opening it under the other
//! one fails with [`SessionContextMismatch`].
//!
//! Invariants of [`sliding_window_start`]: the window never starts inside a toolUse/toolResult pair
//! and, whenever the history has one, starts at a user message that carries no toolResult. Pure
//! functions, no model needed. (The summarizing window needs the agent's model and lives in
//! `summarize`; its summary is stored in `conversation_manager_state.summary_message`.)

use serde::{Deserialize, Serialize};

use crate::message::{Message, Role};
use crate::session::error::{IdKind, SessionError};
use crate::session::id::validate_id;
use crate::session::records::{ConversationManagerState, SessionAgent};
use crate::session::store::SessionStore;

/// `[agent] context`: how the model's window over a long session is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextMode {
    /// Keep the last `window_size` messages.
    Sliding,
    /// Summarize older messages, keep the recent ones.
    Summarize,
}

impl ContextMode {
    /// The value as written in tau.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            ContextMode::Sliding => "sliding",
            ContextMode::Summarize => "summarize",
        }
    }

    /// The manager name recorded in `conversation_manager_state.__name__` (the Strands class name,
    /// so sessions written by the Python original open here too).
    pub fn manager_name(self) -> &'static str {
        match self {
            ContextMode::Sliding => "SlidingWindowConversationManager",
            ContextMode::Summarize => "SummarizingConversationManager",
        }
    }

    /// The mode a recorded manager name stands for.
    pub fn from_manager_name(name: &str) -> Option<Self> {
        [ContextMode::Sliding, ContextMode::Summarize]
            .into_iter()
            .find(|mode| mode.manager_name() == name)
    }
}

impl std::fmt::Display for ContextMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session recorded under another conversation manager than the one configured now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Session {session_id} was recorded with a different [agent] context setting; set it back to {recorded} or start a new session"
)]
pub struct SessionContextMismatch {
    pub session_id: String,
    /// The recorded mode (`sliding`, `summarize`), or the raw manager name if tau does not know it.
    pub recorded: String,
}

/// Checks that a recorded conversation manager matches `mode`.
pub fn check_context(
    session_id: &str,
    state: &ConversationManagerState,
    mode: ContextMode,
) -> Result<(), SessionContextMismatch> {
    if state.name == mode.manager_name() {
        return Ok(());
    }
    let recorded = ContextMode::from_manager_name(&state.name)
        .map(|m| m.as_str().to_owned())
        .unwrap_or_else(|| state.name.clone());
    Err(SessionContextMismatch {
        session_id: session_id.to_owned(),
        recorded,
    })
}

/// Reads an agent record for an agent about to run under `mode`: `None` if the session has no such
/// agent yet, [`SessionError::ContextMismatch`] if it was recorded under the other manager.
pub fn read_agent_for_mode(
    store: &dyn SessionStore,
    session_id: &str,
    agent_id: &str,
    mode: ContextMode,
) -> Result<Option<SessionAgent>, SessionError> {
    validate_id(IdKind::Session, session_id)?;
    let Some(agent) = store.read_agent(session_id, agent_id)? else {
        return Ok(None);
    };
    check_context(session_id, &agent.conversation_manager_state, mode)?;
    Ok(Some(agent))
}

fn has_tool_result(message: &Message) -> bool {
    message.tool_results().next().is_some()
}

fn has_tool_use(message: &Message) -> bool {
    message.tool_uses().next().is_some()
}

/// A message a window may start at: a user message that is not a tool result (and, for odd
/// histories, not a tool call whose result does not follow).
pub(crate) fn is_clean_start(messages: &[Message], index: usize) -> bool {
    let message = &messages[index];
    if message.role != Role::User || has_tool_result(message) {
        return false;
    }
    if has_tool_use(message) {
        return messages.get(index + 1).is_some_and(has_tool_result);
    }
    true
}

/// The sliding window over `messages`: the index of the first message the model sees.
///
/// With at most `window_size` messages nothing is cut (0). Otherwise the window starts at the first
/// clean start (a user message without a toolResult) at or after `len - window_size`; when the
/// kept tail has none (one long chain of tool calls), at the nearest clean start before it, so the
/// window is larger than `window_size` rather than broken; when the history has no clean start at
/// all, nothing is cut. `window_size == 0` cuts everything (`len`).
pub fn sliding_window_start(messages: &[Message], window_size: usize) -> usize {
    let len = messages.len();
    if window_size == 0 {
        return len;
    }
    if len <= window_size {
        return 0;
    }
    let first = len - window_size;
    if let Some(start) = (first..len).find(|&i| is_clean_start(messages, i)) {
        return start;
    }
    (0..first)
        .rev()
        .find(|&i| is_clean_start(messages, i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ContentBlock, ToolResult, ToolResultStatus, ToolUse};
    use crate::session::records::now_utc;
    use serde_json::json;

    fn tool_call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse(ToolUse {
                tool_use_id: id.into(),
                name: "t".into(),
                input: json!({}),
            })],
            metadata: None,
        }
    }

    fn tool_result(id: &str) -> Message {
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

    fn turn(n: usize) -> Vec<Message> {
        vec![
            Message::user_text(format!("q{n}")),
            Message::assistant_text(format!("a{n}")),
        ]
    }

    /// Every window the function returns starts cleanly and never splits a pair.
    fn assert_valid(messages: &[Message], start: usize) {
        if start == messages.len() || start == 0 {
            return;
        }
        assert!(
            is_clean_start(messages, start),
            "start {start} is not clean"
        );
        assert!(!has_tool_result(&messages[start]));
    }

    #[test]
    fn short_histories_are_not_cut() {
        let messages: Vec<Message> = (0..3).flat_map(turn).collect();
        assert_eq!(sliding_window_start(&messages, 6), 0);
        assert_eq!(sliding_window_start(&messages, 60), 0);
        assert_eq!(sliding_window_start(&[], 4), 0);
    }

    #[test]
    fn keeps_the_last_window_size_messages_when_that_starts_cleanly() {
        let messages: Vec<Message> = (0..10).flat_map(turn).collect();
        assert_eq!(sliding_window_start(&messages, 4), 16);
        assert_eq!(messages.len() - sliding_window_start(&messages, 4), 4);
    }

    #[test]
    fn moves_forward_to_a_user_message() {
        let messages: Vec<Message> = (0..10).flat_map(turn).collect();
        // 5 would start at an assistant message (index 15).
        assert_eq!(sliding_window_start(&messages, 5), 16);
    }

    #[test]
    fn never_starts_at_a_tool_result() {
        let mut messages = turn(0);
        messages.push(Message::user_text("do it"));
        messages.push(tool_call("a"));
        messages.push(tool_result("a"));
        messages.push(Message::assistant_text("done"));
        messages.extend(turn(1));
        for window in 1..=messages.len() + 1 {
            let start = sliding_window_start(&messages, window);
            assert_valid(&messages, start);
            assert!(
                messages.len() - start <= window.max(4),
                "window {window} kept too much"
            );
        }
        // Window 4 would start at the tool result (index 4): it moves on to "q1" (index 6).
        assert_eq!(sliding_window_start(&messages, 4), 6);
    }

    #[test]
    fn a_long_tool_chain_widens_the_window_instead_of_splitting_it() {
        let mut messages = turn(0);
        messages.push(Message::user_text("long job"));
        for i in 0..10 {
            messages.push(tool_call(&format!("t{i}")));
            messages.push(tool_result(&format!("t{i}")));
        }
        let start = sliding_window_start(&messages, 5);
        assert_eq!(
            start, 2,
            "the window starts at the user message of the chain"
        );
    }

    #[test]
    fn a_history_without_any_clean_start_is_not_cut() {
        let mut messages = vec![tool_result("x")];
        for i in 0..5 {
            messages.push(tool_call(&format!("t{i}")));
            messages.push(tool_result(&format!("t{i}")));
        }
        assert_eq!(sliding_window_start(&messages, 3), 0);
    }

    #[test]
    fn window_zero_cuts_everything() {
        let messages: Vec<Message> = (0..2).flat_map(turn).collect();
        assert_eq!(sliding_window_start(&messages, 0), 4);
    }

    #[test]
    fn mismatch_text_is_exact() {
        let state = ConversationManagerState::new(ContextMode::Sliding);
        let err =
            check_context("20260929-153012-3f9a", &state, ContextMode::Summarize).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Session 20260929-153012-3f9a was recorded with a different [agent] context setting; set it back to sliding or start a new session"
        );
        check_context("x", &state, ContextMode::Sliding).unwrap();
        let err = check_context(
            "x",
            &ConversationManagerState::new(ContextMode::Summarize),
            ContextMode::Sliding,
        )
        .unwrap_err();
        assert_eq!(err.recorded, "summarize");
    }

    #[test]
    fn unknown_recorded_managers_are_named_as_recorded() {
        let mut state = ConversationManagerState::new(ContextMode::Sliding);
        state.name = "NullConversationManager".into();
        let err = check_context("x", &state, ContextMode::Sliding).unwrap_err();
        assert!(
            err.to_string()
                .contains("set it back to NullConversationManager")
        );
    }

    #[test]
    fn agent_records_carry_the_manager() {
        let agent = SessionAgent::new("tau", ContextMode::Summarize, now_utc());
        assert_eq!(
            ContextMode::from_manager_name(&agent.conversation_manager_state.name),
            Some(ContextMode::Summarize)
        );
    }
}
