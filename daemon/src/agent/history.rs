//! The agent's conversation history and the hook that persists it.
//!
//! Invariants: the loop only ever appends, through [`History::append`] (or [`History::append_all`]
//! for messages stored together), which reports the message to the [`HistoryObserver`] first and
//! keeps it in memory only when the observer accepted it, so memory never runs ahead of the store;
//! the history is never edited in place (a dangling end is repaired by appending, see `turn`); the
//! lock is never held across an await or while the observer runs (only while the window, which is
//! pure, counts what may be forgotten, or while a model call's view takes its share of the held
//! messages).
//!
//! Memory holds each message as a model receives it ([`Message::is_for_model`]: the observer
//! stored its metadata and unknown blocks, which no model call sends), behind an [`Arc`], so a
//! model request shares the history's own messages instead of copying them.
//!
//! Between turns the oldest messages may leave memory ([`History::forget_with`], when the agent's
//! window says the model will never see them again): positions stay absolute (`len` and the index an
//! observer is told count the forgotten messages too), so stored ids and the repair notice's
//! identity check do not move; only what is held in memory shrinks.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::message::{Message, Role};

/// An observer could not store a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the message could not be stored: {0}")]
pub struct HistoryError(pub String);

/// Told about every message the agent appends (the session store implements it). It runs on the
/// turn's task, synchronously, before the message becomes part of the in-memory history.
pub trait HistoryObserver: Send + Sync {
    /// `index` is the message's position in the full history (0-based).
    fn message_appended(&self, index: usize, message: &Message) -> Result<(), HistoryError>;

    /// `messages`, from position `first` on, appended together (one step of a turn, stored as one
    /// write where the observer can). This default tells [`Self::message_appended`] of each in
    /// turn.
    fn messages_appended(
        &self,
        first: usize,
        messages: &[Arc<Message>],
    ) -> Result<(), HistoryError> {
        for (index, message) in (first..).zip(messages) {
            self.message_appended(index, message)?;
        }
        Ok(())
    }
}

/// How the history ends, as far as the next turn is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Dangling {
    /// Empty, or ends on an assistant message without tool calls: nothing to repair.
    No,
    /// Ends on a user message (a prompt or tool results nobody answered).
    OnUser,
    /// Ends on an assistant message whose tool calls have no results; holds their ids in order.
    OnToolUse(Vec<String>),
}

/// The messages held in memory (each as a model receives it) and how many older ones were
/// forgotten.
#[derive(Default)]
struct Held {
    messages: Vec<Arc<Message>>,
    forgotten: usize,
}

/// The in-memory history plus its observer.
pub(crate) struct History {
    held: Mutex<Held>,
    observer: Option<Arc<dyn HistoryObserver>>,
}

