//! How `tau chat` decorates its output: dim chrome, a red `✗`, a yellow approval title, or nothing
//! at all.
//!
//! Invariants: colour is used only when stdout is a terminal, `NO_COLOR` is unset or empty
//! (<https://no-color.org>) and `TERM` is not `dumb`; with colour off every method returns its
//! text unchanged, so what a script reads from a pipe never contains an escape sequence.

use tau_api::env::Env;

/// The terminal's text decoration, on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    color: bool,
}

const RESET: &str = "\x1b[0m";

impl Style {
    /// Colour on or off, as given.
    pub const fn new(color: bool) -> Self {
        Self { color }
    }

    /// Decides from the environment and whether stdout is a terminal.
    pub fn detect(env: &Env, stdout_is_terminal: bool) -> Self {
        let no_color = env.get("NO_COLOR").is_some_and(|value| !value.is_empty());
        let dumb = env.get("TERM") == Some("dumb");
        Self::new(stdout_is_terminal && !no_color && !dumb)
    }

    /// Whether colour (and so escape sequences) is on.
    pub fn is_on(self) -> bool {
        self.color
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.color && !text.is_empty() {
            format!("\x1b[{code}m{text}{RESET}")
        } else {
            text.to_owned()
        }
    }

    /// Secondary chrome: notices about the hub, throttling, tool progress.
    pub fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    /// A refusal or a failure.
    pub fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    /// Something that went well (an approval applied).
    pub fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    /// Something that needs the person's attention (the approval title, a stop notice).
    pub fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }

    /// Emphasis (the ready banner, headers).
    pub fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().copied().collect()
    }

    #[test]
    fn colour_needs_a_terminal_and_no_no_color() {
        let on = Style::new(true);
        let off = Style::new(false);
        assert_eq!(Style::detect(&env(&[]), true), on);
        assert_eq!(Style::detect(&env(&[]), false), off);
        assert_eq!(Style::detect(&env(&[("NO_COLOR", "1")]), true), off);
        assert_eq!(Style::detect(&env(&[("NO_COLOR", "")]), true), on);
        assert_eq!(Style::detect(&env(&[("TERM", "dumb")]), true), off);
    }

    #[test]
    fn without_colour_text_is_unchanged() {
        let plain = Style::new(false);
        for text in ["x", "✗ lamp: not approved", ""] {
            assert_eq!(plain.dim(text), text);
            assert_eq!(plain.red(text), text);
            assert_eq!(plain.bold(text), text);
        }
        assert_eq!(Style::new(true).dim("x"), "\x1b[2mx\x1b[0m");
        assert_eq!(Style::new(true).dim(""), "");
    }
}
