//! The events of one turn of `tau ask` or `tau chat`: its StartTurn stream and, when the hub cuts
//! that stream off for falling behind (RESOURCE_EXHAUSTED), a Subscribe on the same session,
//! channel and event stream resuming after the last seq (the `tau-resume-after-seq` trailer, else
//! the last seq seen), until the turn ends. Also recognises the item that resolves an approval
//! elsewhere ([`Item::resolves`]), for a prompt left open while the feed is read.
//!
//! Invariants: the turn's `accepted` comes within the feed's accept deadline of the feed's start
//! (the StartTurn's response headers), or the feed ends with [`FeedError::NotAccepted`]: a hub
//! that answers the call and then sends nothing never keeps a client waiting for ever (later
//! events have no deadline here, since a model may think long or a person answer late; see
//! [`TurnFeed::new`]); an event is yielded at most once and in seq order (nothing is printed
//! twice); after a resumption only the turn's own events are yielded; [`TurnFeed::attachment`] is
//! the attachment of the live stream (a resumed stream has its own, the hub holds the old one's
//! approvals for a grace period); a hub that cuts the feed off again and again with nothing new in
//! between ends it with an error instead of a loop; `next` is cancel-safe (a resumption cancelled
//! half-way is retried by the next call).
//!
//! A decision sent with the attachment of a stream the hub has already cut off (the person
//! answered before the client read the cut-off) is refused, marked `cut-off`
//! (`tau_api::error_marks`); [`TurnFeed::reattach`] reads on, keeping the items for the caller,
//! until the resumed stream names its new attachment, so the caller can decide again with it.

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use tau_api::proto::v1::{self as pb, session_event, start_turn_response, subscribe_response};
use tokio::time::Instant;
use tonic::Streaming;
use tonic::client::GrpcService;
use tonic::codegen::{Body, Bytes, StdError};

use crate::call::seconds;

/// The trailer naming the seq a cut-off stream resumes after.
pub const RESUME_TRAILER: &str = "tau-resume-after-seq";

/// Cut-offs in a row, with no new event in between, after which the feed gives up.
pub const MAX_FRUITLESS_RESUMES: u32 = 3;

/// What the feed yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Accepted(pb::TurnAccepted),
    Event(Box<pb::SessionEvent>),
}

impl Item {
    /// Whether this is the event that resolves the approval `approval_id` (decided elsewhere,
    /// timed out, cancelled, its channel closed).
    pub fn resolves(&self, approval_id: &str) -> bool {
        matches!(
            self,
            Item::Event(event) if matches!(
                &event.kind,
                Some(session_event::Kind::ApprovalResolved(resolved))
                    if resolved.approval_id == approval_id
            )
        )
    }
}

/// Why a feed ended before the turn did.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeedError {
    /// The stream failed with an error other than a cut-off.
    #[error("the turn's stream failed: {0}")]
    Failed(String),
    /// Cut off before the turn was accepted: there is no turn to resume.
    #[error("the turn's stream was cut off before the turn was accepted: {0}")]
    CutBeforeAccepted(String),
    /// Cut off [`MAX_FRUITLESS_RESUMES`] times in a row with nothing new in between.
    #[error("the turn's stream was cut off {MAX_FRUITLESS_RESUMES} times in a row: {0}")]
    GaveUp(String),
    /// The Subscribe that would resume it was refused.
    #[error("the turn's stream was cut off and cannot be resumed: {0}")]
    CannotResume(String),
    /// The hub answered StartTurn but did not accept the turn (its first message) within this
    /// deadline.
    #[error("the hub answered but did not accept the turn within {} s", seconds(*.0))]
    NotAccepted(Duration),
}

impl FeedError {
    /// Why, without naming the stream (for a line that already says the stream was lost).
    pub fn reason(&self) -> String {
        match self {
            FeedError::Failed(message) => message.clone(),
            FeedError::CutBeforeAccepted(message) => {
                format!("cut off before the turn was accepted: {message}")
            }
            FeedError::GaveUp(message) => {
                format!("cut off {MAX_FRUITLESS_RESUMES} times in a row: {message}")
            }
            FeedError::CannotResume(message) => {
                format!("cut off and cannot be resumed: {message}")
            }
            FeedError::NotAccepted(deadline) => format!(
                "the hub answered but did not accept the turn within {} s",
                seconds(*deadline)
            ),
        }
    }
}

/// What [`TurnFeed::reattach`] came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reattached {
    /// The live stream has this attachment, another than the refused one.
    Attached(String),
    /// The hub ended the stream first.
    Ended,
    /// No new attachment within the deadline.
    TimedOut,
}

/// What one read of the feed came to.
enum Step {
    Item(Item),
    /// A resumed stream named its attachment.
    Attached,
    Ended,
}

enum Source {
    Turn(Streaming<pb::StartTurnResponse>),
    /// Cut off; resume after this seq.
    Cut(u64),
    Events(Streaming<pb::SubscribeResponse>),
}

