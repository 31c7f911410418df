//! [`TurnQueue`]: the turns of one open session as a queue: its [`TurnTable`] under its lock, the
//! session's bus the queue's changes are published on, and the wake-up of the session's worker
//! (`super::worker`), the queue's only consumer. Accepting, cancelling, starting and finishing a
//! turn, and closing the queue when the session leaves memory, happen here and nowhere else.
//!
//! Invariants:
//! - A queue longer than the configured bound refuses new turns (`ResourceExhausted`); a closed
//!   queue refuses every new turn ([`AcceptError::Closed`]: the session is leaving memory).
//! - Every accepted turn gets exactly one `TurnEnded` event (also when it is cancelled while
//!   queued or its worker dies), published after every other event of the turn.
//! - Queue changes and their events are made together under the bus lock
//!   (`EventBus::publish_with`), so a snapshot's turns agree with the events after it; the table's
//!   lock is taken inside the bus's, never the other way round (lock order: bus, then table).
//! - Std locks here are short and never held across an `.await`.
//!
//! See ARCHITECTURE.md, "The path of a turn".

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio_util::sync::CancellationToken;

use super::turn_table::{TurnRecord, TurnTable};
use crate::agent::{StopReason, TurnEnd};
use crate::hub::events::{EventBus, EventKind, TurnInfo, now_rfc3339};
use crate::message::Usage;

/// What accepting a turn gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub session_id: String,
    pub turn_id: String,
    /// The key named an earlier turn; nothing new was started.
    pub duplicate: bool,
    /// Turns ahead of it when it was accepted.
    pub queued_ahead: u32,
    /// The seq of its first event (`turn_queued`).
    pub first_seq: u64,
}

/// A turn cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AcceptError {
    /// The session left memory in the meantime; open it again.
    Closed,
    /// The queue is full.
    QueueFull(usize),
}

/// The `TurnEnd` of a turn the hub ended itself, before or without the agent's own end: no text,
/// no usage, and `notice` for the person.
pub(super) fn ended_by_hub(stop_reason: StopReason, notice: &str) -> TurnEnd {
    TurnEnd {
        stop_reason,
        text: String::new(),
        usage: Usage::default(),
        model_calls: 0,
        notice: Some(notice.to_owned()),
    }
}

/// The `TurnEnd` of a turn whose session worker died under it.
pub(super) fn worker_failed() -> TurnEnd {
    ended_by_hub(
        StopReason::Error,
        "The session's worker failed; this turn did not finish. Try again.",
    )
}

/// The `TurnEnd` of a turn that was cancelled before it ran.
pub(super) fn cancelled_before_start() -> TurnEnd {
    ended_by_hub(
        StopReason::Cancelled,
        "The turn was cancelled before it started.",
    )
}

/// The turns of one open session (see the module's invariants).
pub(crate) struct TurnQueue {
    session_id: String,
    bus: Arc<EventBus>,
    table: Mutex<TurnTable>,
    /// Wakes the worker when a turn is accepted.
    wake: Notify,
}

impl TurnQueue {
    /// The empty queue of `session_id`, publishing on `bus`.
    pub(super) fn new(session_id: &str, bus: Arc<EventBus>) -> Self {
        Self {
            session_id: session_id.to_owned(),
            bus,
            table: Mutex::new(TurnTable::default()),
            wake: Notify::new(),
        }
    }

