//! The TUI's standing Subscribe on its current session, between turns: its snapshot (every
//! approval pending there and this stream's attachment id, which may decide them), the session's
//! live events, and reconnecting with back-off when the stream ends because the hub stopped or the
//! connection dropped.
//!
//! Invariants:
//! - [`SessionWatch::next`] is cancel-safe: it keeps its state (live stream, the Subscribe call on
//!   its way, or when to try again) in the watch, never in the future, so the UI may drop it for a
//!   key or a frame at any time without a call being made twice.
//! - An event is yielded once: events with a seq at or below the last one seen (by this watch or,
//!   through [`SessionWatch::saw`], by the turn relay) are skipped; a fresh snapshot (no
//!   `after_seq`, e.g. after the hub restarted and numbers its events anew) resets that mark; a
//!   snapshot older than events already seen in the same numbering is stale (its pending list may
//!   name approvals resolved since) and is dropped for a new Subscribe.
//! - A cut-off for falling behind resumes at once after the last seq seen (quietly; nothing was
//!   lost); any other end is reported as [`Watched::Lost`] and tried again after a delay that
//!   doubles from [`FIRST_RETRY`] up to [`MAX_RETRY`], reset by the next snapshot.
//! - [`SessionWatch::attachment`] is empty while no stream is live: nothing is decided with an
//!   attachment the hub no longer holds.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tau_api::proto::v1::{self as pb, subscribe_response};
use tau_client::call::{CallError, within};
use tau_client::feed::RESUME_TRAILER;
use tokio::time::Instant;
use tonic::{Code, Streaming};

use crate::hub_link::HubClient;

/// The wait before the first try after the stream was lost.
pub const FIRST_RETRY: Duration = Duration::from_millis(500);

/// The longest wait between two tries.
pub const MAX_RETRY: Duration = Duration::from_secs(30);

/// The waits between tries: doubling from [`FIRST_RETRY`], at most [`MAX_RETRY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: FIRST_RETRY }
    }
}

impl Backoff {
    /// The wait before the next try; the one after it is twice as long (at most [`MAX_RETRY`]).
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(MAX_RETRY);
        wait
    }

    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

/// What the watch yields.
#[derive(Debug)]
pub enum Watched {
    /// A stream was attached: the session's state now.
    Snapshot(pb::SessionSnapshot),
    Event(pb::SessionEvent),
    /// The stream ended (`reason`); the next try is in `retry_in`.
    Lost {
        reason: String,
        retry_in: Duration,
    },
}

/// A Subscribe on its way: the stream, and whether it resumes after the last seq seen.
type Subscribing =
    Pin<Box<dyn Future<Output = Result<(Streaming<pb::SubscribeResponse>, bool), String>>>>;

enum State {
    /// No session to watch.
    Off,
    /// Subscribe at `at`.
    Waiting {
        at: Instant,
    },
    /// Kept here, not in `next`'s future, so a call dropped for a key is not made twice.
    Subscribing(Subscribing),
    Live(Box<Streaming<pb::SubscribeResponse>>),
}

/// The Subscribe of one session on one channel.
pub struct SessionWatch {
    client: HubClient,
    channel: String,
    deadline: Duration,
    session_id: String,
    state: State,
    attachment: String,
    stream_id: String,
    last_seq: u64,
    /// The live stream resumed after `last_seq` (its snapshot does not reset the mark).
    resumed: bool,
    backoff: Backoff,
}

impl SessionWatch {
    /// A watch that watches nothing yet; `deadline` bounds each Subscribe call.
    pub fn new(client: HubClient, channel: &str, deadline: Duration) -> Self {
        Self {
            client,
            channel: channel.to_owned(),
            deadline,
            session_id: String::new(),
            state: State::Off,
            attachment: String::new(),
            stream_id: String::new(),
            last_seq: 0,
            resumed: false,
            backoff: Backoff::default(),
        }
    }

    /// Watches `session_id` from now on (a fresh Subscribe at once when it is another session).
    pub fn watch(&mut self, session_id: &str) {
        if session_id == self.session_id || session_id.is_empty() {
            return;
        }
        self.session_id = session_id.to_owned();
        self.state = State::Waiting { at: Instant::now() };
        self.attachment.clear();
        self.stream_id.clear();
        self.last_seq = 0;
        self.backoff.reset();
    }

    /// The attachment of the live stream (empty when none is live).
    pub fn attachment(&self) -> &str {
        &self.attachment
    }

    /// An event of this session seen elsewhere (the turn relay): not yielded again.
    pub fn saw(&mut self, seq: u64) {
        self.last_seq = self.last_seq.max(seq);
    }