impl History {
    pub(crate) fn new(initial: Vec<Message>, observer: Option<Arc<dyn HistoryObserver>>) -> Self {
        Self {
            held: Mutex::new(Held {
                messages: initial
                    .into_iter()
                    .map(|message| Arc::new(message.into_for_model()))
                    .collect(),
                forgotten: 0,
            }),
            observer,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a message: the observer first, then memory (as a model receives it). Returns its
    /// (absolute) index.
    pub(crate) fn append(&self, message: Message) -> Result<usize, HistoryError> {
        let index = self.len();
        if let Some(observer) = &self.observer {
            observer.message_appended(index, &message)?;
        }
        let message = Arc::new(message.into_for_model());
        self.lock().messages.push(message);
        Ok(index)
    }

    /// Appends `messages` together: the observer is told of all of them at once, then they enter
    /// memory (each as a model receives it), all or none. Returns the index of the first.
    pub(crate) fn append_all(&self, messages: Vec<Arc<Message>>) -> Result<usize, HistoryError> {
        let first = self.len();
        if let Some(observer) = &self.observer {
            observer.messages_appended(first, &messages)?;
        }
        let messages: Vec<Arc<Message>> = messages
            .into_iter()
            .map(Message::shared_for_model)
            .collect();
        self.lock().messages.extend(messages);
        Ok(first)
    }

    /// The length of the whole history, forgotten messages included.
    pub(crate) fn len(&self) -> usize {
        let held = self.lock();
        held.forgotten + held.messages.len()
    }

    /// How many messages are held in memory.
    pub(crate) fn held_len(&self) -> usize {
        self.lock().messages.len()
    }

    /// The messages held in memory (shared, not copied).
    pub(crate) fn snapshot(&self) -> Vec<Arc<Message>> {
        self.lock().messages.clone()
    }

    /// The messages held in memory (shared, not copied), and the position of the first in the
    /// whole history.
    pub(crate) fn held(&self) -> (Vec<Arc<Message>>, usize) {
        let held = self.lock();
        (held.messages.clone(), held.forgotten)
    }

    /// What `read` makes of the messages held in memory and the position of the first, under the
    /// history's lock (so nothing is appended or forgotten in between; `read` must not block).
    pub(crate) fn with_held<R>(&self, read: impl FnOnce(&[Arc<Message>], usize) -> R) -> R {
        let held = self.lock();
        read(&held.messages, held.forgotten)
    }

    /// Drops from memory the first held messages, as many as `count` says of what is held and
    /// the position of its first message (asked under the history's lock, so no copy is made and
    /// nothing is appended in between). Returns how many were dropped.
    pub(crate) fn forget_with(&self, count: impl FnOnce(&[Arc<Message>], usize) -> usize) -> usize {
        let mut held = self.lock();
        let count = count(&held.messages, held.forgotten).min(held.messages.len());
        held.messages.drain(..count);
        held.forgotten += count;
        count
    }

    pub(crate) fn dangling(&self) -> Dangling {
        let held = self.lock();
        match held.messages.last() {
            None => Dangling::No,
            Some(last) if last.role == Role::User => Dangling::OnUser,
            Some(last) => {
                let ids: Vec<String> = last.tool_uses().map(|u| u.tool_use_id.clone()).collect();
                if ids.is_empty() {
                    Dangling::No
                } else {
                    Dangling::OnToolUse(ids)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ContentBlock, ToolUse};
    use serde_json::json;

    struct Refuse;
    impl HistoryObserver for Refuse {
        fn message_appended(&self, _index: usize, _message: &Message) -> Result<(), HistoryError> {
            Err(HistoryError("disk full".into()))
        }
    }

    #[test]
    fn a_refused_message_stays_out_of_memory() {
        let history = History::new(vec![], Some(Arc::new(Refuse)));
        assert!(history.append(Message::user_text("hi")).is_err());
        assert_eq!(history.len(), 0);
    }

    struct Indices(Mutex<Vec<usize>>);
    impl HistoryObserver for Indices {
        fn message_appended(&self, index: usize, _message: &Message) -> Result<(), HistoryError> {
            self.0.lock().unwrap().push(index);
            Ok(())
        }
    }

    #[test]
    fn forgetting_keeps_positions_absolute() {
        let observer = Arc::new(Indices(Mutex::new(Vec::new())));
        let history = History::new(
            vec![Message::user_text("a"), Message::assistant_text("b")],
            Some(observer.clone()),
        );
        history.append(Message::user_text("c")).unwrap();
        let asked = history.forget_with(|held, first| {
            assert_eq!((held.len(), first), (3, 0), "asked with what is held");
            2
        });
        assert_eq!(asked, 2);
        assert_eq!((history.len(), history.held_len()), (3, 1));
        assert_eq!(history.snapshot(), vec![Arc::new(Message::user_text("c"))]);
        assert_eq!(history.held(), (vec![Arc::new(Message::user_text("c"))], 2));
        assert_eq!(history.append(Message::assistant_text("d")).unwrap(), 3);
        let cut = history.forget_with(|held, first| {
            assert_eq!((held.len(), first), (2, 2));
            10
        });
        assert_eq!(cut, 2, "cut to what is held");
        assert_eq!((history.len(), history.held_len()), (4, 0));
        assert_eq!(history.append(Message::user_text("e")).unwrap(), 4);
        assert_eq!(*observer.0.lock().unwrap(), vec![2, 3, 4]);
    }

    #[test]
    fn messages_appended_together_get_consecutive_positions_or_stay_out() {
        let observer = Arc::new(Indices(Mutex::new(Vec::new())));
        let history = History::new(vec![Message::user_text("a")], Some(observer.clone()));
        let pair = vec![
            Arc::new(Message::assistant_text("b")),
            Arc::new(Message::user_text("c")),
        ];
        assert_eq!(history.append_all(pair.clone()).unwrap(), 1);
        assert_eq!(history.len(), 3);
        assert_eq!(*observer.0.lock().unwrap(), vec![1, 2]);
        let refusing = History::new(vec![], Some(Arc::new(Refuse)));
        assert!(refusing.append_all(pair).is_err());
        assert_eq!(refusing.len(), 0, "a refused batch stays out of memory");
    }

    /// What the observer saw of each message, by position.
    struct Seen(Mutex<Vec<Message>>);
    impl HistoryObserver for Seen {
        fn message_appended(&self, _index: usize, message: &Message) -> Result<(), HistoryError> {
            self.0.lock().unwrap().push(message.clone());
            Ok(())
        }
    }

    #[test]
    fn the_store_gets_the_whole_message_and_memory_shares_it_as_a_model_sees_it() {
        let observer = Arc::new(Seen(Mutex::new(Vec::new())));
        let mut reply = Message::assistant_text("b");
        reply.metadata = Some(crate::message::MessageMetadata::default());
        let mut restored = Message::user_text("a");
        restored.metadata = Some(crate::message::MessageMetadata::default());
        let history = History::new(vec![restored], Some(observer.clone()));
        let prompt = Arc::new(Message::user_text("c"));
        history
            .append_all(vec![Arc::new(reply.clone()), Arc::clone(&prompt)])
            .unwrap();
        history.append(reply.clone()).unwrap();
        assert_eq!(
            *observer.0.lock().unwrap(),
            vec![reply.clone(), Message::user_text("c"), reply]
        );
        let held = history.snapshot();
        assert!(held.iter().all(|m| m.is_for_model()), "{held:?}");
        assert_eq!(*held[1], Message::assistant_text("b"));
        assert!(
            Arc::ptr_eq(&held[2], &prompt),
            "a message with nothing to strip is held as given, not copied"
        );
        let (again, _) = history.held();
        assert!(held.iter().zip(&again).all(|(a, b)| Arc::ptr_eq(a, b)));
    }

    #[test]
    fn dangling_ends_are_recognised() {
        let history = History::new(vec![], None);
        assert_eq!(history.dangling(), Dangling::No);
        history.append(Message::user_text("hi")).unwrap();
        assert_eq!(history.dangling(), Dangling::OnUser);
        history.append(Message::assistant_text("hello")).unwrap();
        assert_eq!(history.dangling(), Dangling::No);
        history
            .append(Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse(ToolUse {
                    tool_use_id: "t1".into(),
                    name: "x".into(),
                    input: json!({}),
                })],
                metadata: None,
            })
            .unwrap();
        assert_eq!(history.dangling(), Dangling::OnToolUse(vec!["t1".into()]));
    }
}
