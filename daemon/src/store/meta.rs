//! `meta.json`: what tau itself records about a session beside the Strands records: channel,
//! profile, title, the role it last ran on, the context mode, and the compaction links.
//!
//! Invariants: the record carries `"v"`; every field is optional so a partly written history (a
//! session created before its first message) reads; unknown keys are ignored. A title is at most
//! [`TITLE_MAX_CHARS`] characters (characters, not bytes) on one line.

use serde::{Deserialize, Serialize};

use super::context_mode::ContextMode;
use crate::store::records::{FORMAT_VERSION, format_version};

/// The longest title, in characters.
pub const TITLE_MAX_CHARS: usize = 60;

/// tau's metadata of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    #[serde(default = "format_version")]
    pub v: u32,
    /// The channel the session was started from (`terminal`, `telegram`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The profile it ran under (`home`, `travel`, `sport`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The first user message, cut by [`title_from`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The model role the session last ran on; `--resume` comes back on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The `[agent] context` setting the session was recorded with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextMode>,
    /// The session this one was compacted from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_from: Option<String>,
    /// The session this one was compacted into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted_to: Option<String>,
}

impl Default for SessionMeta {
    fn default() -> Self {
        Self {
            v: FORMAT_VERSION,
            channel: None,
            profile: None,
            title: None,
            role: None,
            context: None,
            compacted_from: None,
            compacted_to: None,
        }
    }
}

impl SessionMeta {
    /// Sets the title from the first user message unless one is set already; returns whether it
    /// changed.
    pub fn set_title_if_missing(&mut self, first_user_text: &str) -> bool {
        if self.title.as_deref().is_some_and(|t| !t.is_empty()) {
            return false;
        }
        let title = title_from(first_user_text);
        if title.is_empty() {
            return false;
        }
        self.title = Some(title);
        true
    }
}

/// A title from a user message: whitespace runs (newlines included) become one space, control
/// characters are dropped, and the result is cut to [`TITLE_MAX_CHARS`] characters.
pub fn title_from(text: &str) -> String {
    let mut title = String::new();
    let mut chars = 0usize;
    let mut pending_space = false;
    for ch in text.chars() {
        if ch.is_whitespace() {
            pending_space = !title.is_empty();
            continue;
        }
        if ch.is_control() {
            continue;
        }
        if pending_space {
            if chars + 1 >= TITLE_MAX_CHARS {
                break;
            }
            title.push(' ');
            chars += 1;
            pending_space = false;
        }
        if chars == TITLE_MAX_CHARS {
            break;
        }
        title.push(ch);
        chars += 1;
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn titles_are_cut_by_characters_not_bytes() {
        let text = "ğ".repeat(100);
        let title = title_from(&text);
        assert_eq!(title.chars().count(), TITLE_MAX_CHARS);
        assert_eq!(title, "ğ".repeat(TITLE_MAX_CHARS));
        assert_eq!(title_from(&"a".repeat(61)), "a".repeat(60));
        assert_eq!(title_from("short"), "short");
    }

    #[test]
    fn titles_are_one_line() {
        assert_eq!(
            title_from("  turn on\n\tthe   lights \n"),
            "turn on the lights"
        );
        assert_eq!(title_from("a\u{1b}[31mb"), "a[31mb");
        assert_eq!(title_from(" \n "), "");
    }

    #[test]
    fn a_space_never_ends_a_cut_title() {
        let text = format!("{} tail", "x".repeat(59));
        assert_eq!(title_from(&text), "x".repeat(59));
    }

    #[test]
    fn the_title_is_only_set_once() {
        let mut meta = SessionMeta::default();
        assert!(meta.set_title_if_missing("first question"));
        assert!(!meta.set_title_if_missing("second question"));
        assert_eq!(meta.title.as_deref(), Some("first question"));
    }

    #[test]
    fn meta_round_trips_with_version_and_ignores_unknown_keys() {
        let meta = SessionMeta {
            channel: Some("terminal".into()),
            profile: Some("home".into()),
            title: Some("t".into()),
            role: Some("brain".into()),
            context: Some(ContextMode::Summarize),
            compacted_from: Some("a".into()),
            compacted_to: None,
            ..SessionMeta::default()
        };
        let mut value = serde_json::to_value(&meta).unwrap();
        assert_eq!(value["v"], 1);
        assert_eq!(value["context"], "summarize");
        value["new_key"] = json!(true);
        assert_eq!(serde_json::from_value::<SessionMeta>(value).unwrap(), meta);
    }
}