    /// The numbering (`stream_id`) of the events the turn relay sees; seqs seen in another one
    /// (a hub since restarted) no longer count.
    pub fn saw_stream(&mut self, stream_id: &str) {
        if !stream_id.is_empty() && stream_id != self.stream_id {
            self.stream_id = stream_id.to_owned();
            self.last_seq = 0;
        }
    }

    /// The next snapshot, event or loss; waits as long as there is none.
    pub async fn next(&mut self) -> Watched {
        loop {
            match &mut self.state {
                State::Off => return std::future::pending().await,
                State::Waiting { at } => {
                    tokio::time::sleep_until(*at).await;
                    self.state = State::Subscribing(self.subscribe());
                }
                State::Subscribing(subscribing) => match subscribing.await {
                    Ok((stream, resumed)) => {
                        self.resumed = resumed;
                        self.state = State::Live(Box::new(stream));
                    }
                    Err(reason) => return self.lost(reason),
                },
                State::Live(stream) => match stream.message().await {
                    Ok(Some(message)) => {
                        if let Some(watched) = self.take(message) {
                            return watched;
                        }
                    }
                    Ok(None) => return self.lost("the hub closed the stream".to_owned()),
                    Err(status) if lagged(&status) => {
                        // Nothing is lost: resume after the last seq seen, at once.
                        self.attachment.clear();
                        self.state = State::Waiting { at: Instant::now() };
                    }
                    Err(status) => return self.lost(status.message().to_owned()),
                },
            }
        }
    }

    fn take(&mut self, message: pb::SubscribeResponse) -> Option<Watched> {
        match message.kind? {
            subscribe_response::Kind::Snapshot(snapshot) => {
                if snapshot.stream_id == self.stream_id && snapshot.last_seq < self.last_seq {
                    // Taken before events seen since (a turn of this TUI ran while the call was
                    // on its way): its pending approvals may be resolved already. Ask again.
                    self.state = State::Waiting { at: Instant::now() };
                    return None;
                }
                self.attachment.clone_from(&snapshot.attachment_id);
                self.stream_id.clone_from(&snapshot.stream_id);
                if !self.resumed {
                    self.last_seq = snapshot.last_seq;
                }
                self.backoff.reset();
                Some(Watched::Snapshot(snapshot))
            }
            subscribe_response::Kind::Event(event) => {
                if event.seq <= self.last_seq {
                    return None;
                }
                self.last_seq = event.seq;
                Some(Watched::Event(event))
            }
        }
    }

    /// The stream is gone: try again after the next wait.
    fn lost(&mut self, reason: String) -> Watched {
        let retry_in = self.backoff.next_wait();
        self.attachment.clear();
        self.state = State::Waiting {
            at: Instant::now() + retry_in,
        };
        Watched::Lost { reason, retry_in }
    }

    /// A Subscribe resuming after the last seq seen when there is a numbering to resume in, else
    /// (or when the hub refuses the resumption: it restarted, or no longer buffers those events)
    /// a fresh one.
    fn subscribe(&self) -> Subscribing {
        let mut client = self.client.clone();
        let deadline = self.deadline;
        let resume = (!self.stream_id.is_empty()).then(|| self.request(Some(self.last_seq)));
        let fresh = self.request(None);
        Box::pin(async move {
            if let Some(resume) = resume {
                match within(deadline, client.subscribe(resume)).await {
                    Ok(stream) => return Ok((stream, true)),
                    Err(CallError::Hub(status)) if status.code() == Code::FailedPrecondition => {}
                    Err(error) => return Err(reason(&error)),
                }
            }
            let stream = within(deadline, client.subscribe(fresh))
                .await
                .map_err(|error| reason(&error))?;
            Ok((stream, false))
        })
    }

    fn request(&self, after_seq: Option<u64>) -> pb::SubscribeRequest {
        pb::SubscribeRequest {
            session_id: self.session_id.clone(),
            after_seq,
            channel: self.channel.clone(),
            stream_id: if after_seq.is_some() {
                self.stream_id.clone()
            } else {
                String::new()
            },
        }
    }
}

/// A cut-off for falling behind (the hub names where to resume).
fn lagged(status: &tonic::Status) -> bool {
    status.code() == Code::ResourceExhausted && status.metadata().get(RESUME_TRAILER).is_some()
}

fn reason(error: &CallError) -> String {
    match error {
        CallError::Hub(status) => status.message().to_owned(),
        CallError::TimedOut(deadline) => format!("no answer within {} s", deadline.as_secs()),
        CallError::Interrupted => "interrupted".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_up_to_thirty_seconds_and_resets() {
        let mut backoff = Backoff::default();
        let waits: Vec<u64> = (0..9)
            .map(|_| u64::try_from(backoff.next_wait().as_millis()).unwrap())
            .collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        backoff.reset();
        assert_eq!(backoff.next_wait(), FIRST_RETRY);
    }
}
