//! The conversation windows of the hub's agents, one per `[agent] context` mode: what the model
//! sees of a session before every model call (the agent's [`ConversationWindow`] seam).
//!
//! Invariants:
//! - Both windows only choose what the model sees; the store keeps every message (the recorder
//!   writes each one as before).
//! - [`SlidingWindow`] is pure: the last `window_size` messages, cut where a window may start
//!   ([`sliding_window_start`]).
//! - [`SummarizingWindow`] works on the messages its agent holds: the agent's history position
//!   `p` is stored message `base + p` (`base`: the stored id the agent was restored from), so
//!   `removed_message_count` keeps counting stored messages. Between turns it lets the agent
//!   forget what the summary covers and what lies before twice the window
//!   ([`ConversationWindow::forgettable`]), so memory holds about twice the window; a summary
//!   that has to fold in messages no longer held reads them from the store for that call only.
//!   It calls the agent's own model through [`summarizing_window`] with the turn's cancellation
//!   (over the agent's shared messages, so its view shares them too), and writes the agent
//!   record with the new conversation manager state whenever it changed. Its std
//!   lock is never held across an await or a store write. When a summary fails, the agent falls
//!   back to the sliding view (see `crate::agent`).

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::agent::{ConversationWindow, WindowError};
use crate::context::sliding::is_clean_start;
use crate::context::{
    SummaryCall, recorded_summary_window, sliding_window_start, summarizing_window, summary_span,
};
use crate::message::Message;
use crate::model::Model;
use crate::store::store_io;
use crate::store::{
    ConversationManagerState, DEFAULT_AGENT_ID, SessionAgent, SessionStore, now_utc,
};

/// How many of the oldest held messages lie before twice the window: 0 while the history is
/// within it, else a pair-safe start at a user message, so every later window is cut from the
/// same messages as before.
fn beyond_twice_the_window(history: &[Arc<Message>], window_size: usize) -> usize {
    let keep = window_size.saturating_mul(2).max(1);
    if history.len() <= keep {
        return 0;
    }
    sliding_window_start(history, keep)
}

/// The last `window_size` messages of the history, never splitting a toolUse from its result.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlidingWindow {
    window_size: usize,
}

impl SlidingWindow {
    pub(crate) fn new(window_size: usize) -> Self {
        Self { window_size }
    }

    fn cut(&self, history: &[Arc<Message>]) -> Vec<Arc<Message>> {
        history[sliding_window_start(history, self.window_size)..].to_vec()
    }
}

#[async_trait]
impl ConversationWindow for SlidingWindow {
    async fn view(
        &self,
        history: &[Arc<Message>],
        _first: usize,
        _cancel: &CancellationToken,
    ) -> Result<Vec<Arc<Message>>, WindowError> {
        Ok(self.cut(history))
    }

    fn tail_start(&self, history: &[Arc<Message>], _first: usize) -> Option<usize> {
        Some(sliding_window_start(history, self.window_size))
    }

    fn fallback(&self, history: &[Arc<Message>]) -> Vec<Arc<Message>> {
        self.cut(history)
    }

    /// Memory keeps at most about twice the window: once the held history passes that, everything
    /// before the window of `2 × window_size` goes (a pair-safe start at a user message, so every
    /// later window is cut from the same messages as before).
    fn forgettable(&self, history: &[Arc<Message>], _first: usize) -> usize {
        beyond_twice_the_window(history, self.window_size)
    }
}

/// The recorded summary, then the recent messages; older messages are summarized by the agent's
/// model once the window has to move past what the summary covers.
pub(crate) struct SummarizingWindow {
    model: Arc<dyn Model>,
    store: Arc<dyn SessionStore>,
    session_id: String,
    window_size: usize,
    /// The stored id of the agent's history position 0 (the recorder's offset).
    base: usize,
    /// The agent record as last written (its conversation manager state is the window's state).
    record: Mutex<SessionAgent>,
}

impl std::fmt::Debug for SummarizingWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummarizingWindow")
            .field("model", &self.model.name())
            .field("session_id", &self.session_id)
            .field("window_size", &self.window_size)
            .field("base", &self.base)
            .finish()
    }
}

impl SummarizingWindow {
    /// The window of `session_id`'s agent, whose stored record is `record`; the agent's history
    /// position 0 is stored message `base`, and it starts holding where
    /// [`crate::context::summarizing_window_start_in_tail`] (or an earlier clean start) says.
    pub(crate) fn new(
        model: Arc<dyn Model>,
        store: Arc<dyn SessionStore>,
        session_id: impl Into<String>,
        window_size: usize,
        base: usize,
        record: SessionAgent,
    ) -> Self {
        Self {
            model,
            store,
            session_id: session_id.into(),
            window_size,
            base,
            record: Mutex::new(record),
        }
    }

    fn state(&self) -> ConversationManagerState {
        self.record
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .conversation_manager_state
            .clone()
    }

