//! [`ApprovalRegistry`]: the hub's pending tier-2 approvals as entities with ids, and the clients'
//! attachments that may decide them. The registry is the one place where an approval's winner is
//! chosen; every report of it (the DecideApproval answer, the live `ApprovalResolved` event, the
//! gate's verdict and stored `approval` event, the logs) reads that winner.
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
//! - When the last viewer of an approval goes, the approval ends as [`Resolution::ChannelClosed`]
//!   (a closed dialog never approves); an approval asked where nobody is shown it ends the same way
//!   at once.
//! - Every approval is resolved exactly once, under the registry lock: the first resolution wins
//!   (a decision, a closed channel, the gate's timeout or a cancel, see
//!   [`ApprovalRegistry::settle`]); its waiter gets that resolution, every later resolution learns
//!   it (`AlreadyDecided` or `Expired`) for as long as the id is remembered.
//! - A waiter that goes away without settling (its task was dropped) resolves its approval as
//!   `Cancelled`, so nothing stays pending without a waiter.
//! - Live attachments are bounded per session and overall ([`AttachLimits`]); one more is refused.
//! - State changes that publish an event run inside the session bus's `publish_with` (bus lock,
//!   then the registry lock), so snapshots and events agree; the registry lock is a std mutex never
//!   held across an `.await` and never held while taking a bus lock.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;
use tracing::info;

use super::bus::EventBus;
use super::event::{EventKind, PendingInfo, Resolution};

pub mod attach;
pub mod grace;
pub use attach::{AttachError, AttachLimits, Attachment};
pub use grace::LAG_GRACE;

/// How many resolved approval ids are remembered for late decisions.
pub const REMEMBERED_RESOLUTIONS: usize = 4096;

/// A person's answer to an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    Approve,
    Reject,
}

/// What became of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecideOutcome {
    /// The decision resolved the approval.
    Applied(Resolution),
    /// It had been decided already (or its channel closed).
    AlreadyDecided(Resolution),
    /// It had timed out, been cancelled, or expired by a restart.
    Expired(Resolution),
    /// No approval has this id.
    NotFound,
}

impl DecideOutcome {
    /// The outcome of a decision on an approval that already ended as `resolution` (`None`: the
    /// id is unknown).
    pub fn settled(resolution: Option<Resolution>) -> Self {
        match resolution {
            None => Self::NotFound,
            Some(r) if r.is_decision() => Self::AlreadyDecided(r),
            Some(r) => Self::Expired(r),
        }
    }
}

/// A decision that does not count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// The attachment was cut off as lagging; its client resubscribes for a new one.
    #[error(
        "attachment {0:?} was cut off for falling behind; subscribe again and decide with the new attachment id"
    )]
    CutOff(String),
    /// The attachment id names no live attachment.
    #[error(
        "attachment {0:?} is not live; decisions count only from a client attached with Subscribe or StartTurn"
    )]
    NotAttached(String),
    /// The attachment is on another session or channel.
    #[error(
        "this approval was asked on channel {asked_on:?} of session {session_id}; a client attached there must decide it (this one is attached on {attached_on:?} of session {attached_session})"
    )]
    WrongChannel {
        session_id: String,
        asked_on: String,
        attached_session: String,
        attached_on: String,
    },
    /// The attachment's stream never showed this approval (a StartTurn stream of another turn).
    #[error(
        "attachment {attachment_id:?} was never shown approval {approval_id:?} (a StartTurn stream shows only its own turn's approvals); decide from a client that showed it, or subscribe to see it"
    )]
    NotShown {
        approval_id: String,
        attachment_id: String,
    },
}

struct PendingEntry {
    info: PendingInfo,
    bus: Arc<EventBus>,
    responder: Option<oneshot::Sender<Resolution>>,
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
        self.session_id == info.session_id && self.channel == info.channel && self.scope.shows(info)
    }
}

#[derive(Default)]
struct State {
    pending: HashMap<String, PendingEntry>,
    asked: u64,
    resolved: HashMap<String, Resolution>,
    resolved_order: VecDeque<String>,
    attachments: HashMap<String, AttachmentEntry>,
    /// Live attachments per session.
    per_session: HashMap<String, usize>,
    /// Attachments held for a grace period after a lag: attached, but not deciding.
    held: HashSet<String>,
}

