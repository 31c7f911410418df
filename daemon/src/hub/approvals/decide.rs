//! A person's decision, from `DecideApproval` to the gate's answer, in the order it happens
//! (ARCHITECTURE.md, "The path of an approval"):
//!
//! 1. [`decide_request`] (what `HubCore::decide` calls) checks the request; an id this hub never
//!    saw is looked up in the stored events ([`stored_decision`], reading them with
//!    `super::restart::stored_outcome`).
//! 2. [`ApprovalRegistry::decide`] refuses a decision from an attachment that may not decide it.
//! 3. `State::resolve` chooses the winner: it sends the outcome to the waiting ticket, remembers
//!    it and returns the `ApprovalResolved` event the bus publishes; an approval instead waits,
//!    decided and unannounced, for step 5.
//! 4. [`PendingTicket::wait`] wakes [`ClientApprover::decide`], which hands the outcome to the gate
//!    (`crate::gate::PendingApproval`, which records an approval and makes the permit). A gate that
//!    stops waiting first settles with [`ClientApprover::conclude`] → [`ApprovalRegistry::settle`].
//! 5. The gate writes the `approved` record and tells [`ClientApprover::recorded`] what became of
//!    it; [`ApprovalRegistry::confirm`] announces the approval as that (`approved`, or `error`
//!    when the write failed and the tool does not run), and the DecideApproval call waiting in
//!    [`decide_request`] answers it.
//!
//! Invariants:
//! - The registry chooses the winner, under its lock inside the session bus's `publish_with`: the
//!   first resolution wins (a decision, a closed channel, the gate's timeout or a cancel); every
//!   report of it (the `DecideApproval` answer, `ApprovalResolved`, the gate's record) reads it.
//! - [`ClientApprover`] asks nobody about an approval whose `pending` record is not durably stored
//!   (`super::readiness`), and registers it only after the turn's earlier events are published.
//! - Only [`ApprovalOutcome::Approved`] approves; the gate records a closed channel as a rejection
//!   ([`ApprovalOutcome::as_recorded_by_gate`]). The gate settling on its own can end a question
//!   only as a timeout, a rejection or a cancel, never as an approval.
//! - A ticket dropped before its answer (the gate's wait was dropped) resolves its approval as
//!   `Cancelled`, so nothing stays pending without a waiter. The approver has no timeout of its
//!   own for a client's turn (the gate's, from the hub's configuration, applies); for a turn no
//!   client started it holds the question for the turn's hold at most and then settles it as
//!   `Timeout`.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::oneshot;
use tracing::{info, warn};

use super::readiness::{ApprovalReadiness, FLUSH_WAIT, TurnSlot};
use super::restart::stored_outcome;
use super::{ApprovalRegistry, Confirming, State};
use crate::gate::{ApprovalAnswer, ApprovalOutcome, ApprovalRequest, Approver, ApproverError};
use crate::hub::error::CoreError;
use crate::hub::events::EventBus;
use crate::hub::events::{EventKind, PendingInfo, now_rfc3339};
use crate::hub::limits::{MAX_REF_ID_LEN, check_len};
use crate::store::{SessionStore, store_io};

/// The longest a decision waits to report an approval the gate is recording (a store write).
pub const RECORD_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A person's decision, from the client holding `attachment_id`, checked before anything is
/// touched. An approval is reported as the gate recorded it (`Error` when its record failed and
/// the tool did not run); an id this hub does not remember is looked up in the stored events of
/// the attachment's session ([`stored_decision`]).
pub async fn decide_request(
    registry: &ApprovalRegistry,
    store: &Arc<dyn SessionStore>,
    approval_id: &str,
    answer: ApprovalAnswer,
    attachment_id: &str,
) -> Result<DecideOutcome, CoreError> {
    if approval_id.is_empty() {
        return Err(CoreError::InvalidArgument(
            "approval_id is empty".to_owned(),
        ));
    }
    if attachment_id.is_empty() {
        return Err(CoreError::InvalidArgument(
            "attachment_id is empty; a decision counts only from a client attached with Subscribe or StartTurn".to_owned(),
        ));
    }
    check_len("approval_id", approval_id, MAX_REF_ID_LEN)?;
    check_len("attachment_id", attachment_id, MAX_REF_ID_LEN)?;
    let outcome = registry
        .decide(approval_id, answer, attachment_id)
        .map_err(CoreError::from)?;
    let recorded = |outcome: Option<ApprovalOutcome>| outcome.unwrap_or(ApprovalOutcome::Approved);
    match outcome {
        DecideOutcome::NotFound => Ok(stored_decision(
            registry,
            store.as_ref(),
            approval_id,
            attachment_id,
        )),
        DecideOutcome::Applied(ApprovalOutcome::Approved) => Ok(DecideOutcome::Applied(recorded(
            registry.recorded(approval_id, RECORD_WAIT).await,
        ))),
        DecideOutcome::AlreadyDecided(ApprovalOutcome::Approved) => Ok(DecideOutcome::settled(
            Some(recorded(registry.recorded(approval_id, RECORD_WAIT).await)),
        )),
        outcome => Ok(outcome),
    }
}

