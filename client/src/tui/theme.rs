//! Colours of the TUI, or none at all when `NO_COLOR` is set (non-empty) or `TERM` is `dumb`.
//!
//! Invariant: with colour off no style sets a colour (modifiers such as reverse stay, so focus is
//! still visible).

use ratatui::style::{Color, Modifier, Style};
use tau_api::env::Env;

/// The TUI's palette switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// Colour unless `NO_COLOR` is set (non-empty) or `TERM` is `dumb` in `env`.
    pub fn detect(env: &Env) -> Self {
        let no_color = env.get("NO_COLOR").is_some_and(|value| !value.is_empty());
        Self {
            color: !no_color && env.get("TERM") != Some("dumb"),
        }
    }

    pub fn dim(self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default().add_modifier(Modifier::DIM)
        }
    }

    pub fn warning(self) -> Style {
        if self.color {
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        }
    }

    pub fn error(self) -> Style {
        if self.color {
            Style::default().fg(Color::Red)
        } else {
            Style::default()
        }
    }

    pub fn accent(self) -> Style {
        if self.color {
            Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::BOLD)
        }
    }
}
