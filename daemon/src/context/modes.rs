//! The conversation windows of the hub's agents, one per `[agent] context` mode: what the model
//! sees of a session before every model call (the agent's [`ConversationWindow`] seam).
//!
//! Invariants:
//! - Both windows only choose what the model sees; the store keeps every message (the recorder
//!   writes each one as before).
//! - [`SlidingWindow`] is pure: the last `window_size` messages, cut where a window may start
//!   ([`sliding_window_start`]).
//! - [`SummarizingWindow`] works on the full stored history (its agent is built with every stored
//!   message, so history indices are stored message ids, as `removed_message_count` needs), calls
//!   the agent's own model through [`model_window`] with the turn's cancellation, and writes the
//!   agent record with the new conversation manager state whenever it changed. Its std lock is
//!   never held across an await or a store write. When a summary fails, the agent falls back to
//!   the sliding view (see `crate::agent`).

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::agent::{ConversationWindow, WindowError};
use crate::context::{SummaryCall, model_window, sliding_window_start};
use crate::message::Message;
use crate::model::Model;
use crate::store::store_io;
use crate::store::{ContextMode, SessionAgent, SessionStore, now_utc};

/// The last `window_size` messages of the history, never splitting a toolUse from its result.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlidingWindow {
    window_size: usize,
}

impl SlidingWindow {
    pub(crate) fn new(window_size: usize) -> Self {
        Self { window_size }
    }

    fn cut(&self, history: &[Message]) -> Vec<Message> {
        history[sliding_window_start(history, self.window_size)..].to_vec()
    }
}

#[async_trait]
impl ConversationWindow for SlidingWindow {
    async fn view(
        &self,
        history: &[Message],
        _cancel: &CancellationToken,
    ) -> Result<Vec<Message>, WindowError> {
        Ok(self.cut(history))
    }

    fn fallback(&self, history: &[Message]) -> Vec<Message> {
        self.cut(history)
    }

    /// Memory keeps at most about twice the window: once the held history passes that, everything
    /// before the window of `2 × window_size` goes (a pair-safe start at a user message, so every
    /// later window is cut from the same messages as before).
    fn forgettable(&self, history: &[Message]) -> usize {
        let keep = self.window_size.saturating_mul(2).max(1);
        if history.len() <= keep {
            return 0;
        }
        sliding_window_start(history, keep)
    }
}

/// The recorded summary, then the recent messages; older messages are summarized by the agent's
/// model once the window has to move past what the summary covers.
pub(crate) struct SummarizingWindow {
    model: Arc<dyn Model>,
    store: Arc<dyn SessionStore>,
    session_id: String,
    window_size: usize,
    /// The agent record as last written (its conversation manager state is the window's state).
    record: Mutex<SessionAgent>,
}

impl std::fmt::Debug for SummarizingWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummarizingWindow")
            .field("model", &self.model.name())
            .field("session_id", &self.session_id)
            .field("window_size", &self.window_size)
            .finish()
    }
}

impl SummarizingWindow {
    /// The window of `session_id`'s agent, whose stored record is `record`; the agent's history
    /// must hold every stored message from id 0.
    pub(crate) fn new(
        model: Arc<dyn Model>,
        store: Arc<dyn SessionStore>,
        session_id: impl Into<String>,
        window_size: usize,
        record: SessionAgent,
    ) -> Self {
        Self {
            model,
            store,
            session_id: session_id.into(),
            window_size,
            record: Mutex::new(record),
        }
    }

    /// Keeps `state` and writes the agent record with it (synchronously, like the recorder's
    /// message writes on the turn's task, through [`store_io`]). A failed write is logged: the window still holds the
    /// state, and a later restore recomputes what the record lacks.
    fn persist(&self, state: crate::store::ConversationManagerState) {
        let record = {
            let mut record = self.record.lock().unwrap_or_else(PoisonError::into_inner);
            record.conversation_manager_state = state;
            record.updated_at = now_utc();
            record.clone()
        };
        if let Err(error) = store_io(|| self.store.update_agent(&self.session_id, &record)) {
            warn!(session_id = %self.session_id, "cannot record the conversation summary: {error}");
        }
    }
}

#[async_trait]
impl ConversationWindow for SummarizingWindow {
    async fn view(
        &self,
        history: &[Message],
        cancel: &CancellationToken,
    ) -> Result<Vec<Message>, WindowError> {
        let state = self
            .record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .conversation_manager_state
            .clone();
        let call = SummaryCall::new(self.model.as_ref(), cancel.clone());
        let window = model_window(
            ContextMode::Summarize,
            history,
            &state,
            self.window_size,
            &call,
        )
        .await
        .map_err(|e| WindowError(e.to_string()))?;
        if window.state_changed {
            self.persist(window.state);
        }
        Ok(window.messages)
    }

    fn fallback(&self, history: &[Message]) -> Vec<Message> {
        history[sliding_window_start(history, self.window_size)..].to_vec()
    }
}
