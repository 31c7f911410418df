//! The client's turn relay, shared by `tau chat`, `tau ask` and `tau tui`: it reads one turn's
//! events from a [`TurnFeed`], hands each to a [`Front`] to show, asks the front for a decision on
//! each approval while it keeps reading (events read meanwhile are kept and shown after), sends
//! the decision to the hub (once more with the resumed stream's attachment when the hub had cut
//! the old one off), and cancels the turn when the front reports Ctrl-C.
//!
//! Invariants:
//! - The relay never decides an approval: it sends what the front answered, and nothing when the
//!   front skips it or the approval is resolved elsewhere while the question is open (the
//!   question's future is then dropped, which stops its reader).
//! - Every event is handed to the front once, in order; items read while a question is open or
//!   while a decision is retried wait in the backlog and are shown after.
//! - Every hub call has a deadline ([`crate::call::within`]) and gives way to the front's interrupt
//!   ([`Front::interrupted`]); a second interrupt, or one while cancelling, detaches (the hub
//!   keeps the turn). So has the wait for the turn's `accepted` once StartTurn answered (the
//!   feed's, [`FeedError::NotAccepted`]); later events wait as long as the turn lasts.
//!
//! The path: [`Relay::run`] reads and dispatches (`run.rs`); `decide.rs` sends a decision and
//! cancels. See ARCHITECTURE.md for where this sits.

mod decide;
mod run;

use std::collections::VecDeque;
use std::time::Duration;

use tau_api::proto::v1 as pb;

use crate::call::CallError;
use crate::feed::{FeedError, Item, TurnFeed};

/// What a front answers to an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Send APPROVED.
    Approve,
    /// Send REJECTED.
    Reject,
    /// Send nothing (another channel's approval).
    Skip,
    /// Send nothing and stop relaying (the front could not ask; it holds the reason).
    Stop,
}

/// How a relayed turn ended.
#[derive(Debug)]
pub enum Outcome {
    /// The hub ended the turn.
    Ended(pb::TurnEnded),
    /// The person stopped watching; the turn goes on in the hub.
    Detached,
    /// The stream ended (`None`: closed by the hub) or failed before the turn did.
    StreamLost(Option<FeedError>),
    /// The front stopped the relay ([`Answer::Stop`] or a failed decision it would not go past).
    Stopped,
}

/// What differs between the clients: how they show the turn and ask a person.
#[allow(async_fn_in_trait)]
pub trait Front {
    /// The hub accepted the turn.
    fn accepted(&mut self, accepted: &pb::TurnAccepted);
    /// One event of the turn, every kind included (approval requests are asked afterwards).
    fn event(&mut self, event: &pb::SessionEvent);
    /// Resolves on the person's interrupt (Ctrl-C); never, for a front that has none.
    async fn interrupted(&mut self);
    /// Asks the person about `approval`. Dropped unfinished when the approval is resolved
    /// elsewhere or the stream ends.
    async fn ask(&mut self, approval: &pb::PendingApproval) -> Answer;
    /// The approval being asked was resolved elsewhere; the question was abandoned.
    fn resolved_elsewhere(&mut self, approval: &pb::PendingApproval);
    /// The relay is asking the hub to cancel the turn.
    fn cancelling(&mut self);
    /// Cancelling failed (not by interrupt).
    fn cancel_failed(&mut self, error: &CallError);
    /// The hub's answer to a decision.
    fn decided(
        &mut self,
        approval: &pb::PendingApproval,
        approve: bool,
        response: &pb::DecideApprovalResponse,
    );
    /// A decision could not be sent (`lost`: the stream was lost while resuming it). Returns
    /// whether the relay goes on.
    fn decision_failed(&mut self, error: CallError, lost: Option<&FeedError>) -> bool;
}

/// One turn being relayed.
pub struct Relay<'f, C, F> {
    client: pb::tau_client::TauClient<C>,
    feed: TurnFeed<C>,
    front: &'f mut F,
    deadline: Duration,
    session_id: String,
    turn_id: String,
    cancel_sent: bool,
    backlog: VecDeque<Item>,
}