/// For an approval this hub does not remember: how it ended according to the stored events of
/// the attachment's session (an earlier hub asked it), read back once and then remembered.
fn stored_decision(
    registry: &ApprovalRegistry,
    store: &dyn SessionStore,
    approval_id: &str,
    attachment_id: &str,
) -> DecideOutcome {
    let Some(session_id) = registry.session_of(attachment_id) else {
        return DecideOutcome::NotFound;
    };
    let events = match store_io(|| store.read_events(&session_id)) {
        Ok(events) => events,
        Err(error) => {
            warn!(%session_id, %approval_id, "cannot read the session's events to look the approval up: {error}");
            return DecideOutcome::NotFound;
        }
    };
    let Some(outcome) = stored_outcome(&events, approval_id) else {
        return DecideOutcome::NotFound;
    };
    registry.remember_resolved(approval_id, outcome);
    DecideOutcome::settled(Some(outcome))
}

impl ApprovalRegistry {
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
                None => return Ok(DecideOutcome::settled(state.ended(approval_id))),
            }
        };
        bus.publish_with(|_| {
            let mut state = self.lock();
            let Some(entry) = state.pending.get(approval_id) else {
                let outcome = DecideOutcome::settled(state.ended(approval_id));
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
            let other_channel = attached.channel != entry.info.request.channel && !entry.info.held;
            if attached.session_id != entry.info.request.session_id || other_channel {
                let error = DecideError::WrongChannel {
                    session_id: entry.info.request.session_id.clone(),
                    asked_on: entry.info.request.channel.clone(),
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
            let outcome = answer.outcome();
            let event = state.resolve(approval_id, outcome, Some(&channel));
            (event, Ok(DecideOutcome::Applied(outcome)))
        })
    }

    /// Ends an approval as `outcome` unless it ended already, and returns how it ended: the first
    /// resolution wins. `None` for an id the registry does not know (never asked, or forgotten).
    /// The gate settles with its timeout or a cancel this way, so what it records is what every
    /// other report says.
    pub fn settle(&self, approval_id: &str, outcome: ApprovalOutcome) -> Option<ApprovalOutcome> {
        let bus = {
            let state = self.lock();
            match state.pending.get(approval_id) {
                Some(entry) => Arc::clone(&entry.bus),
                None => return state.ended(approval_id),
            }
        };
        bus.publish_with(|_| {
            let mut state = self.lock();
            let event = state.resolve(approval_id, outcome, None);
            let winner = state.ended(approval_id);
            (event, winner)
        })
    }

    /// The gate recorded an approved decision (`Approved`) or could not (`Error`): the approval
    /// ends as that, announced now (`ApprovalResolved`) and told to the decisions waiting on it.
    pub fn confirm(&self, approval_id: &str, recorded: ApprovalOutcome) {
        let bus = {
            let state = self.lock();
            match state.confirming.get(approval_id) {
                Some(entry) => Arc::clone(&entry.bus),
                None => return,
            }
        };
        bus.publish_with(|_| (self.lock().announce(approval_id, recorded), ()));
    }

    /// How approval `approval_id` ended once its record is written: at once when it is not being
    /// recorded, else when the gate confirms it (at most `wait`, then as approved).
    pub async fn recorded(
        &self,
        approval_id: &str,
        wait: std::time::Duration,
    ) -> Option<ApprovalOutcome> {
        let receiver = {
            let mut state = self.lock();
            let Some(entry) = state.confirming.get_mut(approval_id) else {
                return state.ended(approval_id);
            };
            let (sender, receiver) = oneshot::channel();
            entry.waiters.push(sender);
            receiver
        };
        match tokio::time::timeout(wait, receiver).await {
            Ok(Ok(outcome)) => Some(outcome),
            _ => self.resolution_of(approval_id),
        }
    }
}

impl State {
    /// Removes and resolves a pending approval: its ticket gets `outcome`, which is remembered;
    /// returns the `ApprovalResolved` event to publish (`None`: it was not pending).
    pub(super) fn resolve(
        &mut self,
        approval_id: &str,
        outcome: ApprovalOutcome,
        decided_by: Option<&str>,
    ) -> Option<(Option<String>, EventKind)> {
        let mut entry = self.pending.remove(approval_id)?;
        if let Some(responder) = entry.responder.take() {
            match responder.send(outcome) {
                // Announced once the gate has recorded it (`announce`).
                Ok(()) if outcome.is_approved() => {
                    self.confirming.insert(
                        approval_id.to_owned(),
                        Confirming {
                            info: entry.info,
                            bus: entry.bus,
                            decided_by: decided_by.map(str::to_owned),
                            waiters: Vec::new(),
                        },
                    );
                    return None;
                }
                // An error only means the waiter is gone already.
                Ok(()) | Err(_) => {}
            }
        }
        self.ended_as(approval_id, entry.info, outcome, decided_by)
    }

    /// Ends an approval being recorded as `recorded`; the `ApprovalResolved` event to publish.
    fn announce(
        &mut self,
        approval_id: &str,
        recorded: ApprovalOutcome,
    ) -> Option<(Option<String>, EventKind)> {
        let entry = self.confirming.remove(approval_id)?;
        for waiter in entry.waiters {
            let _ = waiter.send(recorded);
        }
        self.ended_as(
            approval_id,
            entry.info,
            recorded,
            entry.decided_by.as_deref(),
        )
    }

    /// Remembers how an approval ended, logs it and makes its `ApprovalResolved` event.
    fn ended_as(
        &mut self,
        approval_id: &str,
        info: PendingInfo,
        outcome: ApprovalOutcome,
        decided_by: Option<&str>,
    ) -> Option<(Option<String>, EventKind)> {
        self.remember(approval_id, outcome);
        info!(
            approval_id = %info.request.approval_id,
            session_id = %info.request.session_id,
            tool = %info.request.tool,
            channel = %info.request.channel,
            resolution = outcome.as_str(),
            "approval resolved"
        );
        let turn_id = (!info.turn_id.is_empty()).then(|| info.turn_id.clone());
        Some((
            turn_id,
            EventKind::ApprovalResolved {
                approval_id: info.request.approval_id,
                tool: info.request.tool,
                tool_use_id: info.request.tool_use_id,
                resolution: outcome,
                decided_by_channel: decided_by.map(str::to_owned),
            },
        ))
    }
}

/// Waits for one approval's outcome; dropping it before then resolves the approval as
/// `Cancelled` (unless it ended already).
pub struct PendingTicket {
    pub(super) registry: Arc<ApprovalRegistry>,
    pub(super) approval_id: String,
    pub(super) receiver: oneshot::Receiver<ApprovalOutcome>,
    pub(super) done: bool,
}

impl PendingTicket {
    pub fn approval_id(&self) -> &str {
        &self.approval_id
    }

    /// The outcome (`Cancelled` if the registry went away, which only happens at shutdown).
    pub async fn wait(&mut self) -> ApprovalOutcome {
        let outcome = (&mut self.receiver)
            .await
            .unwrap_or(ApprovalOutcome::Cancelled);
        self.done = true;
        outcome
    }
}

impl Drop for PendingTicket {
    fn drop(&mut self) {
        if !self.done {
            self.registry
                .settle(&self.approval_id, ApprovalOutcome::Cancelled);
        }
    }
}

/// The approver name recorded in `approval` events.
pub const HUB_APPROVER: &str = "hub";

/// The gate's approver in the hub: it asks the clients attached to the session, by registering
/// the question in the [`ApprovalRegistry`] and waiting for the winner. One per open session.
pub struct ClientApprover {
    registry: Arc<ApprovalRegistry>,
    bus: Arc<EventBus>,
    readiness: Arc<ApprovalReadiness>,
    turn: Arc<TurnSlot>,
}

impl std::fmt::Debug for ClientApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientApprover")
            .field("session_id", &self.bus.session_id())
            .finish()
    }
}

