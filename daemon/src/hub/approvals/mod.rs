//! The hub's **approvals** sub-room. [`ApprovalRegistry`]: the hub's pending tier-2 approvals as
//! entities with ids, and the clients' attachments that may decide them. The registry is the one
//! place where an approval's winner is chosen; every report of it (the DecideApproval answer, the
//! live `ApprovalResolved` event, the gate's verdict and stored `approval` event, the logs) reads
//! that winner.
//!
//! This file holds the registry's bookkeeping (registering a question, listing, remembering how
//! one ended). The rest, one concern a file:
//! - [`decide`]: the path of a decision, in order: [`decide_request`], [`ApprovalRegistry::decide`],
//!   the winner, [`PendingTicket`] and [`ClientApprover`], the gate's approver in the hub;
//! - [`readiness`]: when a question may be asked (recorded, and the turn's events published);
//! - [`attach`], [`grace`]: the attachments, and the hold of one cut off for lagging;
//! - [`watch`]: who watches a channel's approvals (`WatchApprovals`);
//! - [`restart`]: approvals an earlier hub left pending, expired at start and read back for a late
//!   decision; [`scan_mark`]: when that scan last ran, so a start reads only the sessions that
//!   could hold one.
//!
//! May import (in the hub): `events` (an approval is shown and resolved as session events),
//! `error`, `ids`, `limits`; never `sessions`, `routine_ops` or `core`: a session hands the
//! registry what it needs (its bus, its readiness) when it asks.
//!
//! Approvals and their fates are spoken of in the gate's vocabulary (`crate::gate::ApprovalRequest`,
//! [`ApprovalOutcome`]).
//!
//! An attachment is one live client stream on a session and a channel; its [`Attachment`] guard
//! ends it on drop ([`attach`]). What an attachment was *shown* decides what it may decide:
//! - a Subscribe stream is shown every approval pending on its session in its snapshot and every
//!   one published on the session afterwards, so it is shown every approval of its session that
//!   was pending while it was attached;
//! - a StartTurn stream carries only its own turn's events, so it is shown only the approvals its
//!   turn asks (a queued turn's stream, attached before its turn runs, is never shown an earlier
//!   turn's approval); a repeated StartTurn (same idempotency key) replays its turn from the
//!   start and so is shown that turn's approvals pending when it attached.
//!
//! Invariants:
//! - Each pending approval keeps the set of live attachments on its session and channel that were
//!   shown it (its *viewers*). A decision counts only from a viewer. An attachment cut off as
//!   lagging is held for a grace period ([`grace`]): it stays a viewer (the approval stays pending
//!   for the client to resubscribe, which shows it again) but no longer decides.
//! - When the last viewer of an approval goes, the approval ends as
//!   [`ApprovalOutcome::ChannelClosed`] (a closed dialog never approves); an approval asked where
//!   nobody is shown it ends the same way at once. A *held* approval (asked by a turn no client
//!   started, a routine's) is the exception: it is shown to every Subscribe stream of its session
//!   on any channel, may be decided by any of them, and waits for its deadline (the approver's
//!   hold, `[routines] approval_timeout`) however many viewers come and go.
//! - Every newly asked approval is offered to the channel's watchers ([`ApprovalRegistry::watch`])
//!   so a client that is not on the session (Telegram, `tau approvals`) can learn of it.
//! - Every approval is resolved exactly once, under the registry lock: the first resolution wins
//!   (a decision, a closed channel, the gate's timeout or a cancel, see
//!   [`ApprovalRegistry::settle`]); its waiter gets that resolution, every later resolution learns
//!   it (`AlreadyDecided` or `Expired`) for as long as the id is remembered.
//! - An approval is announced (`ApprovalResolved`, remembered, the DecideApproval answer) as what
//!   the gate recorded: a person's approval waits, decided but unannounced, until the gate's
//!   `approved` record is durable; if that record fails, the approval ends as `Error` everywhere.
//! - A waiter that goes away without settling (its task was dropped) resolves its approval as
//!   `Cancelled`, so nothing stays pending without a waiter.
//! - Live attachments are bounded per session and overall ([`AttachLimits`]); one more is refused.
//! - State changes that publish an event run inside the session bus's `publish_with` (bus lock,
//!   then the registry lock), so snapshots and events agree; the registry lock is a std mutex never
//!   held across an `.await` and never held while taking a bus lock.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{broadcast, oneshot};
use tracing::info;

use crate::gate::ApprovalOutcome;
use crate::hub::events::EventBus;
use crate::hub::events::{EventKind, PendingInfo};

pub mod attach;
pub mod decide;
pub mod grace;
pub mod readiness;
pub mod restart;
pub mod scan_mark;
pub mod watch;
pub use attach::{AttachError, AttachLimits, Attachment};
pub use decide::{
    ClientApprover, DecideError, DecideOutcome, HUB_APPROVER, PendingTicket, decide_request,
};
pub use grace::LAG_GRACE;
pub use readiness::{ApprovalReadiness, FLUSH_WAIT, TurnSlot};
pub use restart::{ExpiredApproval, expire_stale_approvals};
pub use scan_mark::{ScanJournal, ScanPlan};
pub use watch::{ApprovalWatch, pending_of, watch_channel};

