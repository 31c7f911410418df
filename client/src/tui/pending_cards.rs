//! Approvals this TUI can answer that it did not ask itself: those pending in the session watch's
//! snapshot (asked while the TUI was away, or of a turn another terminal client started) and those
//! asked on the session between this TUI's turns. The first opens the approval card; the others
//! wait behind it, oldest first. Also how a terminal event reaches an open card.
//!
//! Invariants:
//! - Only the hub's snapshot and live requests fill the queue (never the stored events of a
//!   replay), and only with approvals of this TUI's channel; one resolved anywhere leaves it, and
//!   an open card whose approval is resolved elsewhere folds into the conversation as a line.
//! - A card opened from the queue behaves like any other ([`super::card`]): it arms only after it
//!   was drawn and left alone for the arming delay, and its focus starts on Reject.
//! - When the watch loses its stream, an undecided card closes and the queue empties (the
//!   attachment that could decide them is gone); the next snapshot lists what is still pending.

use std::time::Instant;

use crossterm::event::Event;
use tau_api::proto::v1::{self as pb, session_event::Kind};

use super::app::App;
use super::card::Verdict;

/// What a terminal event did to the open card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardInput {
    /// No undecided card is open: the event is the composer's.
    NoCard,
    /// The card took it and decided nothing.
    Swallowed,
    /// Approve (`true`) or reject.
    Decided(bool),
}

impl App {
    /// The id of the open card's approval while it waits for a decision.
    fn undecided_card(&self) -> Option<&str> {
        self.card
            .as_ref()
            .filter(|card| card.verdict.is_none())
            .map(|card| card.approval.approval_id.as_str())
    }

    /// A snapshot of the watched session: its approvals pending on `channel` are answerable here.
    pub fn snapshot(&mut self, snapshot: &pb::SessionSnapshot, channel: &str) {
        let open = self.undecided_card().map(str::to_owned);
        self.waiting.clear();
        let mut open_still_pending = false;
        for approval in &snapshot.pending_approvals {
            if approval.channel != channel {
                continue;
            }
            if open.as_deref() == Some(approval.approval_id.as_str()) {
                open_still_pending = true;
            } else {
                self.waiting.push_back(approval.clone());
            }
        }
        if open.is_some() && !open_still_pending {
            self.card = None;
        }
    }

    /// A live event of the watched session, between this TUI's turns.
    pub fn watched(&mut self, event: &pb::SessionEvent, channel: &str) {
        self.apply(event);
        match &event.kind {
            Some(Kind::ApprovalRequested(requested)) => {
                let Some(approval) = &requested.approval else {
                    return;
                };
                let known = self.undecided_card() == Some(approval.approval_id.as_str())
                    || self
                        .waiting
                        .iter()
                        .any(|w| w.approval_id == approval.approval_id);
                if approval.channel == channel && !known {
                    self.waiting.push_back(approval.clone());
                }
            }
            Some(Kind::ApprovalResolved(resolved)) => {
                self.waiting
                    .retain(|w| w.approval_id != resolved.approval_id);
                if self.undecided_card() == Some(resolved.approval_id.as_str()) {
                    self.verdict(Verdict::DecidedElsewhere);
                }
            }
            _ => {}
        }
    }

    /// Opens the card of the oldest waiting approval when no card is shown; whether it did.
    pub fn next_card(&mut self) -> bool {
        if self.card.is_none()
            && let Some(approval) = self.waiting.pop_front()
        {
            self.open_card(approval);
            return true;
        }
        false
    }

    /// The watch lost its stream: nothing waiting can be decided with it any more.
    pub fn watch_lost(&mut self) {
        if self.undecided_card().is_some() {
            self.card = None;
        }
        self.waiting.clear();
    }

