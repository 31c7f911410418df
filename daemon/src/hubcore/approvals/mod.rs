//! [`ApprovalRegistry`]: the hub's pending tier-2 approvals as entities with ids, and the clients'
//! attachments that may decide them.
//!
//! An attachment is one live client stream (Subscribe or StartTurn) on a session and a channel; its
//! [`Attachment`] guard ends it on drop.
//!
//! Invariants:
//! - A decision counts only when it names a live attachment on the approval's session and channel.
//!   An attachment cut off as lagging is held for a grace period ([`grace`]): it still counts as
//!   attached (its channel's approvals stay pending for the client to resubscribe) but no longer
//!   decides.
//! - When the last attachment on a (session, channel) goes, every approval pending there ends as
//!   [`Resolution::ChannelClosed`] (a closed dialog never approves); an approval asked where nobody is
//!   attached ends the same way at once.
//! - Every approval is resolved exactly once; its waiter gets that resolution, every later decision
//!   learns it (`AlreadyDecided` or `Expired`) for as long as the id is remembered.
//! - A waiter that goes away (the gate's timeout or a cancelled turn dropped it) resolves its
//!   approval as `Timeout` or `Cancelled`, so nothing stays pending without a waiter.
//! - State changes that publish an event run inside the session bus's `publish_with` (bus lock,
//!   then the registry lock), so snapshots and events agree; the registry lock is a std mutex never
//!   held across an `.await` and never held while taking a bus lock.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tracing::info;

use super::bus::EventBus;
use super::event::{EventKind, PendingInfo, Resolution};
use super::ids::new_id;

pub mod grace;
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
}

struct PendingEntry {
    info: PendingInfo,
    bus: Arc<EventBus>,
    responder: Option<oneshot::Sender<Resolution>>,
    asked: u64,
}

#[derive(Default)]
struct State {
    pending: HashMap<String, PendingEntry>,
    asked: u64,
    resolved: HashMap<String, Resolution>,
    resolved_order: VecDeque<String>,
    attachments: HashMap<String, (String, String)>,
    attached: HashMap<(String, String), usize>,
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

    fn attached_count(&self, session_id: &str, channel: &str) -> usize {
        self.attached
            .get(&(session_id.to_owned(), channel.to_owned()))
            .copied()
            .unwrap_or(0)
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
}

impl std::fmt::Debug for ApprovalRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalRegistry")
            .field("pending", &self.pending_count())
            .finish()
    }
}

impl ApprovalRegistry {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Attaches a client to `bus`'s session on `channel`; the attachment ends when the guard drops.
    pub fn attach(self: &Arc<Self>, bus: &Arc<EventBus>, channel: &str) -> Attachment {
        let id = new_id("att", self.ids.fetch_add(1, Ordering::Relaxed));
        let session_id = bus.session_id().to_owned();
        let mut state = self.lock();
        state
            .attachments
            .insert(id.clone(), (session_id.clone(), channel.to_owned()));
        *state
            .attached
            .entry((session_id.clone(), channel.to_owned()))
            .or_insert(0) += 1;
        Attachment {
            registry: Arc::clone(self),
            bus: Arc::clone(bus),
            id,
            session_id,
            channel: channel.to_owned(),
        }
    }

    /// Marks a live attachment as held after a lag: it stays attached but no longer decides.
    fn hold(&self, attachment_id: &str) {
        let mut state = self.lock();
        if state.attachments.contains_key(attachment_id) {
            state.held.insert(attachment_id.to_owned());
        }
    }

    /// Whether any client is attached on `(session_id, channel)`.
    pub fn is_attached(&self, session_id: &str, channel: &str) -> bool {
        self.lock().attached_count(session_id, channel) > 0
    }

    /// Live attachments on a session, over all channels.
    pub fn attachments_on(&self, session_id: &str) -> usize {
        self.lock()
            .attached
            .iter()
            .filter(|((session, _), _)| session == session_id)
            .map(|(_, n)| *n)
            .sum()
    }

    fn detach(&self, bus: &EventBus, attachment_id: &str, session_id: &str, channel: &str) {
        let last = {
            let mut state = self.lock();
            if state.attachments.remove(attachment_id).is_none() {
                return;
            }
            state.held.remove(attachment_id);
            let key = (session_id.to_owned(), channel.to_owned());
            let left = state.attached.get_mut(&key).map(|n| {
                *n = n.saturating_sub(1);
                *n
            });
            if left == Some(0) {
                state.attached.remove(&key);
            }
            left.unwrap_or(0) == 0
        };
        if last {
            self.close_channel(bus, session_id, channel);
        }
    }

    /// Resolves every approval pending on `(session_id, channel)` as `ChannelClosed`, as long as
    /// nobody is attached there.
    fn close_channel(&self, bus: &EventBus, session_id: &str, channel: &str) {
        let ids: Vec<String> = self
            .lock()
            .pending
            .values()
            .filter(|e| e.info.session_id == session_id && e.info.channel == channel)
            .map(|e| e.info.approval_id.clone())
            .collect();
        for id in ids {
            bus.publish_with(|_| {
                let mut state = self.lock();
                if state.attached_count(session_id, channel) > 0 {
                    return (None, ());
                }
                (state.resolve(&id, Resolution::ChannelClosed, None), ())
            });
        }
    }