/// How many resolved approval ids are remembered for late decisions.
pub const REMEMBERED_RESOLUTIONS: usize = 4096;
/// How many newly asked approvals a watcher may fall behind by before it must list them again.
pub const WATCH_BUFFER: usize = 64;

struct PendingEntry {
    info: PendingInfo,
    bus: Arc<EventBus>,
    responder: Option<oneshot::Sender<ApprovalOutcome>>,
    asked: u64,
    /// Live attachments on the approval's session and channel that were shown it.
    viewers: HashSet<String>,
}

/// What an attachment is shown (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// A Subscribe stream: every approval of its session.
    Session,
    /// A StartTurn stream: the approvals of this turn.
    Turn(String),
}

impl Scope {
    fn shows(&self, info: &PendingInfo) -> bool {
        match self {
            Self::Session => true,
            Self::Turn(turn_id) => *turn_id == info.turn_id,
        }
    }
}

pub(crate) struct AttachmentEntry {
    session_id: String,
    channel: String,
    scope: Scope,
}

impl AttachmentEntry {
    fn shows(&self, info: &PendingInfo) -> bool {
        if info.held {
            // Nobody attached asked it: every subscriber of its session is shown it.
            return self.session_id == info.request.session_id && self.scope == Scope::Session;
        }
        self.session_id == info.request.session_id
            && self.channel == info.request.channel
            && self.scope.shows(info)
    }
}

/// An approval a person approved whose `approved` record the gate is writing: decided, and not
/// announced until the record is durable or has failed ([`ApprovalRegistry::confirm`]), so every
/// report of it says what the record says.
struct Confirming {
    info: PendingInfo,
    bus: Arc<EventBus>,
    decided_by: Option<String>,
    /// Decisions waiting to report how it ended (bounded by the calls in flight).
    waiters: Vec<oneshot::Sender<ApprovalOutcome>>,
}

#[derive(Default)]
struct State {
    pending: HashMap<String, PendingEntry>,
    confirming: HashMap<String, Confirming>,
    asked: u64,
    resolved: HashMap<String, ApprovalOutcome>,
    resolved_order: VecDeque<String>,
    attachments: HashMap<String, AttachmentEntry>,
    /// Live attachments per session.
    per_session: HashMap<String, usize>,
    /// Attachments held for a grace period after a lag: attached, but not deciding.
    held: HashSet<String>,
}

impl State {
    /// How an approval ended, as far as this hub knows: remembered, or approved and being
    /// recorded.
    fn ended(&self, approval_id: &str) -> Option<ApprovalOutcome> {
        if self.confirming.contains_key(approval_id) {
            return Some(ApprovalOutcome::Approved);
        }
        self.resolved.get(approval_id).copied()
    }

    fn remember(&mut self, approval_id: &str, resolution: ApprovalOutcome) {
        if self.resolved.len() == REMEMBERED_RESOLUTIONS
            && let Some(oldest) = self.resolved_order.pop_front()
        {
            self.resolved.remove(&oldest);
        }
        if self
            .resolved
            .insert(approval_id.to_owned(), resolution)
            .is_none()
        {
            self.resolved_order.push_back(approval_id.to_owned());
        }
    }
}

/// The hub's pending approvals and attachments. Shared as `Arc<ApprovalRegistry>`.
pub struct ApprovalRegistry {
    state: Mutex<State>,
    ids: AtomicU64,
    limits: AttachLimits,
    /// Every approval as it is asked, for watchers (bounded; a lagging watcher lists again).
    asked: broadcast::Sender<Arc<PendingInfo>>,
}

impl Default for ApprovalRegistry {
    fn default() -> Self {
        Self {
            state: Mutex::default(),
            ids: AtomicU64::default(),
            limits: AttachLimits::default(),
            asked: broadcast::channel(WATCH_BUFFER).0,
        }
    }
}

impl std::fmt::Debug for ApprovalRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalRegistry")
            .field("pending", &self.pending_count())
            .field("limits", &self.limits)
            .finish()
    }
}

