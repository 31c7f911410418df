//! The approval card's state machine, pure and clock-driven (the caller passes `now`), so it is
//! tested without a terminal.
//!
//! Invariants:
//! - Nothing approves until the card is armed: [`ARMING`] of quiet after it was first drawn. Any
//!   key or paste before that is swallowed and restarts the wait, so type-ahead, a held key or a
//!   burst over mosh keeps the card unarmed however long it lasts.
//! - Focus starts on Reject: Enter activates the focused button, so a stray Enter rejects. Esc
//!   and Ctrl-C reject at any time, armed or not.
//! - A paste never decides anything; only key presses count (repeats and releases are ignored).
//! - Once a decision is taken the card takes no more keys: it shows "Sending…" until the hub's
//!   verdict, which folds it into the conversation as a line (`App::verdict`); every key after a
//!   decision is the composer's.

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tau_api::proto::v1 as pb;

/// How long the card must be shown, with no key, before it can approve.
pub const ARMING: Duration = Duration::from_millis(500);

/// The focused button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Button {
    Reject,
    Approve,
}

/// What became of the approval, as the card shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Decided here; waiting for the hub's answer.
    Sending,
    Approved,
    Rejected,
    Expired,
    TimedOut,
    DecidedElsewhere,
}

/// One open approval card.
#[derive(Debug, Clone)]
pub struct Card {
    pub approval: pb::PendingApproval,
    pub focus: Button,
    /// When the card was first drawn; `None` until then (never armed before it is seen).
    shown: Option<Instant>,
    /// The last key or paste, which restarts the arming wait.
    last_input: Option<Instant>,
    /// Lines the arguments are scrolled by.
    pub scroll: u16,
    pub verdict: Option<Verdict>,
    /// The whole card fits on the screen; when it does not, Approve cannot be reached (never
    /// approve what cannot be seen).
    pub fits: bool,
}

impl Card {
    pub fn new(approval: pb::PendingApproval) -> Self {
        Self {
            approval,
            focus: Button::Reject,
            shown: None,
            last_input: None,
            scroll: 0,
            verdict: None,
            fits: true,
        }
    }

    /// The card was drawn at `now` (only the first draw counts).
    pub fn drawn(&mut self, now: Instant) {
        self.shown.get_or_insert(now);
    }

    /// When the card arms, if it has been drawn.
    pub fn arms_at(&self) -> Option<Instant> {
        let shown = self.shown?;
        let since = self.last_input.map_or(shown, |input| input.max(shown));
        Some(since + ARMING)
    }

    /// Whether Approve can be reached at `now`.
    pub fn armed(&self, now: Instant) -> bool {
        self.fits && self.verdict.is_none() && self.arms_at().is_some_and(|at| now >= at)
    }

    /// A bracketed paste: swallowed, and the arming wait restarts.
    pub fn paste(&mut self, now: Instant) {
        self.last_input = Some(now);
    }

