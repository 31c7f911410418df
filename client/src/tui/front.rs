//! The TUI as the relay's front ([`tau_client::relay::Front`]): hub events update
//! [`App`](super::app::App), keys typed during a turn edit the composer, Ctrl-C interrupts, and an
//! approval opens the card and waits for a decision the card allows.
//!
//! Invariants: the card decides only through [`Card::key`](super::card::Card::key) (armed, focus
//! on Reject, paste ignored); an approval of another channel never opens the card; the screen is redrawn at most
//! once per [`FRAME`] while events stream, and always before waiting on a person.

use std::time::{Duration, Instant};

use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use tau_api::proto::v1 as pb;
use tau_client::approvals::Decided;
use tau_client::call::CallError;
use tau_client::feed::FeedError;
use tau_client::relay::{Answer, Front};

use super::Tui;
use super::app::Who;
use super::card::Verdict;
use super::pending_cards::CardInput;
use crate::chat::render;
use crate::chat::state::CHANNEL;

/// The shortest time between two frames while a reply streams (about 60 frames a second).
pub const FRAME: Duration = Duration::from_millis(16);

/// What a terminal event means outside the card.
pub enum Key {
    Interrupt,
    Send(String),
    /// Alt-↑/↓ chose this session in the sidebar.
    Resume(String),
    Nothing,
}

impl Tui {
    /// Handles a terminal event while no card is open.
    pub fn input(&mut self, event: Event) -> Key {
        self.dirty = true;
        match event {
            Event::Key(key) if key.kind != KeyEventKind::Release => {
                if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
                    return Key::Interrupt;
                }
                if key.modifiers.contains(KeyModifiers::ALT)
                    && let Some(id) = self.app.neighbour(key.code)
                {
                    return Key::Resume(id);
                }
                match key.code {
                    KeyCode::PageUp => self.app.scroll = self.app.scroll.saturating_add(5),
                    KeyCode::PageDown => self.app.scroll = self.app.scroll.saturating_sub(5),
                    _ => {
                        if let super::input::Typed::Send(text) = self.app.composer.key(key) {
                            return Key::Send(text);
                        }
                    }
                }
                Key::Nothing
            }
            Event::Paste(text) => {
                self.app.composer.paste(&text);
                Key::Nothing
            }
            _ => Key::Nothing,
        }
    }
}

/// What the card shows of the hub's answer to a decision sent from it.
pub fn verdict_of(approve: bool, response: &pb::DecideApprovalResponse) -> Verdict {
    match Decided::of(approve, response) {
        Decided::Applied { approved: true } => Verdict::Approved,
        Decided::Applied { approved: false } => Verdict::Rejected,
        Decided::Expired { .. } => Verdict::Expired,
        Decided::AlreadyDecided {
            resolution: "timeout",
        } => Verdict::TimedOut,
        Decided::AlreadyDecided { .. } | Decided::NotFound => Verdict::DecidedElsewhere,
    }
}

/// The TUI during one turn.
pub struct TuiFront<'t> {
    pub tui: &'t mut Tui,
}

impl Front for TuiFront<'_> {
    fn accepted(&mut self, accepted: &pb::TurnAccepted) {
        self.tui.watch.saw_stream(&accepted.stream_id);
        if accepted.queued_ahead > 0 {
            let text = self.tui.app.t("notice.busy", &[]);
            self.tui.app.note(&text, false);
        }
    }

    fn event(&mut self, event: &pb::SessionEvent) {
        self.tui.app.apply(event);
        self.tui.watch.saw(event.seq);
        self.tui.dirty = true;
    }

    async fn interrupted(&mut self) {
        loop {
            let wait = self.tui.draw_throttled();
            tokio::select! {
                event = self.tui.keys.recv() => {
                    let Some(event) = event else {
                        return std::future::pending().await;
                    };
                    match self.tui.input(event) {
                        Key::Interrupt => return,
                        // A line sent during a turn waits in the composer.
                        Key::Send(text) => self.tui.app.composer.text = text,
                        // Sessions are switched between turns.
                        Key::Resume(_) | Key::Nothing => {}
                    }
                }
                () = tokio::time::sleep(wait.unwrap_or(Duration::from_secs(3600))), if wait.is_some() => {}
            }
        }
    }

    async fn ask(&mut self, approval: &pb::PendingApproval) -> Answer {
        if approval.channel != CHANNEL {
            let channel = render::one_line(&approval.channel, 40);
            let text = self
                .tui
                .app
                .t("approval.awaiting_other_channel", &[("channel", &channel)]);
            self.tui.app.note(&text, false);
            return Answer::Skip;
        }
        self.tui.app.open_card(approval.clone());
        loop {
            let now = self.tui.draw_now();
            let Some(card) = &self.tui.app.card else {
                return Answer::Reject;
            };
            let arms_at = card.arms_at().unwrap_or(now);
            let event = tokio::select! {
                event = self.tui.keys.recv() => event,
                () = tokio::time::sleep_until(arms_at.into()), if arms_at > now => continue,
            };
            // No terminal to read from any more: send nothing; the hub's timeout decides.
            let Some(event) = event else {
                return std::future::pending().await;
            };
            match self.tui.app.card_event(&event, Instant::now()) {
                CardInput::Decided(approve) => {
                    self.tui.app.verdict(Verdict::Sending);
                    self.tui.draw_now();
                    return if approve {
                        Answer::Approve
                    } else {
                        Answer::Reject
                    };
                }
                CardInput::NoCard => return Answer::Reject,
                CardInput::Swallowed => {}
            }
        }
    }

    fn resolved_elsewhere(&mut self, _: &pb::PendingApproval) {
        self.tui.app.verdict(Verdict::DecidedElsewhere);
        self.tui.dirty = true;
    }

    fn cancelling(&mut self) {
        let text = self.tui.app.t("chat.cancelling", &[]);
        self.tui.app.say(Who::Notice, &text);
        self.tui.dirty = true;
    }

    fn cancel_failed(&mut self, error: &CallError) {
        self.tui.report(error);
    }

    fn decided(
        &mut self,
        _: &pb::PendingApproval,
        approve: bool,
        response: &pb::DecideApprovalResponse,
    ) {
        let verdict = verdict_of(approve, response);
        self.tui.app.verdict(verdict);
        self.tui.dirty = true;
    }

    fn decision_failed(&mut self, error: CallError, _: Option<&FeedError>) -> bool {
        // The hub's verdict is unknown: the card closes rather than claim one.
        self.tui.app.card = None;
        self.tui.report(&error);
        true
    }
}
