//! The relay's read loop: backlog first, then the feed; each event to the front; an approval asked
//! while the feed is still read.

use std::collections::VecDeque;
use std::time::Duration;

use tau_api::proto::v1::{self as pb, session_event::Kind};
use tonic::client::GrpcService;
use tonic::codegen::{Body, Bytes, StdError};

use super::{Answer, Front, Outcome, Relay};
use crate::feed::{FeedError, Item, TurnFeed};

/// What the question on one approval came to.
enum Asked {
    Answer(Answer),
    Resolved,
    StreamGone(Option<FeedError>),
}

impl<'f, C, F> Relay<'f, C, F>
where
    C: GrpcService<tonic::body::Body> + Clone,
    C::Error: Into<StdError>,
    C::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <C::ResponseBody as Body>::Error: Into<StdError> + Send,
    F: Front,
{
    /// The relay of the turn `stream` started on `session_id` for `channel` (empty for a turn
    /// started in a new session: its `accepted` names the session); `deadline` bounds the wait for
    /// the turn's `accepted` (from now: the stream's headers have come) and each decision and
    /// cancel call.
    pub fn new(
        client: pb::tau_client::TauClient<C>,
        session_id: &str,
        channel: &str,
        stream: tonic::Streaming<pb::StartTurnResponse>,
        front: &'f mut F,
        deadline: Duration,
    ) -> Self {
        let feed = TurnFeed::new(client.clone(), session_id, channel, stream, deadline);
        Self {
            client,
            feed,
            front,
            deadline,
            session_id: session_id.to_owned(),
            turn_id: String::new(),
            cancel_sent: false,
            backlog: VecDeque::new(),
        }
    }

    /// Relays the turn until it ends, the stream is lost, or the person detaches.
    pub async fn run(mut self) -> Outcome {
        loop {
            let item = match self.backlog.pop_front() {
                Some(item) => item,
                None => {
                    tokio::select! {
                        next = self.feed.next() => match next {
                            Ok(Some(item)) => item,
                            Ok(None) => return Outcome::StreamLost(None),
                            Err(error) => return Outcome::StreamLost(Some(error)),
                        },
                        () = self.front.interrupted() => {
                            if self.cancel_sent || !self.cancel().await {
                                return Outcome::Detached;
                            }
                            continue;
                        }
                    }
                }
            };
            let event = match item {
                Item::Accepted(accepted) => {
                    self.turn_id.clone_from(&accepted.turn_id);
                    // A turn started in a new session learns its session here.
                    if !accepted.session_id.is_empty() {
                        self.session_id.clone_from(&accepted.session_id);
                    }
                    self.front.accepted(&accepted);
                    continue;
                }
                Item::Event(event) => *event,
            };
            self.front.event(&event);
            match event.kind {
                Some(Kind::ApprovalRequested(requested)) => {
                    let Some(approval) = requested.approval else {
                        continue;
                    };
                    if let Some(outcome) = self.approval(&approval).await {
                        return outcome;
                    }
                }
                Some(Kind::TurnEnded(end)) => return Outcome::Ended(end),
                _ => {}
            }
        }
    }

    /// Asks and decides one approval; `Some(outcome)` when the relay ends meanwhile.
    async fn approval(&mut self, approval: &pb::PendingApproval) -> Option<Outcome> {
        let approve = match self.ask(approval).await {
            Asked::Answer(Answer::Approve) => true,
            Asked::Answer(Answer::Reject) => false,
            Asked::Answer(Answer::Skip) => return None,
            Asked::Answer(Answer::Stop) => return Some(Outcome::Stopped),
            Asked::Resolved => {
                self.front.resolved_elsewhere(approval);
                return None;
            }
            Asked::StreamGone(error) => return Some(Outcome::StreamLost(error)),
        };
        self.decide(approval, approve).await
    }

    /// The front's answer, read while the feed goes on (its items kept in the backlog).
    async fn ask(&mut self, approval: &pb::PendingApproval) -> Asked {
        let question = self.front.ask(approval);
        tokio::pin!(question);
        loop {
            // The answer first: one given at once is not raced by events read meanwhile.
            tokio::select! {
                biased;
                answer = &mut question => return Asked::Answer(answer),
                next = self.feed.next() => {
                    let item = match next {
                        Ok(Some(item)) => item,
                        Ok(None) => return Asked::StreamGone(None),
                        Err(error) => return Asked::StreamGone(Some(error)),
                    };
                    let resolved_here = item.resolves(&approval.approval_id);
                    self.backlog.push_back(item);
                    if resolved_here {
                        return Asked::Resolved;
                    }
                }
            }
        }
    }
}
