//! What the hub core hands a client that watches a session: a [`TurnStream`] (one turn's events,
//! from StartTurn) or an [`EventStream`] (a [`Snapshot`], then every event, from Subscribe). Each
//! holds the client's [`Attachment`] on the session's channel for as long as it lives.
//!
//! Invariants: a turn stream yields only its turn's events, in seq order, and ends right after its
//! `TurnEnded`; an event stream yields every event after its snapshot without gaps, or ends with
//! [`Lagged`]; dropping either ends the attachment (and may close the channel's approvals), except
//! after a [`Lagged`]: then the attachment is held for [`LAG_GRACE`] (see
//! [`Attachment::hold_after_lag`]) so the client can resubscribe before its approvals close.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::approvals::{Attachment, LAG_GRACE};
use super::bus::{Lagged, Subscription};
use super::event::{EventKind, PendingInfo, SessionEvent, TurnInfo};
use super::sessions::SessionSummary;
use super::turns::Accepted;

/// One turn's events for the client that started it.
#[derive(Debug)]
pub struct TurnStream {
    accepted: Accepted,
    attachment_id: String,
    /// `None` once handed to its grace hold after a lag.
    attachment: Option<Attachment>,
    subscription: Option<Subscription>,
    ready: VecDeque<Arc<SessionEvent>>,
    done: bool,
    stop: CancellationToken,
}

impl TurnStream {
    /// A turn's stream; without an attachment (a turn no client started) it decides nothing and
    /// its attachment id is empty.
    pub(crate) fn new(
        accepted: Accepted,
        attachment: Option<Attachment>,
        subscription: Option<Subscription>,
        ready: VecDeque<Arc<SessionEvent>>,
        stop: CancellationToken,
    ) -> Self {
        Self {
            accepted,
            attachment_id: attachment
                .as_ref()
                .map(|a| a.id().to_owned())
                .unwrap_or_default(),
            attachment,
            subscription,
            ready,
            done: false,
            stop,
        }
    }

    pub fn accepted(&self) -> &Accepted {
        &self.accepted
    }

    /// This stream's attachment id (for deciding approvals).
    pub fn attachment_id(&self) -> &str {
        &self.attachment_id
    }

    /// The turn's next event; `Ok(None)` after its `TurnEnded`.
    pub async fn next(&mut self) -> Result<Option<Arc<SessionEvent>>, Lagged> {
        if self.done {
            return Ok(None);
        }
        let event = match self.ready.pop_front() {
            Some(event) => Some(event),
            None => match self.next_of_turn().await {
                Ok(event) => event,
                Err(lagged) => {
                    self.done = true;
                    self.subscription = None;
                    if let Some(attachment) = self.attachment.take() {
                        attachment.hold_after_lag(LAG_GRACE, &self.stop);
                    }
                    return Err(lagged);
                }
            },
        };
        match event {
            Some(event) => {
                if matches!(event.kind, EventKind::TurnEnded(_)) {
                    self.done = true;
                }
                Ok(Some(event))
            }
            None => {
                self.done = true;
                Ok(None)
            }
        }
    }

    async fn next_of_turn(&mut self) -> Result<Option<Arc<SessionEvent>>, Lagged> {
        let Some(subscription) = self.subscription.as_mut() else {
            return Ok(None);
        };
        loop {
            match subscription.next().await? {
                None => return Ok(None),
                Some(event) if event.turn_id.as_deref() == Some(&self.accepted.turn_id) => {
                    return Ok(Some(event));
                }
                Some(_) => {}
            }
        }
    }
}

/// A session's state when a subscriber attached.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub session: SessionSummary,
    pub running: Option<TurnInfo>,
    pub queued: Vec<TurnInfo>,
    pub pending: Vec<PendingInfo>,
    /// The seq the snapshot is current with.
    pub last_seq: u64,
    pub attachment_id: String,
    pub role: String,
    /// The numbering `last_seq` and the events belong to ([`super::HubCore::stream_id`]).
    pub stream_id: String,
}

/// A subscriber's view of a session: the snapshot, then every event, until the hub stops.
#[derive(Debug)]
pub struct EventStream {
    snapshot: Snapshot,
    /// `None` once handed to its grace hold after a lag.
    attachment: Option<Attachment>,
    subscription: Subscription,
    stop: CancellationToken,
}

impl EventStream {
    pub(crate) fn new(
        snapshot: Snapshot,
        attachment: Attachment,
        subscription: Subscription,
        stop: CancellationToken,
    ) -> Self {
        Self {
            snapshot,
            attachment: Some(attachment),
            subscription,
            stop,
        }
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The next event; `Ok(None)` when the hub stops; `Err(Lagged)` when this subscriber fell
    /// too far behind (its attachment is then held for [`LAG_GRACE`] and this stream is done).
    pub async fn next(&mut self) -> Result<Option<Arc<SessionEvent>>, Lagged> {
        let next = tokio::select! {
            () = self.stop.cancelled() => Ok(None),
            next = self.subscription.next() => next,
        };
        if next.is_err()
            && let Some(attachment) = self.attachment.take()
        {
            attachment.hold_after_lag(LAG_GRACE, &self.stop);
        }
        next
    }
}