impl ClientApprover {
    pub fn new(
        registry: Arc<ApprovalRegistry>,
        bus: Arc<EventBus>,
        readiness: Arc<ApprovalReadiness>,
        turn: Arc<TurnSlot>,
    ) -> Self {
        Self {
            registry,
            bus,
            readiness,
            turn,
        }
    }
}

#[async_trait]
impl Approver for ClientApprover {
    fn name(&self) -> &str {
        HUB_APPROVER
    }

    /// Waits until the question is recorded and flushed, registers it (clients see
    /// `ApprovalRequested`) and returns the winner as the gate records it.
    async fn decide(&self, request: &ApprovalRequest) -> Result<ApprovalOutcome, ApproverError> {
        let recorded = self
            .readiness
            .take_when_flushed(&request.approval_id, FLUSH_WAIT)
            .await;
        if !recorded {
            return Err(ApproverError(
                "the approval could not be recorded in the session's events, so it was not asked"
                    .to_owned(),
            ));
        }
        let held_for = self.turn.held_for();
        let limit = match (request.timeout, held_for) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let deadline = limit
            .and_then(|t| jiff::SignedDuration::try_from(t).ok())
            .and_then(|t| jiff::Timestamp::now().checked_add(t).ok())
            .map(|t| t.to_string());
        let info = PendingInfo {
            request: request.clone(),
            turn_id: self.turn.get().unwrap_or_default(),
            asked_at: now_rfc3339(),
            deadline,
            held: held_for.is_some(),
        };
        let mut ticket = self.registry.register(&self.bus, info);
        let Some(hold) = held_for else {
            return Ok(ticket.wait().await.as_recorded_by_gate());
        };
        let outcome = match tokio::time::timeout(hold, ticket.wait()).await {
            Ok(outcome) => outcome,
            Err(_) => {
                info!(approval_id = %request.approval_id, "nobody decided a held approval before its deadline");
                self.registry
                    .settle(&request.approval_id, ApprovalOutcome::Timeout)
                    .unwrap_or(ApprovalOutcome::Timeout)
            }
        };
        Ok(outcome.as_recorded_by_gate())
    }

