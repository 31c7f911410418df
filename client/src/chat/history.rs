//! A stored conversation as `/resume` shows it: the pure mapping from the hub's stored messages
//! and its stored events to history lines, and their printing.
//!
//! Invariants: text from the store goes through [`sanitize`] (or [`one_line`]) before it is
//! printed; a stored event shows the presenter's lines (`tau_client::present`), the very lines the
//! chat printed when it happened live: a stop or repair where its event says it sits
//! (`before_message`: the index of the first message stored after it), so it lands between the
//! same messages on every replay, and a tool call at its result (the same `tool_use_id`). One
//! without that anchor (written by an older hub) or placed among the messages not shown is left
//! out; a call without its stored event shows a refusal the gate wrote in the UI language.

use std::collections::HashMap;

use tau_api::i18n::Messages;
use tau_api::lang::Lang;
use tau_api::proto::v1 as pb;
use tau_client::present::{Line, Presenter, Stored, read_stored};

use super::render::{Printer, one_line, sanitize};

/// The refusal text the model reads when a call was not approved (fixed English, from the gate).
const REFUSAL_PREFIX: &str = "The user did not approve this action";

/// One line of a stored conversation as `/resume` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryLine {
    /// What the user said (`> …`).
    User(String),
    /// What tau answered.
    Assistant(String),
    /// A tool call or its result (dim).
    Tool(String),
    /// A refused tool call (red `✗`).
    Refused(String),
    /// A stored event's line, as the chat showed it live.
    Event(Line),
}

/// A stored turn stop or repair, placed before the stored message with index `before`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnMark {
    pub before: u64,
    pub line: Line,
}

/// The stored events a replay places among the messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventMarks {
    /// The stops and repairs, in stored order.
    pub placed: Vec<TurnMark>,
    /// Each stored tool call's lines, by its `tool_use_id`.
    pub calls: HashMap<String, Vec<Line>>,
}

/// The stops, repairs and tool calls among a session's stored events; events of other kinds, or
/// without an anchor, are left out.
pub fn event_marks(presenter: &Presenter<'_>, events: &[pb::StoredEvent]) -> EventMarks {
    let mut marks = EventMarks::default();
    for event in events {
        let stored = read_stored(event);
        match &stored {
            Stored::TurnStopped { before_message, .. }
            | Stored::TurnRepaired { before_message, .. } => {
                let Some(before) = *before_message else {
                    continue;
                };
                for line in presenter.stored(&stored) {
                    marks.placed.push(TurnMark { before, line });
                }
            }
            Stored::ToolCall(facts) => {
                if let Some(id) = facts.tool_use_id.clone().filter(|id| !id.is_empty()) {
                    marks.calls.insert(id, presenter.stored(&stored));
                }
            }
            _ => {}
        }
    }
    marks
}

/// The lines of a stored conversation, oldest first, with each of `marks`' stops and repairs
/// before the first shown message at or after its place (those placed further back than the
/// first shown message belong to the messages not shown and are left out), and each stored call's
/// lines at its result.
pub fn history_lines(
    messages: &Messages,
    lang: Lang,
    stored: &[pb::StoredMessage],
    marks: &EventMarks,
) -> Vec<HistoryLine> {
    let mut tools: Vec<(String, String)> = Vec::new();
    let mut lines = Vec::new();
    let first = stored.first().map_or(u64::MAX, |message| message.index);
    let mut placed: Vec<&TurnMark> = marks
        .placed
        .iter()
        .filter(|mark| mark.before >= first)
        .collect();
    // Stable: marks at one place keep their stored order.
    placed.sort_by_key(|mark| mark.before);
    let mut placed = placed.into_iter().peekable();
    for message in stored {
        while let Some(mark) = placed.next_if(|mark| mark.before <= message.index) {
            lines.push(HistoryLine::Event(mark.line.clone()));
        }
        let user = message.role == pb::MessageRole::User as i32;
        for block in &message.content {
            let Some(block) = &block.block else {
                continue;
            };
            match block {
                pb::content_block::Block::Text(text) if !text.trim().is_empty() => {
                    let text = sanitize(text.trim());
                    lines.push(if user {
                        HistoryLine::User(text)
                    } else {
                        HistoryLine::Assistant(text)
                    });
                }
                pb::content_block::Block::ToolUse(use_) => {
                    tools.push((use_.tool_use_id.clone(), use_.name.clone()));
                    let tool = sanitize(&use_.name);
                    lines.push(HistoryLine::Tool(messages.t_or_key(
                        "history.tool_call",
                        lang,
                        &[("tool", &tool)],
                    )));
                }
                pb::content_block::Block::ToolResult(result) => {
                    let name = tools
                        .iter()
                        .rev()
                        .find(|(id, _)| *id == result.tool_use_id)
                        .map_or("?", |(_, name)| name.as_str());
                    let call = marks.calls.get(&result.tool_use_id);
                    lines.extend(result_lines(messages, lang, name, result, call));
                }
                pb::content_block::Block::Text(_) | pb::content_block::Block::Reasoning(_) => {}
            }
        }
    }
    lines.extend(placed.map(|mark| HistoryLine::Event(mark.line.clone())));
    lines
}