impl ApprovalRegistry {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// A registry that allows at most `limits` live attachments.
    pub fn with_limits(limits: AttachLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            ..Self::default()
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Resolves, one at a time and each inside its bus's `publish_with`, every approval in `ids`
    /// that is still pending and no longer shown to any live attachment.
    fn close_unwatched(&self, ids: Vec<(String, Arc<EventBus>)>) {
        for (id, bus) in ids {
            bus.publish_with(|_| {
                let mut state = self.lock();
                let unwatched = state
                    .pending
                    .get(&id)
                    .is_some_and(|entry| entry.viewers.is_empty() && !entry.info.held);
                if !unwatched {
                    return (None, ());
                }
                (state.resolve(&id, ApprovalOutcome::ChannelClosed, None), ())
            });
        }
    }

    /// Registers an approval about to be asked and publishes `ApprovalRequested`; the ticket waits
    /// for its resolution. Its viewers are the live attachments on its session and channel whose
    /// streams carry it; asked where there are none, it is resolved as `ChannelClosed` at once.
    pub fn register(self: &Arc<Self>, bus: &Arc<EventBus>, info: PendingInfo) -> PendingTicket {
        let (responder, receiver) = oneshot::channel();
        let approval_id = info.request.approval_id.clone();
        let unwatched = bus.publish_with(|_| {
            let mut state = self.lock();
            state.asked += 1;
            let asked = state.asked;
            let viewers: HashSet<String> = state
                .attachments
                .iter()
                .filter(|(_, a)| a.shows(&info))
                .map(|(id, _)| id.clone())
                .collect();
            let unwatched = viewers.is_empty() && !info.held;
            let turn_id = (!info.turn_id.is_empty()).then(|| info.turn_id.clone());
            let event = EventKind::ApprovalRequested(info.clone());
            // Sent under the lock, so a watcher's listing and its stream agree; an error only
            // means nobody watches.
            let _ = self.asked.send(Arc::new(info.clone()));
            state.pending.insert(
                approval_id.clone(),
                PendingEntry {
                    info,
                    bus: Arc::clone(bus),
                    responder: Some(responder),
                    asked,
                    viewers,
                },
            );
            (Some((turn_id, event)), unwatched)
        });
        if unwatched {
            info!(%approval_id, "no client attached on the approval's channel is shown it; rejecting");
            self.close_unwatched(vec![(approval_id.clone(), Arc::clone(bus))]);
        }
        PendingTicket {
            registry: Arc::clone(self),
            approval_id,
            receiver,
            done: false,
        }
    }

    /// Resolves every approval pending in a session as `Cancelled` (the hub is stopping).
    pub fn cancel_session(&self, session_id: &str) {
        let ids: Vec<(String, Arc<EventBus>)> = self
            .lock()
            .pending
            .values()
            .filter(|e| e.info.request.session_id == session_id)
            .map(|e| (e.info.request.approval_id.clone(), Arc::clone(&e.bus)))
            .collect();
        for (id, bus) in ids {
            bus.publish_with(|_| {
                (
                    self.lock().resolve(&id, ApprovalOutcome::Cancelled, None),
                    (),
                )
            });
        }
    }

    /// Remembers how an approval of an earlier hub ended (expired by restart at start-up, or read
    /// back from the session's stored events).
    pub fn remember_resolved(&self, approval_id: &str, resolution: ApprovalOutcome) {
        let mut state = self.lock();
        if !state.pending.contains_key(approval_id) {
            state.remember(approval_id, resolution);
        }
    }

    /// Remembers an approval found pending in a stored session at start-up as expired by restart.
    pub fn remember_expired(&self, approval_id: &str) {
        self.remember_resolved(approval_id, ApprovalOutcome::ExpiredByRestart);
    }

    /// Pending approvals, oldest first; of one session when `session_id` is given.
    pub fn list_pending(&self, session_id: Option<&str>) -> Vec<PendingInfo> {
        let state = self.lock();
        let mut entries: Vec<&PendingEntry> = state
            .pending
            .values()
            .filter(|e| session_id.is_none_or(|s| e.info.request.session_id == s))
            .collect();
        entries.sort_by_key(|e| e.asked);
        entries.into_iter().map(|e| e.info.clone()).collect()
    }

    /// The approvals pending now (oldest first) and every one asked from now on, with nothing
    /// missed between the two.
    pub fn watch(&self) -> (Vec<PendingInfo>, broadcast::Receiver<Arc<PendingInfo>>) {
        let state = self.lock();
        let receiver = self.asked.subscribe();
        let mut entries: Vec<&PendingEntry> = state.pending.values().collect();
        entries.sort_by_key(|e| e.asked);
        (
            entries.into_iter().map(|e| e.info.clone()).collect(),
            receiver,
        )
    }

    /// Whether approval `approval_id` is still pending.
    pub fn is_pending(&self, approval_id: &str) -> bool {
        self.lock().pending.contains_key(approval_id)
    }

    /// How many approvals are pending over all sessions.
    pub fn pending_count(&self) -> usize {
        self.lock().pending.len()
    }

    /// How an approval ended, if it did and is remembered (an approval being recorded counts as
    /// approved).
    pub fn resolution_of(&self, approval_id: &str) -> Option<ApprovalOutcome> {
        self.lock().ended(approval_id)
    }

    /// The session a live attachment is on.
    pub fn session_of(&self, attachment_id: &str) -> Option<String> {
        self.lock()
            .attachments
            .get(attachment_id)
            .map(|a| a.session_id.clone())
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_client_approver;
