//! Approval cards shown in the chat ("presentations"): which token names which approval, on which
//! message, issued by which process epoch, and what became of it. Persisted so a restarted channel
//! can edit the cards an earlier one left on screen.
//!
//! Invariants: a token is random (96 bits) and issued once; a card's callback data is
//! `v1:<token>:a|r`, well under Telegram's 64 bytes; only a `Shown` card of the current epoch can
//! lead to an approval; at most [`MAX_KEPT`] ended cards are kept, oldest dropped first.

use serde::{Deserialize, Serialize};

use super::files::{FORMAT_VERSION, StateError, read_json, write_json};
use super::records::StatePaths;

/// Ended cards kept for reference (the live ones are always kept).
pub const MAX_KEPT: usize = 200;

/// What became of a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardState {
    /// On screen with its buttons.
    Shown,
    /// The hub resolved the approval; the card shows the outcome.
    Ended,
    /// A later process replaced it with a fresh card, or the approval is gone.
    Superseded,
}

/// One card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Presentation {
    pub token: String,
    pub approval_id: String,
    pub session_id: String,
    pub chat_id: i64,
    pub message_id: i64,
    /// The process epoch that issued the token.
    pub epoch: String,
    pub state: CardState,
    /// The outcome line the card was edited to; empty while shown.
    #[serde(default)]
    pub outcome: String,
}

/// The file: every card this chat has seen lately.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresentationLog {
    pub version: u32,
    pub cards: Vec<Presentation>,
}

impl PresentationLog {
    /// Reads the log (empty when none).
    pub fn load(paths: &StatePaths) -> Result<Self, StateError> {
        Ok(read_json(&paths.presentations)?.unwrap_or_default())
    }

    /// Writes the log, trimming old ended cards.
    pub fn save(&mut self, paths: &StatePaths) -> Result<(), StateError> {
        self.version = FORMAT_VERSION;
        let ended = self
            .cards
            .iter()
            .filter(|c| c.state != CardState::Shown)
            .count();
        let mut drop = ended.saturating_sub(MAX_KEPT);
        self.cards.retain(|c| {
            if drop > 0 && c.state != CardState::Shown {
                drop -= 1;
                false
            } else {
                true
            }
        });
        write_json(&paths.presentations, self)
    }

    /// The card with this token.
    pub fn by_token(&self, token: &str) -> Option<&Presentation> {
        self.cards.iter().find(|c| c.token == token)
    }

    /// Ends the card with this token if it is still shown; returns it as it was then.
    pub fn end(&mut self, token: &str, state: CardState, outcome: &str) -> Option<Presentation> {
        let card = self
            .cards
            .iter_mut()
            .find(|c| c.token == token && c.state == CardState::Shown)?;
        let before = card.clone();
        card.state = state;
        outcome.clone_into(&mut card.outcome);
        Some(before)
    }
}

/// A button's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tap {
    Approve,
    Reject,
}

/// The callback data of a card's button.
pub fn callback_data(token: &str, tap: Tap) -> String {
    let letter = match tap {
        Tap::Approve => 'a',
        Tap::Reject => 'r',
    };
    format!("v1:{token}:{letter}")
}

/// Reads callback data; anything but `v1:<24 hex>:a|r` is `None`.
pub fn parse_callback_data(data: &str) -> Option<(&str, Tap)> {
    let rest = data.strip_prefix("v1:")?;
    let (token, letter) = rest.split_once(':')?;
    let tap = match letter {
        "a" => Tap::Approve,
        "r" => Tap::Reject,
        _ => return None,
    };
    let well_formed = token.len() == TOKEN_HEX_LEN
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    well_formed.then_some((token, tap))
}

const TOKEN_HEX_LEN: usize = 24;

/// A fresh random token or epoch (96 bits, hex).
pub fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; TOKEN_HEX_LEN / 2];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness: {e}"))?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn callback_data_round_trips_and_refuses_anything_else() {
        let token = random_token().unwrap();
        let data = callback_data(&token, Tap::Approve);
        assert!(data.len() <= 64);
        assert_eq!(
            parse_callback_data(&data),
            Some((token.as_str(), Tap::Approve))
        );
        for bad in [
            "",
            "v1::a",
            "v2:0123456789abcdef01234567:a",
            "v1:0123456789abcdef01234567:x",
            "v1:0123456789ABCDEF01234567:a",
            "v1:0123456789abcdef0123456:a",
            "v1:0123456789abcdef01234567:a:a",
        ] {
            assert_eq!(parse_callback_data(bad), None, "{bad}");
        }
    }
}
