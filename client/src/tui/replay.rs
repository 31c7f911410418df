//! The events pane of a session opened or resumed: its stored events (ReadEvents) as lines, and
//! the approvals still pending in the hub (ListPendingApprovals) marked as such.
//!
//! Invariants: replayed lines look like live ones; an approval in the replay is history and never
//! opens the card (only a live request on this TUI's channel does); any field missing or of an
//! unexpected type shows as `?` rather than failing the replay.

use tau_api::proto::v1 as pb;
use tau_client::present::read_stored;

use super::app::App;
use crate::chat::render;

impl App {
    /// Replaces the events pane with `stored` and the approvals still `pending`.
    pub fn replay(&mut self, stored: &[pb::StoredEvent], pending: &[pb::PendingApproval]) {
        self.events.clear();
        for event in stored {
            // The same lines its live event had (`tau_client::present`).
            for line in self.presenter().stored(&read_stored(event)) {
                self.note(&line.text, line.error);
            }
        }
        for approval in pending {
            let channel = render::one_line(&approval.channel, 40);
            let text = self.t("approval.awaiting_other_channel", &[("channel", &channel)]);
            let tool = render::one_line(&approval.tool, 60);
            self.note(&format!("? {tool}: {text}"), false);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use tau_api::i18n::Messages;
    use tau_api::lang::Lang;

    use super::*;

    #[test]
    fn stored_events_and_pending_approvals_fill_the_events_pane() {
        let mut app = App::new(Messages::builtin(), Lang::En);
        app.note("from before", false);
        let stored = [
            pb::StoredEvent {
                r#type: "tool_call".into(),
                json: r#"{"type":"tool_call","tool":"demo_physical_action","tier":2,"status":"success","approval":"approved","duration_ms":7}"#.into(),
            },
            pb::StoredEvent {
                r#type: "error".into(),
                json: r#"{"type":"error","message":"boom\u001b[2J"}"#.into(),
            },
            pb::StoredEvent {
                r#type: "tool_call".into(),
                json: "not json".into(),
            },
        ];
        let pending = [pb::PendingApproval {
            tool: "shell".into(),
            channel: "telegram".into(),
            ..Default::default()
        }];
        app.replay(&stored, &pending);
        let lines: Vec<&str> = app.events.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            lines,
            [
                "✓ demo_physical_action · tier 2 · success · approved · 7 ms",
                "Error: boom\\u{1b}[2J",
                "✗ ? · tier ? · ? · ? · ? ms",
                "? shell: Awaiting approval on telegram.",
            ]
        );
        let mut terminal = Terminal::new(TestBackend::new(120, 30)).unwrap();
        let theme = super::super::theme::Theme { color: false };
        terminal
            .draw(|frame| super::super::view::draw(frame, &app, theme, Instant::now()))
            .unwrap();
        let screen = format!("{:?}", terminal.backend().buffer());
        assert!(
            screen.contains("✓ demo_physical_action · tier 2"),
            "{screen}"
        );
    }

    #[test]
    fn stored_turn_stops_and_repairs_are_one_line_each() {
        let mut app = App::new(Messages::builtin(), Lang::En);
        let stored = [
            pb::StoredEvent {
                r#type: "turn_stopped".into(),
                json: r#"{"type":"turn_stopped","stop_reason":"limit_turns","notice":"The turn stopped after 2 model calls (its limit).","model_calls":2,"v":1}"#.into(),
            },
            pb::StoredEvent {
                r#type: "turn_stopped".into(),
                json: r#"{"type":"turn_stopped","stop_reason":"error","notice":"boom"}"#.into(),
            },
            pb::StoredEvent {
                r#type: "turn_repaired".into(),
                json: r#"{"type":"turn_repaired","notice":"boom"}"#.into(),
            },
        ];
        app.replay(&stored, &[]);
        let lines: Vec<(&str, bool)> = app
            .events
            .iter()
            .map(|e| (e.text.as_str(), e.error))
            .collect();
        assert_eq!(
            lines,
            [
                (
                    "■ Stopped: this turn reached its limit of 2 model calls ([agent] max_turns).",
                    false
                ),
                ("■ Error: boom", true),
                ("↺ Repaired the unfinished history: boom", false),
            ]
        );
    }
}