impl State {
    fn remember(&mut self, approval_id: &str, resolution: Resolution) {
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

    /// Removes and resolves a pending approval; returns the event to publish.
    fn resolve(
        &mut self,
        approval_id: &str,
        resolution: Resolution,
        decided_by: Option<&str>,
    ) -> Option<(Option<String>, EventKind)> {
        let mut entry = self.pending.remove(approval_id)?;
        if let Some(responder) = entry.responder.take() {
            // An error only means the waiter is gone already.
            let _ = responder.send(resolution);
        }
        self.remember(approval_id, resolution);
        let info = entry.info;
        info!(
            approval_id = %info.approval_id,
            session_id = %info.session_id,
            tool = %info.tool,
            channel = %info.channel,
            resolution = resolution.as_str(),
            "approval resolved"
        );
        let turn_id = (!info.turn_id.is_empty()).then(|| info.turn_id.clone());
        Some((
            turn_id,
            EventKind::ApprovalResolved {
                approval_id: info.approval_id,
                tool: info.tool,
                tool_use_id: info.tool_use_id,
                resolution,
                decided_by_channel: decided_by.map(str::to_owned),
            },
        ))
    }
}

/// The hub's pending approvals and attachments. Shared as `Arc<ApprovalRegistry>`.
#[derive(Default)]
pub struct ApprovalRegistry {
    state: Mutex<State>,
    ids: AtomicU64,
    limits: AttachLimits,
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
                    .is_some_and(|entry| entry.viewers.is_empty());
                if !unwatched {
                    return (None, ());
                }
                (state.resolve(&id, Resolution::ChannelClosed, None), ())
            });
        }
    }

    /// Registers an approval about to be asked and publishes `ApprovalRequested`; the ticket waits
    /// for its resolution. Its viewers are the live attachments on its session and channel whose
    /// streams carry it; asked where there are none, it is resolved as `ChannelClosed` at once.
    pub fn register(self: &Arc<Self>, bus: &Arc<EventBus>, info: PendingInfo) -> PendingTicket {
        let (responder, receiver) = oneshot::channel();
        let approval_id = info.approval_id.clone();
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
            let unwatched = viewers.is_empty();
            let turn_id = (!info.turn_id.is_empty()).then(|| info.turn_id.clone());
            let event = EventKind::ApprovalRequested(info.clone());
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

    /// Applies a person's decision from the client holding `attachment_id`.
    pub fn decide(
        &self,
        approval_id: &str,
        answer: ApprovalAnswer,
        attachment_id: &str,
    ) -> Result<DecideOutcome, DecideError> {
        let bus = {
            let state = self.lock();
            match state.pending.get(approval_id) {
                Some(entry) => Arc::clone(&entry.bus),
                None => {
                    return Ok(DecideOutcome::settled(
                        state.resolved.get(approval_id).copied(),
                    ));
                }
            }
        };
        bus.publish_with(|_| {
            let mut state = self.lock();
            let Some(entry) = state.pending.get(approval_id) else {
                let outcome = DecideOutcome::settled(state.resolved.get(approval_id).copied());
                return (None, Ok(outcome));
            };
            let Some(attached) = state.attachments.get(attachment_id) else {
                return (
                    None,
                    Err(DecideError::NotAttached(attachment_id.to_owned())),
                );
            };
            if state.held.contains(attachment_id) {
                return (None, Err(DecideError::CutOff(attachment_id.to_owned())));
            }
            if attached.session_id != entry.info.session_id
                || attached.channel != entry.info.channel
            {
                let error = DecideError::WrongChannel {
                    session_id: entry.info.session_id.clone(),
                    asked_on: entry.info.channel.clone(),
                    attached_session: attached.session_id.clone(),
                    attached_on: attached.channel.clone(),
                };
                return (None, Err(error));
            }
            if !entry.viewers.contains(attachment_id) {
                let error = DecideError::NotShown {
                    approval_id: approval_id.to_owned(),
                    attachment_id: attachment_id.to_owned(),
                };
                return (None, Err(error));
            }
            let channel = attached.channel.clone();
            let resolution = match answer {
                ApprovalAnswer::Approve => Resolution::Approved,
                ApprovalAnswer::Reject => Resolution::Rejected,
            };
            let event = state.resolve(approval_id, resolution, Some(&channel));
            (event, Ok(DecideOutcome::Applied(resolution)))
        })
    }

    /// Ends an approval as `resolution` unless it ended already, and returns how it ended: the
    /// first resolution wins. `None` for an id the registry does not know (never asked, or
    /// forgotten). The gate settles with its timeout or a cancel this way, so what it records is
    /// what every other report says.
    pub fn settle(&self, approval_id: &str, resolution: Resolution) -> Option<Resolution> {
        let bus = {
            let state = self.lock();
            match state.pending.get(approval_id) {
                Some(entry) => Arc::clone(&entry.bus),
                None => return state.resolved.get(approval_id).copied(),
            }
        };
        bus.publish_with(|_| {
            let mut state = self.lock();
            let event = state.resolve(approval_id, resolution, None);
            let winner = state.resolved.get(approval_id).copied();
            (event, winner)
        })
    }

    /// Resolves every approval pending in a session as `Cancelled` (the hub is stopping).
    pub fn cancel_session(&self, session_id: &str) {
        let ids: Vec<(String, Arc<EventBus>)> = self
            .lock()
            .pending
            .values()
            .filter(|e| e.info.session_id == session_id)
            .map(|e| (e.info.approval_id.clone(), Arc::clone(&e.bus)))
            .collect();
        for (id, bus) in ids {
            bus.publish_with(|_| (self.lock().resolve(&id, Resolution::Cancelled, None), ()));
        }
    }

    /// Remembers how an approval of an earlier hub ended (expired by restart at start-up, or read
    /// back from the session's stored events).
    pub fn remember_resolved(&self, approval_id: &str, resolution: Resolution) {
        let mut state = self.lock();
        if !state.pending.contains_key(approval_id) {
            state.remember(approval_id, resolution);
        }
    }

    /// Remembers an approval found pending in a stored session at start-up as expired by restart.
    pub fn remember_expired(&self, approval_id: &str) {
        self.remember_resolved(approval_id, Resolution::ExpiredByRestart);
    }

    /// Pending approvals, oldest first; of one session when `session_id` is given.
    pub fn list_pending(&self, session_id: Option<&str>) -> Vec<PendingInfo> {
        let state = self.lock();
        let mut entries: Vec<&PendingEntry> = state
            .pending
            .values()
            .filter(|e| session_id.is_none_or(|s| e.info.session_id == s))
            .collect();
        entries.sort_by_key(|e| e.asked);
        entries.into_iter().map(|e| e.info.clone()).collect()
    }

    /// How many approvals are pending over all sessions.
    pub fn pending_count(&self) -> usize {
        self.lock().pending.len()
    }

    /// How an approval ended, if it did and is remembered.
    pub fn resolution_of(&self, approval_id: &str) -> Option<Resolution> {
        self.lock().resolved.get(approval_id).copied()
    }

    /// The session a live attachment is on.
    pub fn session_of(&self, attachment_id: &str) -> Option<String> {
        self.lock()
            .attachments
            .get(attachment_id)
            .map(|a| a.session_id.clone())
    }
}

/// Waits for one approval's resolution; dropping it before then resolves the approval as
/// `Cancelled` (unless it ended already).
pub struct PendingTicket {
    registry: Arc<ApprovalRegistry>,
    approval_id: String,
    receiver: oneshot::Receiver<Resolution>,
    done: bool,
}

impl PendingTicket {
    pub fn approval_id(&self) -> &str {
        &self.approval_id
    }

    /// The resolution (`Cancelled` if the registry went away, which only happens at shutdown).
    pub async fn wait(&mut self) -> Resolution {
        let resolution = (&mut self.receiver).await.unwrap_or(Resolution::Cancelled);
        self.done = true;
        resolution
    }
}

impl Drop for PendingTicket {
    fn drop(&mut self) {
        if !self.done {
            self.registry
                .settle(&self.approval_id, Resolution::Cancelled);
        }
    }
}

#[cfg(test)]
mod tests;