    /// A key; `Some(true)` approves, `Some(false)` rejects.
    pub fn key(&mut self, key: KeyEvent, now: Instant) -> Option<bool> {
        if key.kind != KeyEventKind::Press || self.verdict.is_some() {
            return None;
        }
        let ctrl_c =
            key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
        if key.code == KeyCode::Esc || ctrl_c {
            return Some(false);
        }
        if !self.armed(now) {
            self.last_input = Some(now);
            return None;
        }
        match key.code {
            KeyCode::Enter => Some(self.focus == Button::Approve),
            KeyCode::Char('y' | 'Y' | 'e' | 'E')
                if key.modifiers.is_empty() || key.modifiers == KeyModifiers::SHIFT =>
            {
                Some(true)
            }
            KeyCode::Char('n' | 'N' | 'h' | 'H') => Some(false),
            KeyCode::Tab | KeyCode::BackTab | KeyCode::Left | KeyCode::Right => {
                self.focus = match self.focus {
                    Button::Reject => Button::Approve,
                    Button::Approve => Button::Reject,
                };
                None
            }
            KeyCode::Up => {
                self.scroll = self.scroll.saturating_sub(1);
                None
            }
            KeyCode::Down => {
                self.scroll = self.scroll.saturating_add(1);
                None
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn card() -> (Card, Instant) {
        let mut card = Card::new(pb::PendingApproval {
            approval_id: "apr-1".into(),
            tool: "shell".into(),
            tier: pb::Tier::Physical as i32,
            ..Default::default()
        });
        let t0 = Instant::now();
        card.drawn(t0);
        (card, t0)
    }

    #[test]
    fn y_at_once_is_swallowed_and_y_after_the_delay_approves() {
        let (mut card, t0) = card();
        assert_eq!(card.key(press(KeyCode::Char('y')), t0), None);
        assert!(!card.armed(t0 + ARMING - Duration::from_millis(1)));
        // The swallowed key restarted the wait.
        let t1 = t0 + Duration::from_millis(300);
        assert_eq!(card.key(press(KeyCode::Char('y')), t1), None);
        assert!(!card.armed(t0 + ARMING));
        assert!(card.armed(t1 + ARMING));
        assert_eq!(card.key(press(KeyCode::Char('y')), t1 + ARMING), Some(true));
    }

    #[test]
    fn not_drawn_never_arms() {
        let card = Card::new(pb::PendingApproval::default());
        assert!(!card.armed(Instant::now() + Duration::from_secs(60)));
    }

    #[test]
    fn enter_rejects_because_focus_starts_on_reject() {
        let (mut card, t0) = card();
        assert_eq!(card.focus, Button::Reject);
        assert_eq!(card.key(press(KeyCode::Enter), t0), None, "unarmed");
        let later = t0 + Duration::from_secs(2);
        assert_eq!(card.key(press(KeyCode::Enter), later), Some(false));
    }

    #[test]
    fn tab_then_enter_approves_only_when_armed() {
        let (mut card, t0) = card();
        assert_eq!(card.key(press(KeyCode::Tab), t0), None);
        assert_eq!(card.focus, Button::Reject, "Tab is swallowed while unarmed");
        let later = t0 + Duration::from_secs(2);
        assert_eq!(card.key(press(KeyCode::Tab), later), None);
        assert_eq!(card.focus, Button::Approve);
        assert_eq!(card.key(press(KeyCode::Enter), later), Some(true));
    }

    #[test]
    fn esc_and_ctrl_c_reject_even_unarmed() {
        let (mut card, t0) = card();
        assert_eq!(card.key(press(KeyCode::Esc), t0), Some(false));
        let (mut card, t0) = self::card();
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(card.key(ctrl_c, t0), Some(false));
    }

    #[test]
    fn a_paste_restarts_arming_and_never_decides() {
        let (mut card, t0) = card();
        let t1 = t0 + Duration::from_millis(450);
        card.paste(t1);
        assert!(!card.armed(t0 + ARMING));
        assert!(card.armed(t1 + ARMING));
    }

    #[test]
    fn repeats_and_releases_are_ignored() {
        let (mut card, t0) = card();
        let later = t0 + Duration::from_secs(2);
        for kind in [KeyEventKind::Repeat, KeyEventKind::Release] {
            let mut key = press(KeyCode::Char('y'));
            key.kind = kind;
            assert_eq!(card.key(key, later), None);
        }
    }

    #[test]
    fn a_card_that_does_not_fit_never_approves_but_still_rejects() {
        let (mut card, t0) = card();
        card.fits = false;
        let later = t0 + Duration::from_secs(2);
        assert_eq!(card.key(press(KeyCode::Char('y')), later), None);
        assert_eq!(card.key(press(KeyCode::Tab), later), None);
        assert_eq!(card.focus, Button::Reject);
        assert_eq!(card.key(press(KeyCode::Esc), later), Some(false));
    }

    #[test]
    fn a_decided_card_takes_no_keys() {
        let (mut card, t0) = card();
        card.verdict = Some(Verdict::Sending);
        assert_eq!(
            card.key(press(KeyCode::Esc), t0 + Duration::from_secs(2)),
            None
        );
    }
}