/// The lines of one stored tool result: its call's stored lines when there are some (then the
/// result itself only when the call succeeded), else a refusal or the result.
fn result_lines(
    messages: &Messages,
    lang: Lang,
    name: &str,
    result: &pb::ToolResultBlock,
    call: Option<&Vec<Line>>,
) -> Vec<HistoryLine> {
    let tool = sanitize(name);
    let result_line = || {
        HistoryLine::Tool(messages.t_or_key(
            "history.tool_result",
            lang,
            &[("tool", &tool), ("result", &one_line(&result.text, 120))],
        ))
    };
    if let Some(call) = call {
        let mut lines: Vec<HistoryLine> = call.iter().cloned().map(HistoryLine::Event).collect();
        if call.iter().all(|line| !line.error) {
            lines.push(result_line());
        }
        return lines;
    }
    if result.text.starts_with(REFUSAL_PREFIX) {
        vec![HistoryLine::Refused(messages.t_or_key(
            "approval.rejected",
            lang,
            &[("tool", &tool)],
        ))]
    } else {
        vec![result_line()]
    }
}

/// Prints history lines.
pub fn print_history(printer: &mut Printer, lines: &[HistoryLine]) {
    let style = printer.style();
    for line in lines {
        match line {
            HistoryLine::User(text) => printer.line(&format!("{} {text}", style.bold(">"))),
            HistoryLine::Assistant(text) => printer.line(text),
            HistoryLine::Tool(text) => printer.dim(text),
            HistoryLine::Refused(text) => printer.red(text),
            HistoryLine::Event(line) => printer.presented(line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::render::tests::Shared;
    use tau_client::present::LineKind;

    use super::super::style::Style;
    use super::*;

    fn text(s: &str) -> pb::ContentBlock {
        pb::ContentBlock {
            block: Some(pb::content_block::Block::Text(s.into())),
        }
    }

    #[test]
    fn history_shows_text_tool_calls_and_refusals() {
        let tool_use = pb::ContentBlock {
            block: Some(pb::content_block::Block::ToolUse(pb::ToolUseBlock {
                tool_use_id: "t1".into(),
                name: "demo_physical_action".into(),
                input_json: "{}".into(),
            })),
        };
        let refusal = pb::ContentBlock {
            block: Some(pb::content_block::Block::ToolResult(pb::ToolResultBlock {
                tool_use_id: "t1".into(),
                status: pb::ToolResultStatus::Error as i32,
                text: "The user did not approve this action: demo_physical_action. Do not perform it; tell the user briefly.".into(),
            })),
        };
        let stored = vec![
            pb::StoredMessage {
                role: pb::MessageRole::User as i32,
                content: vec![text("turn on the lamp")],
                ..Default::default()
            },
            pb::StoredMessage {
                role: pb::MessageRole::Assistant as i32,
                content: vec![tool_use],
                ..Default::default()
            },
            pb::StoredMessage {
                role: pb::MessageRole::User as i32,
                content: vec![refusal],
                ..Default::default()
            },
            pb::StoredMessage {
                role: pb::MessageRole::Assistant as i32,
                content: vec![text("Understood, I did not do it.\x1b[2J")],
                ..Default::default()
            },
        ];
        let lines = history_lines(
            &Messages::builtin(),
            Lang::En,
            &stored,
            &EventMarks::default(),
        );
        assert_eq!(
            lines,
            vec![
                HistoryLine::User("turn on the lamp".into()),
                HistoryLine::Tool("→ demo_physical_action".into()),
                HistoryLine::Refused("✗ demo_physical_action: not approved".into()),
                HistoryLine::Assistant("Understood, I did not do it.\\u{1b}[2J".into()),
            ]
        );
        let out = Shared::default();
        let mut printer = Printer::new(Box::new(out.clone()), Style::new(false));
        print_history(&mut printer, &lines);
        assert!(
            out.text().starts_with("> turn on the lamp\n"),
            "{}",
            out.text()
        );
    }

    fn said(index: u64, role: pb::MessageRole, words: &str) -> pb::StoredMessage {
        pb::StoredMessage {
            index,
            role: role as i32,
            content: vec![text(words)],
            ..Default::default()
        }
    }

    fn event(kind: &str, json: &str) -> pb::StoredEvent {
        pb::StoredEvent {
            r#type: kind.into(),
            json: json.into(),
        }
    }

    #[test]
    fn stored_stops_and_repairs_sit_between_the_messages_their_events_name() {
        use pb::MessageRole::{Assistant, User};
        let events = [
            event(
                "tool_call",
                r#"{"type":"tool_call","tool":"current_time","before_message":1}"#,
            ),
            event(
                "turn_stopped",
                r#"{"type":"turn_stopped","stop_reason":"limit_turns","model_calls":2,"notice":"The turn stopped after 2 model calls (its limit).","before_message":4}"#,
            ),
            event(
                "turn_repaired",
                r#"{"type":"turn_repaired","notice":"The turn stopped after 2 model calls (its limit).","before_message":4}"#,
            ),
            // Written by an older hub: no anchor, left out.
            event(
                "turn_stopped",
                r#"{"type":"turn_stopped","stop_reason":"cancelled"}"#,
            ),
            event(
                "turn_stopped",
                r#"{"type":"turn_stopped","stop_reason":"error","notice":"The model call failed: boom\u001b[2J","before_message":6}"#,
            ),
            event(
                "turn_stopped",
                r#"{"type":"turn_stopped","stop_reason":"limit_total_tokens","notice":"The turn stopped after using 90 tokens (its budget is 50).","before_message":7}"#,
            ),
            event("turn_stopped", "not json"),
        ];
        let messages = Messages::builtin();
        let marks = event_marks(&Presenter::new(&messages, Lang::En), &events);
        assert_eq!(marks.placed.len(), 4, "{marks:?}");
        // Messages 0 and 1 are not shown; 2 and 3 are the stopped turn, 4 and 5 the next one.
        let stored = [
            said(2, User, "what time is it"),
            said(3, Assistant, "checking"),
            said(4, User, "again"),
            said(5, Assistant, "it is noon"),
            said(6, User, "and now"),
        ];
        let lines = history_lines(&messages, Lang::En, &stored, &marks);
        let line = |kind, text: &str, error| {
            HistoryLine::Event(Line {
                kind,
                text: text.into(),
                error,
            })
        };
        let mark = |text: &str| line(LineKind::Stopped, text, false);
        assert_eq!(
            lines,
            vec![
                HistoryLine::User("what time is it".into()),
                HistoryLine::Assistant("checking".into()),
                mark(
                    "■ Stopped: this turn reached its limit of 2 model calls ([agent] max_turns)."
                ),
                line(
                    LineKind::Repaired,
                    "↺ Repaired the unfinished history: The turn stopped after 2 model calls (its limit).",
                    false
                ),
                HistoryLine::User("again".into()),
                HistoryLine::Assistant("it is noon".into()),
                line(
                    LineKind::Stopped,
                    "■ Error: The model call failed: boom\\u{1b}[2J",
                    true
                ),
                HistoryLine::User("and now".into()),
                mark("■ The turn stopped after using 90 tokens (its budget is 50)."),
            ]
        );
        let tr = event_marks(&Presenter::new(&messages, Lang::Tr), &events[1..2]);
        assert_eq!(tr.placed.len(), 1);
        assert!(tr.placed[0].line.text.starts_with("■ "), "{tr:?}");
        assert_ne!(
            tr.placed[0].line.text, marks.placed[0].line.text,
            "in the UI language"
        );

        // Marks just before the first shown message show; those further back belong to the
        // messages not shown.
        let lines = history_lines(&messages, Lang::En, &stored[2..], &marks);
        assert_eq!(lines[2], HistoryLine::User("again".into()), "{lines:?}");
        assert!(matches!(lines[0], HistoryLine::Event(_)), "{lines:?}");
        let lines = history_lines(&messages, Lang::En, &stored[3..], &marks);
        assert_eq!(lines[0], HistoryLine::Assistant("it is noon".into()));

        // A stop reads as the chat showed it live: a notice.
        let out = Shared::default();
        let mut printer = Printer::new(Box::new(out.clone()), Style::new(true));
        let stop = &marks.placed[0].line;
        print_history(&mut printer, &[HistoryLine::Event(stop.clone())]);
        assert_eq!(out.text(), Style::new(true).yellow(&stop.text) + "\n");
    }
}