    /// The gate wrote (or failed to write) the approved record: the approval is announced as that.
    fn recorded(&self, request: &ApprovalRequest, outcome: ApprovalOutcome) {
        self.registry.confirm(&request.approval_id, outcome);
    }

    /// The gate stopped waiting with `proposed`: settles the approval as a timeout, a rejection or
    /// a cancel unless something won first, and returns the winner as the gate records it.
    fn conclude(&self, request: &ApprovalRequest, proposed: ApprovalOutcome) -> ApprovalOutcome {
        self.readiness.forget(&request.approval_id);
        let settled = match proposed {
            ApprovalOutcome::Timeout => ApprovalOutcome::Timeout,
            ApprovalOutcome::Rejected => ApprovalOutcome::Rejected,
            _ => ApprovalOutcome::Cancelled,
        };
        match self.registry.settle(&request.approval_id, settled) {
            Some(winner) => winner.as_recorded_by_gate(),
            None => proposed,
        }
    }
}

/// What became of a person's decision. A separate type from [`ApprovalOutcome`] because it says
/// whether *this* decision won, and carries the outcome that did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecideOutcome {
    /// The decision resolved the approval.
    Applied(ApprovalOutcome),
    /// It had been decided already (or its channel closed).
    AlreadyDecided(ApprovalOutcome),
    /// It had timed out, been cancelled, or expired by a restart.
    Expired(ApprovalOutcome),
    /// No approval has this id.
    NotFound,
}

impl DecideOutcome {
    /// The outcome of a decision on an approval that already ended as `outcome` (`None`: the id is
    /// unknown).
    pub fn settled(outcome: Option<ApprovalOutcome>) -> Self {
        match outcome {
            None => Self::NotFound,
            Some(o) if o.is_decision() => Self::AlreadyDecided(o),
            Some(o) => Self::Expired(o),
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

impl From<DecideError> for CoreError {
    fn from(error: DecideError) -> Self {
        match error {
            DecideError::CutOff(_) => Self::CutOff(error.to_string()),
            DecideError::NotAttached(_)
            | DecideError::WrongChannel { .. }
            | DecideError::NotShown { .. } => Self::FailedPrecondition(error.to_string()),
        }
    }
}
