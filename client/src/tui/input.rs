//! The composer: the input line, its history, and multi-line paste.
//!
//! Invariants: a paste only inserts text (newlines included) and never sends; only an Enter key
//! press sends; history holds at most [`MAX_HISTORY`] lines.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// The most lines the history keeps.
pub const MAX_HISTORY: usize = 500;

/// What a key did to the composer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Typed {
    /// Nothing for the app to do.
    Edited,
    /// Enter: send this text.
    Send(String),
    /// Not a composer key.
    Other,
}

/// The input line.
#[derive(Debug, Default, Clone)]
pub struct Composer {
    pub text: String,
    history: Vec<String>,
    /// Position while browsing the history (None: editing a new line).
    browsing: Option<usize>,
}

impl Composer {
    /// A composer whose history starts with `history` (oldest first; the last
    /// [`MAX_HISTORY`] kept).
    pub fn with_history(mut history: Vec<String>) -> Self {
        if history.len() > MAX_HISTORY {
            history.drain(..history.len() - MAX_HISTORY);
        }
        Self {
            history,
            ..Self::default()
        }
    }

    /// The lines sent, oldest first.
    pub fn history(&self) -> &[String] {
        &self.history
    }

    /// A bracketed paste: inserted as it is (CR normalised to LF), never sent.
    pub fn paste(&mut self, text: &str) {
        self.text
            .push_str(&text.replace("\r\n", "\n").replace('\r', "\n"));
    }

    /// A key pressed while the composer has focus.
    pub fn key(&mut self, key: KeyEvent) -> Typed {
        if key.kind == KeyEventKind::Release {
            return Typed::Other;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char(c) if !ctrl => {
                self.text.push(c);
                Typed::Edited
            }
            KeyCode::Enter if key.modifiers.contains(KeyModifiers::ALT) => {
                self.text.push('\n');
                Typed::Edited
            }
            KeyCode::Enter => {
                let text = std::mem::take(&mut self.text);
                self.browsing = None;
                if text.trim().is_empty() {
                    return Typed::Edited;
                }
                if self.history.last() != Some(&text) {
                    if self.history.len() >= MAX_HISTORY {
                        self.history.remove(0);
                    }
                    self.history.push(text.clone());
                }
                Typed::Send(text)
            }
            KeyCode::Backspace => {
                self.text.pop();
                Typed::Edited
            }
            KeyCode::Up => {
                let at = match self.browsing {
                    Some(at) => at.saturating_sub(1),
                    None if self.history.is_empty() => return Typed::Edited,
                    None => self.history.len() - 1,
                };
                self.browsing = Some(at);
                self.text.clone_from(&self.history[at]);
                Typed::Edited
            }
            KeyCode::Down => {
                match self.browsing {
                    Some(at) if at + 1 < self.history.len() => {
                        self.browsing = Some(at + 1);
                        self.text.clone_from(&self.history[at + 1]);
                    }
                    _ => {
                        self.browsing = None;
                        self.text.clear();
                    }
                }
                Typed::Edited
            }
            _ => Typed::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn a_paste_with_newlines_never_sends() {
        let mut composer = Composer::default();
        composer.paste("y\r\nrm -rf /\n");
        assert_eq!(composer.text, "y\nrm -rf /\n");
        assert_eq!(
            composer.key(press(KeyCode::Enter)),
            Typed::Send("y\nrm -rf /\n".into())
        );
    }

    #[test]
    fn history_goes_back_and_forth() {
        let mut composer = Composer::default();
        for line in ["one", "two"] {
            composer.paste(line);
            composer.key(press(KeyCode::Enter));
        }
        composer.key(press(KeyCode::Up));
        assert_eq!(composer.text, "two");
        composer.key(press(KeyCode::Up));
        assert_eq!(composer.text, "one");
        composer.key(press(KeyCode::Down));
        assert_eq!(composer.text, "two");
        composer.key(press(KeyCode::Down));
        assert_eq!(composer.text, "");
    }

    #[test]
    fn a_stored_history_is_recalled_and_kept_bounded() {
        let stored: Vec<String> = (0..MAX_HISTORY + 3).map(|i| format!("line {i}")).collect();
        let mut composer = Composer::with_history(stored);
        assert_eq!(composer.history().len(), MAX_HISTORY);
        composer.key(press(KeyCode::Up));
        assert_eq!(composer.text, format!("line {}", MAX_HISTORY + 2));
        composer.key(press(KeyCode::Down));
        composer.paste("new");
        composer.key(press(KeyCode::Enter));
        assert_eq!(composer.history().len(), MAX_HISTORY);
        assert_eq!(composer.history().last().map(String::as_str), Some("new"));
    }
}