    /// Hands a terminal event to the open undecided card.
    pub fn card_event(&mut self, event: &Event, now: Instant) -> CardInput {
        let Some(card) = self.card.as_mut().filter(|card| card.verdict.is_none()) else {
            return CardInput::NoCard;
        };
        match event {
            Event::Key(key) => match card.key(*key, now) {
                Some(approve) => CardInput::Decided(approve),
                None => CardInput::Swallowed,
            },
            Event::Paste(_) => {
                card.paste(now);
                let text = self.t("approval.paste_ignored", &[]);
                self.note(&text, false);
                CardInput::Swallowed
            }
            _ => CardInput::Swallowed,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use tau_api::i18n::Messages;
    use tau_api::lang::Lang;

    use super::*;
    use crate::tui::card::{ARMING, Button};
    use crate::tui::theme::Theme;
    use crate::tui::view;

    fn pending(id: &str, channel: &str) -> pb::PendingApproval {
        pb::PendingApproval {
            approval_id: id.into(),
            tool: "demo_physical_action".into(),
            tier: pb::Tier::Physical as i32,
            arguments: "{\"action\":\"on\"}".into(),
            effect: "Turns the lamp on.".into(),
            channel: channel.into(),
            ..Default::default()
        }
    }

    fn snapshot(ids: &[(&str, &str)]) -> pb::SessionSnapshot {
        pb::SessionSnapshot {
            pending_approvals: ids.iter().map(|(id, ch)| pending(id, ch)).collect(),
            attachment_id: "att-9".into(),
            ..Default::default()
        }
    }

    fn key(code: KeyCode) -> Event {
        Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn screen(app: &App, now: Instant) -> String {
        let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
        terminal
            .draw(|frame| view::draw(frame, app, Theme { color: false }, now))
            .unwrap();
        let buffer = terminal.backend().buffer();
        let mut out = String::new();
        for y in 0..buffer.area.height {
            for x in 0..buffer.area.width {
                out.push_str(buffer[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    fn resolved(id: &str) -> pb::SessionEvent {
        pb::SessionEvent {
            seq: 9,
            kind: Some(Kind::ApprovalResolved(pb::ApprovalResolved {
                approval_id: id.into(),
                tool: "demo_physical_action".into(),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn the_first_pending_approval_of_the_snapshot_opens_the_card_unarmed_on_reject() {
        let mut app = App::new(Messages::builtin(), Lang::En);
        app.snapshot(
            &snapshot(&[
                ("apr-1", "terminal"),
                ("apr-2", "telegram"),
                ("apr-3", "terminal"),
            ]),
            "terminal",
        );
        assert!(app.next_card());
        assert!(!app.next_card(), "one card at a time");
        let card = app.card.as_ref().unwrap();
        assert_eq!(card.approval.approval_id, "apr-1");
        assert_eq!(card.focus, Button::Reject);
        let ids: Vec<&str> = app.waiting.iter().map(|a| a.approval_id.as_str()).collect();
        assert_eq!(
            ids,
            ["apr-3"],
            "another channel's approval is not answerable here"
        );

        let t0 = Instant::now();
        app.card.as_mut().unwrap().drawn(t0);
        let shown = screen(&app, t0);
        assert!(shown.contains("(arming…)"), "{shown}");
        assert!(shown.contains("awaiting approval · !2"), "{shown}");
        // `y` and Enter at once are swallowed, and restart the wait.
        let t1 = t0 + Duration::from_millis(100);
        assert_eq!(
            app.card_event(&key(KeyCode::Char('y')), t1),
            CardInput::Swallowed
        );
        assert_eq!(
            app.card_event(&key(KeyCode::Enter), t1),
            CardInput::Swallowed
        );
        assert_eq!(
            app.card_event(&Event::Paste("y\r".into()), t1),
            CardInput::Swallowed
        );
        assert!(app.composer.text.is_empty() && app.composer.history().is_empty());
        let armed = t1 + ARMING;
        assert!(!screen(&app, armed).contains("(arming…)"));
        // Focus on Reject: Enter rejects.
        assert_eq!(
            app.card_event(&key(KeyCode::Enter), armed),
            CardInput::Decided(false)
        );
    }

    #[test]
    fn y_after_the_delay_approves_and_the_next_one_opens_after_the_verdict() {
        let mut app = App::new(Messages::builtin(), Lang::Tr);
        app.snapshot(
            &snapshot(&[("apr-1", "terminal"), ("apr-2", "terminal")]),
            "terminal",
        );
        app.next_card();
        let t0 = Instant::now();
        app.card.as_mut().unwrap().drawn(t0);
        assert_eq!(
            app.card_event(&key(KeyCode::Char('y')), t0 + ARMING),
            CardInput::Decided(true)
        );
        app.verdict(Verdict::Approved);
        assert_eq!(
            app.card_event(&key(KeyCode::Char('y')), t0 + ARMING),
            CardInput::NoCard,
            "a decided card takes no key"
        );
        assert!(
            app.next_card(),
            "the verdict folded the card away: the next one opens"
        );
        let card = app.card.as_ref().unwrap();
        assert_eq!(card.approval.approval_id, "apr-2");
        assert!(!card.armed(t0 + Duration::from_secs(60)), "not drawn yet");
        assert_eq!(card.focus, Button::Reject);
        assert_eq!(
            app.card_event(&key(KeyCode::Esc), t0),
            CardInput::Decided(false),
            "Esc rejects even unarmed"
        );
    }

    #[test]
    fn live_requests_queue_and_resolutions_elsewhere_close_or_drop_them() {
        let mut app = App::new(Messages::builtin(), Lang::En);
        let requested = |id: &str, channel: &str| pb::SessionEvent {
            seq: 3,
            kind: Some(Kind::ApprovalRequested(pb::ApprovalRequested {
                approval: Some(pending(id, channel)),
            })),
            ..Default::default()
        };
        app.watched(&requested("apr-1", "terminal"), "terminal");
        app.watched(&requested("apr-1", "terminal"), "terminal");
        app.watched(&requested("apr-2", "terminal"), "terminal");
        app.watched(&requested("apr-3", "telegram"), "terminal");
        assert_eq!(app.waiting.len(), 2, "once each, this channel's only");
        app.next_card();
        app.watched(&requested("apr-1", "terminal"), "terminal");
        assert_eq!(app.waiting.len(), 1, "the open one is not queued again");
        app.watched(&resolved("apr-2"), "terminal");
        assert!(app.waiting.is_empty());
        app.watched(&resolved("apr-1"), "terminal");
        assert!(
            app.card.is_none(),
            "decided elsewhere: folded into the conversation"
        );
        let line = &app.conversation.back().unwrap().text;
        assert!(line.contains("decided elsewhere"), "{line}");
    }

    #[test]
    fn a_lost_watch_closes_the_undecided_card_and_a_snapshot_without_it_too() {
        let mut app = App::new(Messages::builtin(), Lang::En);
        app.snapshot(
            &snapshot(&[("apr-1", "terminal"), ("apr-2", "terminal")]),
            "terminal",
        );
        app.next_card();
        app.watch_lost();
        assert!(app.card.is_none() && app.waiting.is_empty());
        app.snapshot(&snapshot(&[("apr-1", "terminal")]), "terminal");
        app.next_card();
        app.snapshot(&snapshot(&[("apr-2", "terminal")]), "terminal");
        assert!(app.card.is_none(), "apr-1 is no longer pending");
        assert_eq!(app.waiting.len(), 1);
        app.next_card();
        app.snapshot(&snapshot(&[("apr-2", "terminal")]), "terminal");
        assert!(
            app.card.is_some() && app.waiting.is_empty(),
            "still pending: kept open"
        );
    }

    #[test]
    fn a_decided_card_folds_away_and_takes_no_key() {
        let mut app = App::new(Messages::builtin(), Lang::En);
        for verdict in [
            Verdict::Approved,
            Verdict::Rejected,
            Verdict::DecidedElsewhere,
        ] {
            app.open_card(pending("apr-1", "terminal"));
            app.verdict(Verdict::Sending);
            assert!(app.card.is_some(), "shown until the hub answers");
            let t = Instant::now();
            assert_eq!(
                app.card_event(&key(KeyCode::Char('y')), t),
                CardInput::NoCard
            );
            app.verdict(verdict);
            assert!(app.card.is_none(), "{verdict:?}");
            assert_eq!(
                app.card_event(&key(KeyCode::Char('h')), t),
                CardInput::NoCard
            );
            let line = app.conversation.back().unwrap().text.clone();
            assert!(line.contains("demo_physical_action"), "{line}");
            assert!(line.ends_with("· tier 2"), "{line}");
        }
    }
}