    /// Keeps `state` and writes the agent record with it (synchronously, like the recorder's
    /// message writes on the turn's task, through [`store_io`]). A failed write is logged: the window still holds the
    /// state, and a later restore recomputes what the record lacks.
    fn persist(&self, state: ConversationManagerState) {
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

    /// The stored messages `from..to`, read for a summary that folds in messages no longer held;
    /// an error unless every one of them is there.
    fn read_stored(&self, from: usize, to: usize) -> Result<Vec<Arc<Message>>, WindowError> {
        let missing = || {
            WindowError(format!(
                "stored messages {from} to {to} of session {} are not all there",
                self.session_id
            ))
        };
        let before = u64::try_from(to).map_err(|_| missing())?;
        let stored = store_io(|| {
            self.store.list_messages_before(
                &self.session_id,
                DEFAULT_AGENT_ID,
                Some(before),
                to - from,
            )
        })
        .map_err(|error| WindowError(error.to_string()))?;
        let complete = stored.len() == to - from
            && stored
                .iter()
                .zip(from..)
                .all(|(message, id)| u64::try_from(id).is_ok_and(|id| message.message_id == id));
        if !complete {
            return Err(missing());
        }
        Ok(stored
            .into_iter()
            .map(|message| Arc::new(message.to_message().for_model()))
            .collect())
    }
}

#[async_trait]
impl ConversationWindow for SummarizingWindow {
    async fn view(
        &self,
        history: &[Arc<Message>],
        first: usize,
        cancel: &CancellationToken,
    ) -> Result<Vec<Arc<Message>>, WindowError> {
        let state = self.state();
        let mut from = self.base.saturating_add(first);
        let mut messages = Cow::Borrowed(history);
        // A summary that folds in messages no longer held reads them for this call; a recorded
        // start that turns out not to fit them is summarized anew from the first message, so
        // this reads at most twice, each time further back.
        while let Some(span) = summary_span(&messages, from, &state, self.window_size)
            && span.start < from
        {
            let mut older = self.read_stored(span.start, from)?;
            older.extend_from_slice(&messages);
            messages = Cow::Owned(older);
            from = span.start;
        }
        let call = SummaryCall::new(self.model.as_ref(), cancel.clone());
        let window = summarizing_window(&messages, from, &state, self.window_size, &call)
            .await
            .map_err(|e| WindowError(e.to_string()))?;
        if window.state_changed {
            self.persist(window.state);
        }
        Ok(window.messages)
    }

    fn fallback(&self, history: &[Arc<Message>]) -> Vec<Arc<Message>> {
        history[sliding_window_start(history, self.window_size)..].to_vec()
    }

    /// What the summary covers, and what lies before twice the window (a later summary reads it
    /// back from the store if it still has to fold it in): whichever ends later.
    fn forgettable(&self, history: &[Arc<Message>], first: usize) -> usize {
        let state = self.state();
        let from = self.base.saturating_add(first);
        let covered = usize::try_from(state.removed_message_count)
            .ok()
            .filter(|_| state.summary_message.is_some())
            .and_then(|removed| removed.checked_sub(from))
            .filter(|&at| at < history.len() && is_clean_start(history, at))
            .unwrap_or(0);
        covered.max(beyond_twice_the_window(history, self.window_size))
    }

    fn as_recorded(&self, history: &[Arc<Message>], first: usize) -> Vec<Arc<Message>> {
        recorded_summary_window(history, self.base.saturating_add(first), &self.state()).messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tests_histories::{tool_call, tool_turn, turn};
    use crate::message::Message;

    /// Histories of plain turns, tool turns and one long chain of calls, each ending on what a
    /// model call answers (a prompt, or tool results).
    fn histories() -> Vec<Vec<Message>> {
        let mut mixed: Vec<Message> = (0..6)
            .flat_map(|n| if n % 2 == 0 { turn(n) } else { tool_turn(n, 2) })
            .collect();
        mixed.push(Message::user_text("now"));
        let mut chain = tool_turn(0, 12);
        chain.pop();
        let mut open = turn(0);
        open.extend(tool_turn(1, 1));
        open.push(Message::user_text("and"));
        open.push(tool_call("t9"));
        vec![mixed, chain, open, vec![Message::user_text("only")]]
    }

    #[tokio::test]
    async fn a_sliding_tail_is_the_view() {
        let cancel = CancellationToken::new();
        for history in histories() {
            for size in [0, 1, 2, 3, 5, 8, 40] {
                let window = SlidingWindow::new(size);
                let shared: Vec<Arc<Message>> = history.iter().cloned().map(Arc::new).collect();
                let start = window.tail_start(&shared, 0).unwrap();
                let view = window.view(&shared, 0, &cancel).await.unwrap();
                assert_eq!(shared[start..], view[..], "window {size}");
                assert!(
                    shared[start..]
                        .iter()
                        .zip(&view)
                        .all(|(a, b)| Arc::ptr_eq(a, b)),
                    "the view shares the history's messages"
                );
            }
        }
    }
}
