//! Conversation windows: which stored messages the model sees. The store keeps every message; the
//! window is a start index over the full history, recorded as `removed_message_count` in the agent
//! record's conversation manager state.
//!
//! Invariants of [`sliding_window_start`]: the window never starts inside a toolUse/toolResult pair
//! and, whenever the history has one, starts at a user message that carries no toolResult. Pure
//! functions, no model needed. (The summarizing window needs the agent's model and lives in
//! `summarize`; its summary is stored in `conversation_manager_state.summary_message`.)

use std::borrow::Borrow;

use crate::message::{Message, Role};

fn has_tool_result(message: &Message) -> bool {
    message.tool_results().next().is_some()
}

fn has_tool_use(message: &Message) -> bool {
    message.tool_uses().next().is_some()
}

/// A message a window may start at: a user message that is not a tool result (and, for odd
/// histories, not a tool call whose result does not follow).
/// (`messages` may hold the messages or references to them.)
pub(crate) fn is_clean_start<M: Borrow<Message>>(messages: &[M], index: usize) -> bool {
    let message = messages[index].borrow();
    if message.role != Role::User || has_tool_result(message) {
        return false;
    }
    if has_tool_use(message) {
        return messages
            .get(index + 1)
            .is_some_and(|next| has_tool_result(next.borrow()));
    }
    true
}

/// The sliding window over `messages`: the index of the first message the model sees.
///
/// With at most `window_size` messages nothing is cut (0). Otherwise the window starts at the first
/// clean start (a user message without a toolResult) at or after `len - window_size`; when the
/// kept tail has none (one long chain of tool calls), at the nearest clean start before it, so the
/// window is larger than `window_size` rather than broken; when the history has no clean start at
/// all, nothing is cut. `window_size == 0` cuts everything (`len`). (`messages` may hold the
/// messages or references to them.)
pub fn sliding_window_start<M: Borrow<Message>>(messages: &[M], window_size: usize) -> usize {
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

/// [`sliding_window_start`] over only the last messages of a history (`tail`; `whole` when it is
/// the entire history), so a long session is restored without reading it all: `Some` start into
/// `tail`, the same message the entire history would give, or `None` when the tail cannot tell
/// (it holds no clean start), and the entire history must be read. A tail of more than
/// `window_size` messages is needed for an answer short of `whole`.
pub fn sliding_window_start_in_tail(
    tail: &[Message],
    window_size: usize,
    whole: bool,
) -> Option<usize> {
    let start = sliding_window_start(tail, window_size);
    // A clean start found in the tail is the one the entire history finds: both searches run
    // from the same message, forwards within the last `window_size` and then backwards, and
    // whether a message is a clean start depends only on it and the next one.
    let found = start == tail.len() || is_clean_start(tail, start);
    (whole || (tail.len() > window_size && found)).then_some(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tests_histories::{tool_call, tool_result, turn};

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
        assert_eq!(sliding_window_start::<Message>(&[], 4), 0);
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
    fn a_tail_gives_the_start_of_the_entire_history_or_says_it_cannot() {
        let mut chain = turn(0);
        chain.push(Message::user_text("long job"));
        for i in 0..6 {
            chain.push(tool_call(&format!("t{i}")));
            chain.push(tool_result(&format!("t{i}")));
        }
        chain.extend(turn(1));
        let mut loose = vec![tool_result("x")];
        for i in 0..4 {
            loose.push(tool_call(&format!("u{i}")));
            loose.push(tool_result(&format!("u{i}")));
        }
        let turns: Vec<Message> = (0..5).flat_map(turn).collect();
        let mut answered = 0;
        for history in [chain, loose, turns] {
            for window in 0..=history.len() + 1 {
                let full = sliding_window_start(&history, window);
                for kept in 0..=history.len() {
                    let cut = history.len() - kept;
                    let whole = kept == history.len();
                    let tail = &history[cut..];
                    match sliding_window_start_in_tail(tail, window, whole) {
                        Some(start) => {
                            answered += 1;
                            assert_eq!(cut + start, full, "window {window}, tail {kept}");
                        }
                        None => assert!(!whole),
                    }
                }
            }
        }
        assert!(answered > 100, "{answered}");
        // A tool chain longer than the tail cannot be placed from the tail.
        let mut long = vec![Message::user_text("go")];
        for i in 0..10 {
            long.push(tool_call(&format!("t{i}")));
            long.push(tool_result(&format!("t{i}")));
        }
        assert_eq!(sliding_window_start_in_tail(&long[11..], 4, false), None);
    }

    #[test]
    fn window_zero_cuts_everything() {
        let messages: Vec<Message> = (0..2).flat_map(turn).collect();
        assert_eq!(sliding_window_start(&messages, 0), 4);
    }
}
