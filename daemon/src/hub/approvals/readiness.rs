//! What the hub's approver needs from the session before it asks a question: [`ApprovalReadiness`]
//! (the question's `pending` record is durably stored, and the turn's earlier events are
//! published) and [`TurnSlot`] (the turn the session runs now, shown with the question).
//!
//! Invariants:
//! - The session's recorder marks a question recorded only after the store accepted its `pending`
//!   event; the turn worker marks it flushed once every earlier event is published. A question never
//!   recorded is never asked ([`ApprovalReadiness::take_when_flushed`] answers `false`).
//! - The wait for the flush is bounded by [`FLUSH_WAIT`].
//! - Readiness entries live from the `pending` record until the question is asked or concluded
//!   (cancelled or timed out before it was asked): none outlives its question.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tracing::warn;

/// The longest the approver waits for the turn worker to publish what preceded a question.
pub const FLUSH_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Default, Clone, Copy)]
struct Ready {
    recorded: bool,
    flushed: bool,
}

/// Whether a question is ready to be asked: its `pending` event is durably recorded, and the
/// session's events before it are published.
#[derive(Debug, Default)]
pub struct ApprovalReadiness {
    ids: Mutex<HashMap<String, Ready>>,
    changed: Notify,
}

impl ApprovalReadiness {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Ready>> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `pending` event of `approval_id` is durably recorded (the gate emits it before the
    /// question can be asked, so this comes first).
    pub fn mark_recorded(&self, approval_id: &str) {
        self.lock()
            .entry(approval_id.to_owned())
            .or_default()
            .recorded = true;
        self.changed.notify_waiters();
    }

    /// Every event before the question `approval_id` is published. Only a recorded question is
    /// tracked: a mark for one that was never recorded, or was already taken or forgotten, is
    /// dropped, so a late mark cannot leave an entry behind.
    pub fn mark_flushed(&self, approval_id: &str) {
        if let Some(ready) = self.lock().get_mut(approval_id) {
            ready.flushed = true;
        }
        self.changed.notify_waiters();
    }

    /// Forgets a question that will not be asked (cancelled or timed out first).
    pub fn forget(&self, approval_id: &str) {
        self.lock().remove(approval_id);
    }

    /// How many questions are tracked (recorded, not yet asked or forgotten).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no question is tracked.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Waits (at most `limit`) until the question is flushed, then returns whether it was
    /// recorded, and forgets it. A question that was never recorded answers `false` at once.
    pub async fn take_when_flushed(&self, approval_id: &str, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let Some(ready) = self.lock().get(approval_id).copied() else {
                return false;
            };
            if ready.flushed {
                break;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                warn!(%approval_id, "the turn's earlier events were not published in time; asking anyway");
                break;
            }
        }
        self.lock()
            .remove(approval_id)
            .is_some_and(|ready| ready.recorded)
    }
}

/// The id of the turn a session runs now (turns of a session run one at a time), and whether
/// nobody attached started it: then its questions are held for that long (see the registry's
/// "held" approvals).
#[derive(Debug, Default)]
pub struct TurnSlot {
    current: Mutex<(Option<String>, Option<Duration>)>,
}

impl TurnSlot {
    fn lock(&self) -> MutexGuard<'_, (Option<String>, Option<Duration>)> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A turn a client started (or none).
    pub fn set(&self, turn_id: Option<String>) {
        self.set_turn(turn_id, None);
    }

    /// The turn now running, with how long its questions are held when nobody attached started
    /// it.
    pub fn set_turn(&self, turn_id: Option<String>, held_for: Option<Duration>) {
        *self.lock() = (turn_id, held_for);
    }

    pub fn get(&self) -> Option<String> {
        self.lock().0.clone()
    }

    /// How long the running turn's questions are held, when nobody attached started it.
    pub fn held_for(&self) -> Option<Duration> {
        self.lock().1
    }
}