    /// Registers an approval about to be asked and publishes `ApprovalRequested`; the ticket waits
    /// for its resolution. Asked where nobody is attached, it is resolved as `ChannelClosed` at once.
    pub fn register(
        self: &Arc<Self>,
        bus: &Arc<EventBus>,
        info: PendingInfo,
        timeout: Option<Duration>,
    ) -> PendingTicket {
        let (responder, receiver) = oneshot::channel();
        let approval_id = info.approval_id.clone();
        let (session_id, channel) = (info.session_id.clone(), info.channel.clone());
        bus.publish_with(|_| {
            let mut state = self.lock();
            state.asked += 1;
            let asked = state.asked;
            let turn_id = (!info.turn_id.is_empty()).then(|| info.turn_id.clone());
            let event = EventKind::ApprovalRequested(info.clone());
            state.pending.insert(
                approval_id.clone(),
                PendingEntry {
                    info,
                    bus: Arc::clone(bus),
                    responder: Some(responder),
                    asked,
                },
            );
            (Some((turn_id, event)), ())
        });
        if !self.is_attached(&session_id, &channel) {
            info!(%approval_id, %channel, "no client is attached on the approval's channel; rejecting");
            self.close_channel(bus, &session_id, &channel);
        }
        PendingTicket {
            registry: Arc::clone(self),
            approval_id,
            receiver,
            timeout,
            registered: Instant::now(),
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
                None => return Ok(settled(state.resolved.get(approval_id).copied())),
            }
        };
        bus.publish_with(|_| {
            let mut state = self.lock();
            let Some(entry) = state.pending.get(approval_id) else {
                let outcome = settled(state.resolved.get(approval_id).copied());
                return (None, Ok(outcome));
            };
            let Some((session, channel)) = state.attachments.get(attachment_id) else {
                return (
                    None,
                    Err(DecideError::NotAttached(attachment_id.to_owned())),
                );
            };
            if state.held.contains(attachment_id) {
                return (None, Err(DecideError::CutOff(attachment_id.to_owned())));
            }
            if *session != entry.info.session_id || *channel != entry.info.channel {
                let error = DecideError::WrongChannel {
                    session_id: entry.info.session_id.clone(),
                    asked_on: entry.info.channel.clone(),
                    attached_session: session.clone(),
                    attached_on: channel.clone(),
                };
                return (None, Err(error));
            }
            let channel = channel.clone();
            let resolution = match answer {
                ApprovalAnswer::Approve => Resolution::Approved,
                ApprovalAnswer::Reject => Resolution::Rejected,
            };
            let event = state.resolve(approval_id, resolution, Some(&channel));
            (event, Ok(DecideOutcome::Applied(resolution)))
        })
    }

    /// Resolves an approval whose waiter went away.
    fn abandon(&self, approval_id: &str, resolution: Resolution) {
        let bus = match self.lock().pending.get(approval_id) {
            Some(entry) => Arc::clone(&entry.bus),
            None => return,
        };
        bus.publish_with(|_| (self.lock().resolve(approval_id, resolution, None), ()));
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

    /// Remembers an approval found pending in a stored session at start-up as expired by restart.
    pub fn remember_expired(&self, approval_id: &str) {
        self.lock()
            .remember(approval_id, Resolution::ExpiredByRestart);
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
}

fn settled(resolution: Option<Resolution>) -> DecideOutcome {
    match resolution {
        None => DecideOutcome::NotFound,
        Some(r) if r.is_decision() => DecideOutcome::AlreadyDecided(r),
        Some(r) => DecideOutcome::Expired(r),
    }
}

/// One client's attachment on a session and channel; dropping it detaches.
pub struct Attachment {
    registry: Arc<ApprovalRegistry>,
    bus: Arc<EventBus>,
    id: String,
    session_id: String,
    channel: String,
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("id", &self.id)
            .field("session_id", &self.session_id)
            .field("channel", &self.channel)
            .finish()
    }
}

impl Attachment {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn channel(&self) -> &str {
        &self.channel
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.registry
            .detach(&self.bus, &self.id, &self.session_id, &self.channel);
    }
}

/// Waits for one approval's resolution; dropping it before then resolves the approval as `Timeout`
/// (when its timeout has run out) or `Cancelled`.
pub struct PendingTicket {
    registry: Arc<ApprovalRegistry>,
    approval_id: String,
    receiver: oneshot::Receiver<Resolution>,
    timeout: Option<Duration>,
    registered: Instant,
    done: bool,
}

/// The gate's timer may fire a little before the registry's own reckoning of the deadline.
const TIMEOUT_SLACK: Duration = Duration::from_millis(100);

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
        if self.done {
            return;
        }
        let timed_out = self
            .timeout
            .is_some_and(|limit| self.registered.elapsed() + TIMEOUT_SLACK >= limit);
        let resolution = if timed_out {
            Resolution::Timeout
        } else {
            Resolution::Cancelled
        };
        self.registry.abandon(&self.approval_id, resolution);
    }
}

#[cfg(test)]
mod tests;
