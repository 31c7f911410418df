//! [`ConversationWindow`]: the seam that turns the agent's in-memory history into the messages
//! one model call receives (a sliding window, a summary plus recent messages, …).
//!
//! Invariants: a window only chooses what the model sees; it never changes the history, which the
//! loop keeps appending to (and the [`super::HistoryObserver`] keeps storing) as before. The loop
//! asks the window before every model call, with the messages held in memory and the position of
//! the first of them in the whole history (older ones left memory when the window said it may
//! forget them), so a window that counts by position never loses its place. A window is handed
//! the history's own messages (shared, each as a model receives it) and answers with shared
//! messages too, so what the model sees is not copied. When [`ConversationWindow::view`] fails,
//! the turn goes on with [`ConversationWindow::fallback`] (pure, cannot fail), warns once, and
//! uses the fallback for the rest of that turn, so a failing window costs at most one attempt
//! per turn.
//! This module knows nothing about sessions or stores.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::message::Message;

/// A window could not be made (for example, its summary call failed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the conversation window could not be made: {0}")]
pub struct WindowError(pub String);

/// Chooses what the model sees of the history. Implementations are shared by every turn of an
/// agent (one turn at a time).
#[async_trait]
pub trait ConversationWindow: Send + Sync {
    /// The messages for the next model call, given the history held in memory (which ends on
    /// the user message or tool results the model has to answer), the position of its first
    /// message in the whole history (`first`: how many older messages left memory) and the turn's
    /// cancellation. The result must start with a user message and never split a toolUse from
    /// its toolResult; a message it adds that a model must not receive (metadata, unknown blocks)
    /// is stripped by the loop.
    async fn view(
        &self,
        history: &[Arc<Message>],
        first: usize,
        cancel: &CancellationToken,
    ) -> Result<Vec<Arc<Message>>, WindowError>;

    /// When the view is only ever a tail of the history (a cut, nothing added): where that tail
    /// starts in `history` (the held messages and then the turn's messages not stored yet;
    /// `first` as for [`Self::view`]). The loop then shares only the tail, taken under the
    /// history's lock, instead of asking `view`, whose answer this must equal. Default: `None`
    /// (the loop asks `view`).
    fn tail_start(&self, _history: &[Arc<Message>], _first: usize) -> Option<usize> {
        None
    }

    /// What the model sees when [`Self::view`] failed. Default: the whole history.
    fn fallback(&self, history: &[Arc<Message>]) -> Vec<Arc<Message>> {
        history.to_vec()
    }

    /// Between turns: how many of the oldest held messages (`history`, the first at position
    /// `first` of the whole history) the agent may drop from memory because no later view will
    /// include them (they stay in the store); the agent drops exactly that many. The rest must
    /// still start with a user message and never split a toolUse from its toolResult. Default:
    /// none (a window that needs the whole history keeps it).
    fn forgettable(&self, _history: &[Arc<Message>], _first: usize) -> usize {
        0
    }

    /// The held history as the model last saw it, without a model call: what `/compact`
    /// summarizes. Default: every held message.
    fn as_recorded(&self, history: &[Arc<Message>], _first: usize) -> Vec<Arc<Message>> {
        history.to_vec()
    }
}

/// The default window: the whole history.
#[derive(Debug, Clone, Copy, Default)]
pub struct WholeHistory;

#[async_trait]
impl ConversationWindow for WholeHistory {
    async fn view(
        &self,
        history: &[Arc<Message>],
        _first: usize,
        _cancel: &CancellationToken,
    ) -> Result<Vec<Arc<Message>>, WindowError> {
        Ok(history.to_vec())
    }

    fn tail_start(&self, _history: &[Arc<Message>], _first: usize) -> Option<usize> {
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::TauAgent;
    use crate::testing::{FakeModel, FakeReply};

    #[tokio::test]
    async fn a_request_shares_the_historys_own_messages() {
        let model = Arc::new(FakeModel::scripted([
            FakeReply::text("a0"),
            FakeReply::text("a1"),
        ]));
        let agent = TauAgent::builder(model.clone()).build();
        agent.ask("q0").await.unwrap();
        agent.ask("q1").await.unwrap();
        let held = agent.inner.history.snapshot();
        let second = &model.requests()[1].messages;
        assert_eq!(second.len(), 3);
        assert!(
            held.iter().zip(second).all(|(h, m)| Arc::ptr_eq(h, m)),
            "the second call's messages are the history's objects, not copies"
        );
        assert!(second.iter().all(|m| m.is_for_model()), "{second:?}");
        assert_eq!(second[1].text(), "a0");
    }
}
