//! [`EventBus`]: one session's live events, numbered with a contiguous `seq`, fanned out to any
//! number of subscribers, with a bounded replay buffer for `after_seq` resumption.
//!
//! Invariants:
//! - `seq` starts at 1 and grows by exactly one per published event; a [`Subscription`] yields its
//!   events in seq order without gaps, or ends with [`Lagged`] naming the last seq it delivered.
//! - Publishing never waits: the fan-out is a bounded `tokio::sync::broadcast` channel, so a slow
//!   subscriber loses its place (and is cut off with `Lagged`) instead of stalling a turn. The
//!   channel exists only while someone is subscribed: it is made by the first subscription and
//!   dropped by the first publish (or trim) that finds no subscriber left, so a session nobody
//!   watches holds none of its slots.
//! - The replay buffer holds at most `replay_buffer` events and [`REPLAY_BUFFER_BYTES`] (the
//!   events' estimated size, [`SessionEvent::estimated_bytes`]), the oldest leaving first. When a
//!   session's turns are all done the worker drops the events before the last turn's
//!   ([`EventBus::drop_before`]), and once the session has been idle a while the idle reaper cuts
//!   the rest to [`IDLE_REPLAY_BYTES`] ([`EventBus::trim_to`]). What leaves the buffer is only a
//!   convenience: a resumption from before it is refused (`NoLongerBuffered`) and the client
//!   subscribes afresh, for a snapshot.
//! - Publishing and subscribing take the same short lock, and [`EventBus::publish_with`] /
//!   [`EventBus::subscribe_with`] run their closure under it: a state change made inside
//!   `publish_with` and a snapshot taken inside `subscribe_with` are ordered exactly like the seq,
//!   so a subscriber's snapshot plus its events never miss or double-count a change.
//!   Lock order: the bus lock may be held while taking another hub lock, never the reverse.
//! - The lock is a std mutex, never held across an `.await`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::broadcast;

use super::event::{EventKind, SessionEvent, now_rfc3339};

/// Events kept for `after_seq` replays, per session.
pub const DEFAULT_REPLAY_BUFFER: usize = 2048;
/// Events a subscriber may fall behind before it is cut off (it then resumes from the replay
/// buffer). Each costs a slot of 32 bytes while the session has a subscriber.
pub const DEFAULT_SUBSCRIBER_LAG: usize = 256;
/// The most the replay buffer holds, in estimated bytes, whatever its event count: a long turn
/// can be resumed from its start until its events pass this.
pub const REPLAY_BUFFER_BYTES: usize = 1024 * 1024;
/// What the replay buffer keeps, in estimated bytes, once the session has been idle for a while
/// (see `OpenSessions::trim_idle`).
pub const IDLE_REPLAY_BYTES: usize = 16 * 1024;

/// A subscription could not start where it asked to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubscribeError {
    /// `after_seq` is beyond the last event (the hub restarted since the client saw it).
    #[error(
        "after_seq {after_seq} is ahead of this session's stream (last seq {last_seq}); the hub may have restarted: subscribe without after_seq for a fresh snapshot"
    )]
    Ahead { after_seq: u64, last_seq: u64 },
    /// The events after `after_seq` are no longer buffered.
    #[error(
        "the events after seq {after_seq} are no longer buffered (oldest buffered: {oldest}); subscribe without after_seq for a fresh snapshot"
    )]
    NoLongerBuffered { after_seq: u64, oldest: u64 },
}

/// A subscriber fell too far behind and was cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("lagged; resume with after_seq = {resume_after_seq}")]
pub struct Lagged {
    /// The last seq this subscriber received.
    pub resume_after_seq: u64,
}

/// A buffered event and its estimated size.
struct Buffered {
    event: Arc<SessionEvent>,
    bytes: usize,
}

struct BusState {
    last_seq: u64,
    buffer: VecDeque<Buffered>,
    /// The estimated bytes of `buffer`'s events.
    buffer_bytes: usize,
    buffer_capacity: usize,
    /// The fan-out, while anyone is subscribed (see the module doc).
    sender: Option<broadcast::Sender<Arc<SessionEvent>>>,
    subscriber_lag: usize,
}

impl BusState {
    /// Drops the oldest buffered events until at most `bytes` remain.
    fn trim_to(&mut self, bytes: usize) {
        while self.buffer_bytes > bytes {
            let Some(oldest) = self.buffer.pop_front() else {
                break;
            };
            self.buffer_bytes = self.buffer_bytes.saturating_sub(oldest.bytes);
        }
    }
}

/// The live events of one session.
pub struct EventBus {
    session_id: String,
    state: Mutex<BusState>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("session_id", &self.session_id)
            .field("last_seq", &self.last_seq())
            .finish()
    }
}

impl EventBus {
    /// A bus with the default buffer sizes.
    pub fn new(session_id: impl Into<String>) -> Self {
        Self::with_capacity(session_id, DEFAULT_REPLAY_BUFFER, DEFAULT_SUBSCRIBER_LAG)
    }

