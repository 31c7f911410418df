//! A stored conversation as `/resume` shows it: the pure mapping from the hub's stored messages to
//! history lines, and their printing.
//!
//! Invariants: text from the store goes through [`sanitize`] (or [`one_line`]) before it is
//! printed; a tool result the gate wrote for a refused call shows as a refusal in the UI language.

use tau_api::i18n::Messages;
use tau_api::lang::Lang;
use tau_api::proto::v1 as pb;

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
}

/// The lines of a stored conversation, oldest first.
pub fn history_lines(
    messages: &Messages,
    lang: Lang,
    stored: &[pb::StoredMessage],
) -> Vec<HistoryLine> {
    let mut tools: Vec<(String, String)> = Vec::new();
    let mut lines = Vec::new();
    for message in stored {
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
                    let tool = sanitize(name);
                    if result.text.starts_with(REFUSAL_PREFIX) {
                        lines.push(HistoryLine::Refused(messages.t_or_key(
                            "approval.rejected",
                            lang,
                            &[("tool", &tool)],
                        )));
                    } else {
                        lines.push(HistoryLine::Tool(messages.t_or_key(
                            "history.tool_result",
                            lang,
                            &[("tool", &tool), ("result", &one_line(&result.text, 120))],
                        )));
                    }
                }
                pb::content_block::Block::Text(_) | pb::content_block::Block::Reasoning(_) => {}
            }
        }
    }
    lines
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::render::tests::Shared;
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
        let lines = history_lines(&Messages::builtin(), Lang::En, &stored);
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
}