enum Raw {
    Accepted(pb::TurnAccepted),
    Snapshot(pb::SessionSnapshot),
    Event(pb::SessionEvent),
    Nothing,
}

/// One turn's events, resumed across cut-offs, read through the hub client `C` (any transport).
pub struct TurnFeed<C> {
    client: pb::tau_client::TauClient<C>,
    channel: String,
    session_id: String,
    source: Source,
    turn_id: Option<String>,
    stream_id: String,
    attachment: String,
    last_seq: u64,
    fruitless: u32,
    /// How long the turn's `accepted` may take, and by when it must come (`None`: a deadline
    /// beyond the clock's range, none).
    accept_within: Duration,
    accept_by: Option<Instant>,
}

impl<C> TurnFeed<C>
where
    C: GrpcService<tonic::body::Body>,
    C::Error: Into<StdError>,
    C::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <C::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    /// The feed of the turn `stream` (a StartTurn on `session_id` and `channel`) started, whose
    /// `accepted` must come within `accept_within` from now (the hub sends it at once with the
    /// response's headers).
    ///
    /// Only that first message has a deadline here. What bounds a later wait is the hub's own
    /// deadlines (a model response's reads, an MCP call's, an approval's when one is configured;
    /// an approval may wait on a person), the turn's `turn_ended`, and the connection: a hub that
    /// exits or is killed closes the socket, which ends the stream at once.
    pub fn new(
        client: pb::tau_client::TauClient<C>,
        session_id: &str,
        channel: &str,
        stream: Streaming<pb::StartTurnResponse>,
        accept_within: Duration,
    ) -> Self {
        Self {
            accept_within,
            accept_by: Instant::now().checked_add(accept_within),
            client,
            channel: channel.to_owned(),
            session_id: session_id.to_owned(),
            source: Source::Turn(stream),
            turn_id: None,
            stream_id: String::new(),
            attachment: String::new(),
            last_seq: 0,
            fruitless: 0,
        }
    }

    /// The attachment id of the live stream (for deciding approvals).
    pub fn attachment(&self) -> &str {
        &self.attachment
    }

    /// The next item; `Ok(None)` when the hub ended the stream.
    pub async fn next(&mut self) -> Result<Option<Item>, FeedError> {
        loop {
            match self.step().await? {
                Step::Item(item) => return Ok(Some(item)),
                Step::Ended => return Ok(None),
                Step::Attached => {}
            }
        }
    }

    /// Reads on until the live stream's attachment is no longer `refused` (a decision sent with
    /// it was refused as cut off), at most `deadline`, appending what it reads to `backlog` for
    /// the caller to handle as usual. Cancel-safe: an item read is in `backlog` at once.
    pub async fn reattach(
        &mut self,
        refused: &str,
        backlog: &mut VecDeque<Item>,
        deadline: Duration,
    ) -> Result<Reattached, FeedError> {
        let wait = async {
            while self.attachment == refused {
                match self.step().await? {
                    Step::Item(item) => backlog.push_back(item),
                    Step::Ended => return Ok(Reattached::Ended),
                    Step::Attached => {}
                }
            }
            Ok(Reattached::Attached(self.attachment.clone()))
        };
        tokio::time::timeout(deadline, wait)
            .await
            .unwrap_or(Ok(Reattached::TimedOut))
    }

    /// One item, the attachment of a resumed stream, or the end.
    async fn step(&mut self) -> Result<Step, FeedError> {
        loop {
            // Until the turn is accepted, its stream has a deadline.
            let accept_by = self.accept_by.filter(|_| self.turn_id.is_none());
            let raw = match &mut self.source {
                Source::Turn(stream) => first_within(accept_by, stream.message())
                    .await
                    .ok_or(FeedError::NotAccepted(self.accept_within))?
                    .map(|m| {
                        m.map(|m| match m.kind {
                            Some(start_turn_response::Kind::Accepted(a)) => Raw::Accepted(a),
                            Some(start_turn_response::Kind::Event(e)) => Raw::Event(e),
                            None => Raw::Nothing,
                        })
                    }),
                Source::Events(stream) => stream.message().await.map(|m| {
                    m.map(|m| match m.kind {
                        Some(subscribe_response::Kind::Snapshot(s)) => Raw::Snapshot(s),
                        Some(subscribe_response::Kind::Event(e)) => Raw::Event(e),
                        None => Raw::Nothing,
                    })
                }),
                Source::Cut(after_seq) => {
                    let after_seq = *after_seq;
                    self.resume(after_seq).await?;
                    continue;
                }
            };
            let raw = match raw {
                Ok(Some(raw)) => raw,
                Ok(None) => return Ok(Step::Ended),
                Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                    self.cut_off(&status)?;
                    continue;
                }
                Err(status) => return Err(FeedError::Failed(status.message().to_owned())),
            };
            match raw {
                Raw::Accepted(accepted) => {
                    self.turn_id = Some(accepted.turn_id.clone());
                    self.stream_id.clone_from(&accepted.stream_id);
                    self.attachment.clone_from(&accepted.attachment_id);
                    if !accepted.session_id.is_empty() {
                        self.session_id.clone_from(&accepted.session_id);
                    }
                    return Ok(Step::Item(Item::Accepted(accepted)));
                }
                Raw::Snapshot(snapshot) => {
                    self.attachment = snapshot.attachment_id;
                    return Ok(Step::Attached);
                }
                Raw::Event(event) => {
                    if event.seq != 0 && event.seq <= self.last_seq {
                        continue;
                    }
                    self.last_seq = self.last_seq.max(event.seq);
                    let resumed = matches!(self.source, Source::Events(_));
                    if resumed && self.turn_id.as_deref() != Some(event.turn_id.as_str()) {
                        continue;
                    }
                    self.fruitless = 0;
                    return Ok(Step::Item(Item::Event(Box::new(event))));
                }
                Raw::Nothing => {}
            }
        }
    }

    /// Notes a cut-off; the next call resumes.
    fn cut_off(&mut self, status: &tonic::Status) -> Result<(), FeedError> {
        let message = || status.message().to_owned();
        if self.turn_id.is_none() {
            return Err(FeedError::CutBeforeAccepted(message()));
        }
        self.fruitless += 1;
        if self.fruitless > MAX_FRUITLESS_RESUMES {
            return Err(FeedError::GaveUp(message()));
        }
        let after_seq = resume_after(status).unwrap_or(self.last_seq);
        self.source = Source::Cut(after_seq);
        Ok(())
    }

    async fn resume(&mut self, after_seq: u64) -> Result<(), FeedError> {
        let stream = self
            .client
            .subscribe(pb::SubscribeRequest {
                session_id: self.session_id.clone(),
                after_seq: Some(after_seq),
                channel: self.channel.clone(),
                stream_id: self.stream_id.clone(),
            })
            .await
            .map_err(|s| FeedError::CannotResume(s.message().to_owned()))?
            .into_inner();
        self.source = Source::Events(stream);
        Ok(())
    }
}