    /// A bus keeping `replay_buffer` events for replays and letting a subscriber fall
    /// `subscriber_lag` events behind (both at least 1).
    pub fn with_capacity(
        session_id: impl Into<String>,
        replay_buffer: usize,
        subscriber_lag: usize,
    ) -> Self {
        Self::continuing(session_id, replay_buffer, subscriber_lag, 0)
    }

    /// [`EventBus::with_capacity`], numbering on after `last_seq` (a session that comes back into
    /// memory goes on where its earlier bus stopped).
    pub fn continuing(
        session_id: impl Into<String>,
        replay_buffer: usize,
        subscriber_lag: usize,
        last_seq: u64,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            state: Mutex::new(BusState {
                last_seq,
                buffer: VecDeque::new(),
                buffer_bytes: 0,
                buffer_capacity: replay_buffer.max(1),
                sender: None,
                subscriber_lag: subscriber_lag.max(1),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BusState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The seq of the last published event (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    /// How many subscriptions are live.
    pub fn subscriber_count(&self) -> usize {
        self.lock()
            .sender
            .as_ref()
            .map_or(0, broadcast::Sender::receiver_count)
    }

    /// Publishes one event and returns it.
    pub fn publish(&self, turn_id: Option<&str>, kind: EventKind) -> Arc<SessionEvent> {
        let mut state = self.lock();
        self.push(&mut state, turn_id.map(str::to_owned), kind)
    }

    /// Runs `change` under the bus lock and publishes the event it returns, if any, so the change
    /// and its event are atomic with respect to snapshots. `change` receives the seq its event will
    /// get. Returns `change`'s second value.
    pub fn publish_with<R>(
        &self,
        change: impl FnOnce(u64) -> (Option<(Option<String>, EventKind)>, R),
    ) -> R {
        let mut state = self.lock();
        let (event, result) = change(state.last_seq + 1);
        if let Some((turn_id, kind)) = event {
            self.push(&mut state, turn_id, kind);
        }
        result
    }

    fn push(
        &self,
        state: &mut BusState,
        turn_id: Option<String>,
        kind: EventKind,
    ) -> Arc<SessionEvent> {
        state.last_seq += 1;
        let event = Arc::new(SessionEvent {
            seq: state.last_seq,
            session_id: self.session_id.clone(),
            turn_id,
            at: now_rfc3339(),
            kind,
        });
        let bytes = event.estimated_bytes();
        if state.buffer.len() == state.buffer_capacity
            && let Some(oldest) = state.buffer.pop_front()
        {
            state.buffer_bytes = state.buffer_bytes.saturating_sub(oldest.bytes);
        }
        state.buffer.push_back(Buffered {
            event: Arc::clone(&event),
            bytes,
        });
        state.buffer_bytes += bytes;
        state.trim_to(REPLAY_BUFFER_BYTES);
        if let Some(sender) = &state.sender {
            if sender.receiver_count() == 0 {
                // Nobody is subscribed (a new subscription makes a new channel): free its slots.
                state.sender = None;
            } else {
                // Only fails when nobody is subscribed.
                let _ = sender.send(Arc::clone(&event));
            }
        }
        event
    }

    /// Subscribes after `after_seq` (`None`: only events published from now on).
    pub fn subscribe(&self, after_seq: Option<u64>) -> Result<Subscription, SubscribeError> {
        self.subscribe_with(after_seq, |_| ()).map(|((), sub)| sub)
    }

    /// Subscribes and, under the same lock, takes a snapshot with the seq it is current with.
    /// `after_seq: None` yields the events after that seq; `Some(n)` first replays the buffered
    /// events after `n` (refused when they are not all buffered, or `n` is ahead of the stream).
    pub fn subscribe_with<S>(
        &self,
        after_seq: Option<u64>,
        snapshot: impl FnOnce(u64) -> S,
    ) -> Result<(S, Subscription), SubscribeError> {
        let mut state = self.lock();
        let last_seq = state.last_seq;
        let lead = after_seq.map_or_else(Vec::new, |after| lead_deltas(&state.buffer, after));
        let after_seq = after_seq.unwrap_or(last_seq);
        if after_seq > last_seq {
            return Err(SubscribeError::Ahead {
                after_seq,
                last_seq,
            });
        }
        let replay: VecDeque<_> = if after_seq == last_seq {
            VecDeque::new()
        } else {
            let oldest = state.buffer.front().map_or(last_seq + 1, |b| b.event.seq);
            if oldest > after_seq + 1 {
                return Err(SubscribeError::NoLongerBuffered { after_seq, oldest });
            }
            state
                .buffer
                .iter()
                .filter(|b| b.event.seq > after_seq)
                .map(|b| Arc::clone(&b.event))
                .collect()
        };
        let lag = state.subscriber_lag;
        let receiver = state
            .sender
            .get_or_insert_with(|| broadcast::channel(lag).0)
            .subscribe();
        let taken = snapshot(last_seq);
        Ok((
            taken,
            Subscription {
                replay,
                receiver,
                last_delivered: after_seq,
                lead,
            },
        ))
    }

    /// The buffered events with `seq >= from`, oldest first.
    pub fn buffered_from(&self, from: u64) -> Vec<Arc<SessionEvent>> {
        self.lock()
            .buffer
            .iter()
            .filter(|b| b.event.seq >= from)
            .map(|b| Arc::clone(&b.event))
            .collect()
    }

    /// The seq of the oldest buffered event, if any.
    pub fn oldest_buffered(&self) -> Option<u64> {
        self.lock().buffer.front().map(|b| b.event.seq)
    }

    /// How many events the replay buffer holds, and their estimated bytes.
    pub fn buffered(&self) -> (usize, usize) {
        let state = self.lock();
        (state.buffer.len(), state.buffer_bytes)
    }

    /// Cuts the replay buffer to its newest events of at most `bytes` (estimated), and gives back
    /// the memory the buffer no longer needs; the seq goes on where it was.
    pub fn trim_to(&self, bytes: usize) {
        let mut state = self.lock();
        state.trim_to(bytes);
        state.buffer.shrink_to_fit();
        if state
            .sender
            .as_ref()
            .is_some_and(|sender| sender.receiver_count() == 0)
        {
            // Its last subscriber left after the last publish.
            state.sender = None;
        }
    }

    /// Drops the buffered events older than seq `first` (those of earlier turns).
    pub fn drop_before(&self, first: u64) {
        let mut state = self.lock();
        while state.buffer.front().is_some_and(|b| b.event.seq < first) {
            if let Some(oldest) = state.buffer.pop_front() {
                state.buffer_bytes = state.buffer_bytes.saturating_sub(oldest.bytes);
            }
        }
    }

    /// Frees the replay buffer; the seq goes on where it was.
    pub fn clear_buffer(&self) {
        self.trim_to(0);
    }
}

/// The newest non-empty reply and reasoning deltas at or before `after_seq` in `buffer`, of the
/// turn whose delta came last there, oldest first (see [`Subscription::take_lead`]).
fn lead_deltas(buffer: &VecDeque<Buffered>, after_seq: u64) -> Vec<Arc<SessionEvent>> {
    let mut turn = None;
    let (mut reply, mut reasoning) = (None, None);
    for buffered in buffer.iter().rev().filter(|b| b.event.seq <= after_seq) {
        let event = &buffered.event;
        let (text, slot) = match &event.kind {
            EventKind::TextDelta(text) => (text, &mut reply),
            EventKind::ReasoningDelta(text) => (text, &mut reasoning),
            _ => continue,
        };
        // A delta of another turn before this one: what came before it no longer counts.
        match turn {
            None => turn = Some(event.turn_id.as_deref()),
            Some(of) if of != event.turn_id.as_deref() => break,
            Some(_) => {}
        }
        if slot.is_none() && !text.is_empty() {
            *slot = Some(Arc::clone(event));
        }
        if reply.is_some() && reasoning.is_some() {
            break;
        }
    }
    let mut lead: Vec<_> = [reply, reasoning].into_iter().flatten().collect();
    lead.sort_by_key(|event| event.seq);
    lead
}

/// One subscriber's view of a bus: replayed events first, then live ones, without gaps.
#[derive(Debug)]
pub struct Subscription {
    replay: VecDeque<Arc<SessionEvent>>,
    receiver: broadcast::Receiver<Arc<SessionEvent>>,
    last_delivered: u64,
    /// See [`Subscription::take_lead`].
    lead: Vec<Arc<SessionEvent>>,
}

impl Subscription {
    /// On a resumption (`after_seq` given), the newest non-empty reply and reasoning deltas at or
    /// before it, of the turn whose delta came last, oldest first; empty otherwise, when they are
    /// no longer buffered, or once taken. A client that shows each delta knowing the text before
    /// it (the web page's escaping of a selector after its emoji) carries on from these.
    pub fn take_lead(&mut self) -> Vec<Arc<SessionEvent>> {
        std::mem::take(&mut self.lead)
    }

    /// The next event; `Ok(None)` when the bus is gone; `Err(Lagged)` when this subscriber fell
    /// too far behind (it is then finished: resume with a new subscription).
    pub async fn next(&mut self) -> Result<Option<Arc<SessionEvent>>, Lagged> {
        if let Some(event) = self.replay.pop_front() {
            self.last_delivered = event.seq;
            return Ok(Some(event));
        }
        loop {
            match self.receiver.recv().await {
                Ok(event) if event.seq <= self.last_delivered => {}
                Ok(event) if event.seq == self.last_delivered + 1 => {
                    self.last_delivered = event.seq;
                    return Ok(Some(event));
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Err(Lagged {
                        resume_after_seq: self.last_delivered,
                    });
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(None),
            }
        }
    }

    /// The seq of the last event this subscription yielded (or the seq it started after).
    pub fn last_delivered(&self) -> u64 {
        self.last_delivered
    }
}

#[cfg(test)]
#[path = "bus_tests.rs"]
mod tests;
