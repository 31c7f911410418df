//! The conversation manager a session was recorded under ([`ContextMode`], `[agent] context`), and
//! the error of opening it under the other one ([`SessionContextMismatch`]); the check itself is
//! in `context_check`. Imports nothing else of the store.
//!
//! Invariant: the recorded manager name is the Strands class name, so sessions written by the
//! Python original open here too.
use serde::{Deserialize, Serialize};

/// `[agent] context`: how the model's window over a long session is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextMode {
    /// Keep the last `window_size` messages.
    Sliding,
    /// Summarize older messages, keep the recent ones.
    Summarize,
}

impl ContextMode {
    /// The value as written in tau.toml.
    pub fn as_str(self) -> &'static str {
        match self {
            ContextMode::Sliding => "sliding",
            ContextMode::Summarize => "summarize",
        }
    }

    /// The manager name recorded in `conversation_manager_state.__name__` (the Strands class name,
    /// so sessions written by the Python original open here too).
    pub fn manager_name(self) -> &'static str {
        match self {
            ContextMode::Sliding => "SlidingWindowConversationManager",
            ContextMode::Summarize => "SummarizingConversationManager",
        }
    }

    /// The mode a recorded manager name stands for.
    pub fn from_manager_name(name: &str) -> Option<Self> {
        [ContextMode::Sliding, ContextMode::Summarize]
            .into_iter()
            .find(|mode| mode.manager_name() == name)
    }
}

impl std::fmt::Display for ContextMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A session recorded under another conversation manager than the one configured now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Session {session_id} was recorded with a different [agent] context setting; set it back to {recorded} or start a new session"
)]
pub struct SessionContextMismatch {
    pub session_id: String,
    /// The recorded mode (`sliding`, `summarize`), or the raw manager name if tau does not know it.
    pub recorded: String,
}