    /// The turn table (running, queued and remembered turns). Never held across an `.await`, and
    /// never while taking the bus's lock.
    pub(crate) fn lock(&self) -> MutexGuard<'_, TurnTable> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Completes when a turn is accepted after this was called (or one was accepted since the
    /// worker last waited: the permit is kept).
    pub(super) fn notified(&self) -> Notified<'_> {
        self.wake.notified()
    }

    /// Accepts a turn (or finds the one `idempotency_key` names) and wakes the worker. The caller
    /// marks the session used ([`super::runtime::SessionRuntime::touch`]).
    pub(super) fn accept(
        &self,
        text: String,
        channel: String,
        idempotency_key: Option<String>,
        max_queued: usize,
        held_for: Option<Duration>,
        new_turn_id: impl FnOnce() -> String,
    ) -> Result<Accepted, AcceptError> {
        let accepted = self.bus.publish_with(|next_seq| {
            let mut turns = self.lock();
            if turns.closed {
                return (None, Err(AcceptError::Closed));
            }
            if let Some(key) = &idempotency_key
                && let Some(turn_id) = turns.by_key(key)
            {
                let first_seq = turns.known(turn_id).map_or(0, |k| k.first_seq);
                let accepted = Accepted {
                    session_id: self.session_id.clone(),
                    turn_id: turn_id.to_owned(),
                    duplicate: true,
                    queued_ahead: 0,
                    first_seq,
                };
                return (None, Ok(accepted));
            }
            if turns.queue.len() >= max_queued {
                return (None, Err(AcceptError::QueueFull(max_queued)));
            }
            let turn_id = new_turn_id();
            let ahead = u32::from(turns.running.is_some())
                + u32::try_from(turns.queue.len()).unwrap_or(u32::MAX);
            let info = TurnInfo {
                turn_id: turn_id.clone(),
                channel,
                text,
                accepted_at: now_rfc3339(),
            };
            turns.queue.push_back(TurnRecord {
                info: info.clone(),
                first_seq: next_seq,
                cancel: CancellationToken::new(),
                held_for,
            });
            if let Some(key) = idempotency_key {
                turns.remember(key, turn_id.clone(), next_seq);
            }
            let event = EventKind::TurnQueued { turn: info, ahead };
            let accepted = Accepted {
                session_id: self.session_id.clone(),
                turn_id: turn_id.clone(),
                duplicate: false,
                queued_ahead: ahead,
                first_seq: next_seq,
            };
            (Some((Some(turn_id), event)), Ok(accepted))
        })?;
        if !accepted.duplicate {
            self.wake.notify_one();
        }
        Ok(accepted)
    }

    /// Cancels a turn (`None`: the running one). A queued turn ends at once; a running one ends
    /// when the agent has answered every tool call. Returns the turn it applied to.
    pub(super) fn cancel(&self, turn_id: Option<&str>) -> Option<String> {
        self.bus.publish_with(|next_seq| {
            let mut turns = self.lock();
            let running = turns
                .running
                .as_ref()
                .filter(|r| turn_id.is_none_or(|id| r.info.turn_id == id));
            if let Some(record) = running {
                record.cancel.cancel();
                return (None, Some(record.info.turn_id.clone()));
            }
            let Some(id) = turn_id else {
                return (None, None);
            };
            let Some(record) = turns
                .queue
                .iter()
                .position(|r| r.info.turn_id == id)
                .and_then(|position| turns.queue.remove(position))
            else {
                return (None, None);
            };
            record.cancel.cancel();
            let end = cancelled_before_start();
            turns.record_end(id, next_seq, end.clone());
            let event = EventKind::TurnEnded(end);
            (Some((Some(id.to_owned()), event)), Some(id.to_owned()))
        })
    }

    /// Closes the session to new turns unless a turn runs or waits; whether it closed (an idle
    /// session leaving memory).
    pub(super) fn close_if_idle(&self) -> bool {
        let mut turns = self.lock();
        if turns.busy() {
            return false;
        }
        turns.closed = true;
        true
    }

    /// Closes the session to new turns (the hub stops); turns already accepted go on until
    /// cancelled.
    pub(super) fn close_to_turns(&self) {
        self.lock().closed = true;
    }

    /// Closes the session to new turns and ends the running turn and every queued one with an
    /// error (its worker died). Returns how many turns it ended.
    pub(super) fn fail_all(&self) -> usize {
        let mut ended = 0;
        loop {
            let failed = self.bus.publish_with(|next_seq| {
                let mut turns = self.lock();
                turns.closed = true;
                let Some(record) = turns.running.take().or_else(|| turns.queue.pop_front()) else {
                    return (None, false);
                };
                record.cancel.cancel();
                let id = record.info.turn_id;
                let end = worker_failed();
                turns.record_end(&id, next_seq, end.clone());
                (Some((Some(id), EventKind::TurnEnded(end))), true)
            });
            if !failed {
                return ended;
            }
            ended += 1;
        }
    }

    /// Takes the next queued turn, marks it running and publishes `turn_started`.
    pub(super) fn start_next(&self) -> Option<TurnRecord> {
        self.bus.publish_with(|_| {
            let mut turns = self.lock();
            if turns.running.is_some() {
                return (None, None);
            }
            let Some(record) = turns.queue.pop_front() else {
                return (None, None);
            };
            turns.running = Some(record.clone());
            let event = EventKind::TurnStarted {
                turn: record.info.clone(),
            };
            (
                Some((Some(record.info.turn_id.clone()), event)),
                Some(record),
            )
        })
    }

    /// Publishes `turn_ended` and clears the running turn. The caller marks the session used.
    pub(super) fn finish(&self, turn_id: &str, end: TurnEnd) {
        let first_seq = self.bus.publish_with(|next_seq| {
            let mut turns = self.lock();
            let mut first_seq = None;
            if turns
                .running
                .as_ref()
                .is_some_and(|r| r.info.turn_id == turn_id)
            {
                first_seq = turns.running.take().map(|r| r.first_seq);
            }
            turns.record_end(turn_id, next_seq, end.clone());
            (
                Some((Some(turn_id.to_owned()), EventKind::TurnEnded(end))),
                first_seq,
            )
        });
        // The session's turns are all done: only this turn's events stay for resumptions. (The
        // turn table's lock is let go before the bus's is taken: the lock order is bus first.)
        let busy = self.lock().busy();
        if let Some(first_seq) = first_seq
            && !busy
        {
            self.bus.drop_before(first_seq);
        }
    }
}
