//! The events of one `tau ask` turn: its StartTurn stream and, when the hub cuts that stream off
//! for falling behind (RESOURCE_EXHAUSTED), a Subscribe on the same session, channel and event
//! stream resuming after the last seq (the `tau-resume-after-seq` trailer, else the last seq
//! seen), until the turn ends.
//!
//! Invariants: an event is yielded at most once and in seq order (nothing is printed twice); after
//! a resumption only the turn's own events are yielded; [`TurnFeed::attachment`] is the
//! attachment of the live stream (a resumed stream has its own, the hub holds the old one's
//! approvals for a grace period); a hub that cuts the feed off again and again with nothing new in
//! between ends it with an error instead of a loop; `next` is cancel-safe (a resumption cancelled
//! half-way is retried by the next call).

use tau_api::proto::v1::{self as pb, start_turn_response, subscribe_response};
use tonic::Streaming;
use tonic::transport::Channel;

/// The trailer naming the seq a cut-off stream resumes after.
pub const RESUME_TRAILER: &str = "tau-resume-after-seq";

/// Cut-offs in a row, with no new event in between, after which the feed gives up.
pub const MAX_FRUITLESS_RESUMES: u32 = 3;

type Client = pb::tau_client::TauClient<Channel>;

/// What the feed yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Accepted(pb::TurnAccepted),
    Event(Box<pb::SessionEvent>),
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

/// One turn's events, resumed across cut-offs.
pub struct TurnFeed {
    client: Client,
    channel: String,
    session_id: String,
    source: Source,
    turn_id: Option<String>,
    stream_id: String,
    attachment: String,
    last_seq: u64,
    fruitless: u32,
}

impl TurnFeed {
    /// The feed of the turn `stream` (a StartTurn on `session_id` and `channel`) started.
    pub fn new(
        client: Client,
        session_id: &str,
        channel: &str,
        stream: Streaming<pb::StartTurnResponse>,
    ) -> Self {
        Self {
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
    pub async fn next(&mut self) -> anyhow::Result<Option<Item>> {
        loop {
            let raw = match &mut self.source {
                Source::Turn(stream) => stream.message().await.map(|m| {
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
                Ok(None) => return Ok(None),
                Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                    self.cut_off(&status)?;
                    continue;
                }
                Err(status) => {
                    anyhow::bail!("the turn's stream failed: {}", status.message());
                }
            };
            match raw {
                Raw::Accepted(accepted) => {
                    self.turn_id = Some(accepted.turn_id.clone());
                    self.stream_id.clone_from(&accepted.stream_id);
                    self.attachment.clone_from(&accepted.attachment_id);
                    if !accepted.session_id.is_empty() {
                        self.session_id.clone_from(&accepted.session_id);
                    }
                    return Ok(Some(Item::Accepted(accepted)));
                }
                Raw::Snapshot(snapshot) => {
                    self.attachment = snapshot.attachment_id;
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
                    return Ok(Some(Item::Event(Box::new(event))));
                }
                Raw::Nothing => {}
            }
        }
    }

    /// Notes a cut-off; the next call resumes.
    fn cut_off(&mut self, status: &tonic::Status) -> anyhow::Result<()> {
        if self.turn_id.is_none() {
            anyhow::bail!(
                "the turn's stream was cut off before the turn was accepted: {}",
                status.message()
            );
        }
        self.fruitless += 1;
        if self.fruitless > MAX_FRUITLESS_RESUMES {
            anyhow::bail!(
                "the hub cut the turn's stream off {MAX_FRUITLESS_RESUMES} times in a row: {}",
                status.message()
            );
        }
        let after_seq = resume_after(status).unwrap_or(self.last_seq);
        self.source = Source::Cut(after_seq);
        Ok(())
    }

    async fn resume(&mut self, after_seq: u64) -> anyhow::Result<()> {
        let stream = self
            .client
            .subscribe(pb::SubscribeRequest {
                session_id: self.session_id.clone(),
                after_seq: Some(after_seq),
                channel: self.channel.clone(),
                stream_id: self.stream_id.clone(),
            })
            .await
            .map_err(|s| {
                anyhow::anyhow!(
                    "the turn's stream was cut off and cannot be resumed: {}",
                    s.message()
                )
            })?
            .into_inner();
        self.source = Source::Events(stream);
        Ok(())
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
}