/// `read`'s result, or `None` when `by` is given and passes first.
async fn first_within<T>(by: Option<Instant>, read: impl Future<Output = T>) -> Option<T> {
    match by {
        Some(by) => tokio::time::timeout_at(by, read).await.ok(),
        None => Some(read.await),
    }
}

/// The seq a cut-off status names in its trailer.
fn resume_after(status: &tonic::Status) -> Option<u64> {
    status
        .metadata()
        .get(RESUME_TRAILER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trailer_names_the_seq_to_resume_after() {
        let mut status = tonic::Status::resource_exhausted("lagged");
        assert_eq!(resume_after(&status), None);
        status
            .metadata_mut()
            .insert(RESUME_TRAILER, "41".parse().unwrap());
        assert_eq!(resume_after(&status), Some(41));
        status
            .metadata_mut()
            .insert(RESUME_TRAILER, "x".parse().unwrap());
        assert_eq!(resume_after(&status), None);
    }

    #[test]
    fn only_the_resolution_of_this_approval_counts() {
        let resolved = |id: &str| {
            Item::Event(Box::new(pb::SessionEvent {
                kind: Some(session_event::Kind::ApprovalResolved(
                    pb::ApprovalResolved {
                        approval_id: id.into(),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            }))
        };
        assert!(resolved("a1").resolves("a1"));
        assert!(!resolved("a2").resolves("a1"));
        assert!(!Item::Event(Box::default()).resolves("a1"));
        assert!(!Item::Accepted(pb::TurnAccepted::default()).resolves("a1"));
    }

    #[test]
    fn a_reason_does_not_name_the_stream_again() {
        let errors = [
            FeedError::Failed("boom".into()),
            FeedError::CutBeforeAccepted("boom".into()),
            FeedError::GaveUp("boom".into()),
            FeedError::CannotResume("boom".into()),
        ];
        for error in errors {
            let reason = error.reason();
            assert!(reason.ends_with("boom"), "{reason}");
            assert!(!reason.contains("stream"), "{reason}");
            assert!(error.to_string().ends_with(&reason), "{error}");
        }
        let late = FeedError::NotAccepted(Duration::from_millis(1500));
        assert_eq!(
            late.reason(),
            "the hub answered but did not accept the turn within 2 s"
        );
        assert_eq!(late.to_string(), late.reason());
    }

    #[tokio::test]
    async fn only_a_given_deadline_ends_the_wait() {
        let by = Instant::now() + Duration::from_millis(50);
        assert_eq!(
            first_within(Some(by), std::future::pending::<u8>()).await,
            None
        );
        assert!(Instant::now() >= by);
        // A message already there is taken, even at the deadline.
        assert_eq!(first_within(Some(by), async { 7 }).await, Some(7));
        let slow = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            8
        };
        assert_eq!(first_within(None, slow).await, Some(8));
    }
}
