//! What the TUI shows, as plain state: the conversation, the events pane, the sessions sidebar,
//! the status line, the composer and the open approval card; and how a hub event changes it.
//!
//! Invariants: every text from the hub or the model is sanitized before it is stored (so no
//! escape sequence reaches the terminal); the conversation and events panes are bounded
//! ([`MAX_ENTRIES`]) and drop their oldest lines first; state changes only through these methods,
//! which never wait on anything.

use std::collections::VecDeque;

use tau_api::i18n::Messages;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, session_event::Kind};
use tau_client::present::{Limits, Line, LineKind, Presenter};

use super::card::{Card, Verdict};
use super::input::Composer;
use crate::chat::render;

/// The most lines kept in the conversation and in the events pane.
pub const MAX_ENTRIES: usize = 5_000;

/// Who said a conversation entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    You,
    Tau,
    /// Chrome: notices, command output.
    Notice,
    Error,
}

/// One entry of the conversation pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub who: Who,
    pub text: String,
}

/// One line of the events pane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLine {
    pub text: String,
    pub error: bool,
}

/// The status line's facts.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub profile: String,
    pub role: String,
    pub context: String,
    pub hub: String,
    pub running: bool,
    /// The running tool's latest progress report, until the call ends.
    pub progress: Option<String>,
}

/// The whole screen's state.
pub struct App {
    pub messages: Messages,
    pub lang: Lang,
    pub conversation: VecDeque<Entry>,
    /// The reply being streamed (its text grows until the turn ends).
    pub streaming: Option<String>,
    pub events: VecDeque<EventLine>,
    pub sessions: Vec<pb::SessionInfo>,
    pub session_id: String,
    pub status: Status,
    pub composer: Composer,
    pub card: Option<Card>,
    /// Approvals of this session answerable here that wait behind the open card, oldest first
    /// (filled only from the hub's snapshot and live requests, see `pending_cards.rs`).
    pub waiting: VecDeque<pb::PendingApproval>,
    /// Lines the conversation is scrolled up by (0: follow the end).
    pub scroll: u16,
    /// The configured turn limits, for the stop lines whose event does not name them.
    pub limits: Limits,
}

impl App {
    pub fn new(messages: Messages, lang: Lang) -> Self {
        Self {
            messages,
            lang,
            conversation: VecDeque::new(),
            streaming: None,
            events: VecDeque::new(),
            sessions: Vec::new(),
            session_id: String::new(),
            status: Status::default(),
            composer: Composer::default(),
            card: None,
            waiting: VecDeque::new(),
            scroll: 0,
            limits: Limits {
                max_turns: 0,
                max_total_tokens: None,
            },
        }
    }

    /// A chrome text in the UI language.
    pub fn t(&self, key: &str, args: &tau_api::i18n::Args<'_>) -> String {
        self.messages.t_or_key(key, self.lang, args)
    }

    /// Adds a conversation entry (sanitized).
    pub fn say(&mut self, who: Who, text: &str) {
        push_bounded(
            &mut self.conversation,
            Entry {
                who,
                text: render::sanitize(text),
            },
        );
    }

    /// Adds an events-pane line (one line, sanitized).
    pub fn note(&mut self, text: &str, error: bool) {
        let text = render::one_line(text, 300);
        push_bounded(&mut self.events, EventLine { text, error });
    }

    /// The person sent `text` as a turn.
    pub fn turn_started(&mut self, text: &str) {
        self.say(Who::You, text);
        self.streaming = Some(String::new());
        self.status.running = true;
    }

    /// Ends the streamed reply (with `fallback` when nothing streamed).
    pub fn turn_finished(&mut self, fallback: &str) {
        let text = self.streaming.take().unwrap_or_default();
        let text = if text.trim().is_empty() {
            fallback
        } else {
            &text
        };
        if !text.trim().is_empty() {
            self.say(Who::Tau, text);
        }
        self.status.running = false;
        self.status.progress = None;
    }

    /// The presenter in the UI language, with the configured limits.
    pub fn presenter(&self) -> Presenter<'_> {
        Presenter::new(&self.messages, self.lang).with_limits(self.limits)
    }

    /// Applies one event of the current session's turn: the reply and the status change here;
    /// every line is the presenter's ([`App::show`]), the one `tau chat` prints.
    pub fn apply(&mut self, event: &pb::SessionEvent) {
        let Some(kind) = &event.kind else { return };
        match kind {
            Kind::TextDelta(delta) => {
                self.streaming
                    .get_or_insert_with(String::new)
                    .push_str(&render::sanitize(&delta.text));
            }
            Kind::ToolCall(_) => self.status.progress = None,
            Kind::OutputDiscarded(_) => self.streaming = Some(String::new()),
            Kind::TurnEnded(end) => self.turn_finished(&end.text),
            Kind::RoleSwitched(switched) => {
                self.status.role = render::one_line(&switched.role, 40);
            }
            _ => {}
        }
        for line in self.presenter().live(kind) {
            self.show(line);
        }
    }

    /// Shows one line of the presentation: a tool's progress in the status line, the rest in the
    /// events pane, and a stop in the conversation too.
    pub fn show(&mut self, line: Line) {
        match line.kind {
            LineKind::Progress => self.status.progress = Some(line.text),
            LineKind::Stopped => {
                self.say(Who::Notice, &line.text);
                self.note(&line.text, line.error);
            }
            _ => self.note(&line.text, line.error),
        }
    }

    /// The session above (`Up`) or below (`Down`) the current one in the sidebar.
    pub fn neighbour(&self, code: crossterm::event::KeyCode) -> Option<String> {
        use crossterm::event::KeyCode;
        let at = self
            .sessions
            .iter()
            .position(|s| s.session_id == self.session_id);
        let next = match (code, at) {
            (KeyCode::Up, Some(at)) => at.checked_sub(1)?,
            (KeyCode::Down, Some(at)) => at + 1,
            (KeyCode::Up | KeyCode::Down, None) => 0,
            _ => return None,
        };
        self.sessions.get(next).map(|s| s.session_id.clone())
    }

    /// Opens the card for `approval`.
    pub fn open_card(&mut self, approval: pb::PendingApproval) {
        self.card = Some(Card::new(approval));
    }

    /// Sets the open card's verdict. `Sending` keeps the card up (taking no keys) until the hub
    /// answers; any other verdict folds the card into the conversation as one line (verdict, tool,
    /// tier) and the events pane, and closes it, so the next key is the composer's.
    pub fn verdict(&mut self, verdict: Verdict) {
        if verdict == Verdict::Sending {
            if let Some(card) = &mut self.card {
                card.verdict = Some(verdict);
            }
            return;
        }
        let Some(card) = self.card.take() else { return };
        let tool = render::one_line(&card.approval.tool, 60);
        let text = super::card_view::verdict_text(&self.messages, self.lang, verdict, &tool);
        let tier = tau_api::tiers::tier_text(card.approval.tier);
        self.say(Who::Notice, &format!("{text} · tier {tier}"));
        self.note(&text, verdict != Verdict::Approved);
    }
}

fn push_bounded<T>(queue: &mut VecDeque<T>, item: T) {
    if queue.len() >= MAX_ENTRIES {
        queue.pop_front();
    }
    queue.push_back(item);
}
