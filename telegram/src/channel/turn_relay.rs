//! One owner message as one turn: `StartTurn` on the chat's session (channel `telegram`, keyed by
//! the update id so a re-delivered update is the same turn), the reply streamed into one message
//! edited at most once per [`EDIT_INTERVAL`], split into more messages past 4,096 characters, and
//! the turn's approvals handed to [`super::cards`] with this stream's attachment.
//!
//! Invariants: the relay ends with the run (its attachment goes with it, so the hub closes any
//! approval only it was shown: a closed dialog never approves); while it streams, its turn is
//! known to the approval watch, which leaves the turn's questions to it, and it claims each
//! question (see `claims`) before showing the text above it, so a question gets one card; a
//! chatter message that cannot be sent is dropped after its retry, never an approval card (see
//! `cards`); a chatter message waits out a 429 once, and only if its `retry_after` (capped by the
//! client) is at most [`MAX_CHATTER_WAIT`]; the turn's first message comes within the hub link's
//! call timeout or the relay ends with an error the owner is shown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tau_api::proto::v1::{self as pb, session_event::Kind};
use tonic::Code;

use crate::bot_api::BotError;
use crate::hub_link::HubError;
use crate::render::{escape_prose_html, split_message};

use super::commands::{CHANNEL, open_new};
use super::{Shared, cards, claims, lock};

/// The least time between two edits of a streaming reply.
pub const EDIT_INTERVAL: Duration = Duration::from_secs(1);
/// The longest 429 wait a chatter message honours before it is dropped.
const MAX_CHATTER_WAIT: Duration = Duration::from_secs(30);

pub(super) fn spawn_turn(shared: &Arc<Shared>, chat: i64, update_id: i64, text: String) {
    let task_shared = Arc::clone(shared);
    shared.tasks.spawn(async move {
        let shared = task_shared;
        tokio::select! {
            () = shared.stop.cancelled() => {}
            () = relay(&shared, chat, update_id, text) => {}
        }
    });
}

/// Shows a card in a task of its own, which the stop that ends this relay does not cut short
/// between its `sendMessage` and its record (see [`cards`]).
async fn present_to_the_end(
    shared: &Arc<Shared>,
    chat: i64,
    approval: pb::PendingApproval,
    attachment: String,
    claim: claims::Claim,
) {
    let task_shared = Arc::clone(shared);
    let showing = shared.tasks.spawn(async move {
        cards::present(&task_shared, chat, &approval, &attachment, claim).await;
    });
    if let Err(e) = showing.await {
        tracing::error!(error = %e, "telegram: showing an approval card failed");
    }
}

async fn relay(shared: &Arc<Shared>, chat: i64, update_id: i64, text: String) {
    let mut reply = Reply::new(chat);
    if let Err(e) = relay_turn(shared, &mut reply, update_id, &text).await {
        tracing::warn!(error = %e, "telegram: a turn could not be relayed");
        let reason = e.to_string();
        reply.append(
            &shared
                .texts
                .get("telegram.turn_failed", &[("reason", &reason)]),
        );
    }
    reply.flush(shared).await;
}

async fn start(
    shared: &Shared,
    session_id: &str,
    update_id: i64,
    text: &str,
) -> Result<tonic::Streaming<pb::StartTurnResponse>, tonic::Status> {
    let mut hub = shared.hub.clone();
    let request = pb::StartTurnRequest {
        session_id: session_id.to_owned(),
        text: text.to_owned(),
        channel: CHANNEL.into(),
        idempotency_key: format!("telegram-update-{update_id}"),
        new_session: false,
    };
    match tokio::time::timeout(shared.hub_call_timeout, hub.start_turn(request)).await {
        Ok(result) => result.map(tonic::Response::into_inner),
        Err(_) => Err(tonic::Status::deadline_exceeded("StartTurn timed out")),
    }
}

async fn relay_turn(
    shared: &Arc<Shared>,
    reply: &mut Reply,
    update_id: i64,
    text: &str,
) -> Result<(), HubError> {
    let session_id = match shared.session() {
        Some(id) => id,
        None => open_new(shared).await?,
    };
    let mut stream = match start(shared, &session_id, update_id, text).await {
        Ok(stream) => stream,
        // The remembered session is gone (another data directory, a deleted store): start over.
        Err(status) if status.code() == Code::NotFound => {
            let fresh = open_new(shared).await?;
            start(shared, &fresh, update_id, text).await?
        }
        Err(status) => return Err(status.into()),
    };
    let mut attachment = String::new();
    let mut own_turn: Option<OwnTurn> = None;
    let mut call_mark = 0;
    let mut first = true;
    loop {
        // The hub sends the turn's `accepted` at once: one that answered the call and then sends
        // nothing ends the relay with an error instead of holding it for ever. Later events wait
        // as long as the turn lasts (a model may think long, a person answer late).
        let message = if std::mem::take(&mut first) {
            crate::hub_link::within(shared.hub_call_timeout, stream.message()).await?
        } else {
            stream.message().await?
        };
        let Some(message) = message else { break };
        let event = match message.kind {
            Some(pb::start_turn_response::Kind::Accepted(accepted)) => {
                attachment = accepted.attachment_id;
                if own_turn.is_none() {
                    own_turn = Some(OwnTurn::mark(shared, accepted.turn_id));
                }
                continue;
            }
            Some(pb::start_turn_response::Kind::Event(event)) => event,
            None => continue,
        };
        match event.kind {
            Some(Kind::TurnStarted(_)) => {
                tracing::debug!(update_id, "telegram: turn started");
            }
            Some(Kind::TextDelta(delta)) => {
                reply.append(&delta.text);
                reply.flush_if_due(shared).await;
            }
            Some(Kind::OutputDiscarded(_) | Kind::Throttled(_)) => reply.discard_after(call_mark),
            Some(Kind::ToolCall(_)) => call_mark = reply.text.len(),
            Some(Kind::ApprovalRequested(requested)) => {
                let Some(approval) = requested.approval else {
                    continue;
                };
                if approval.channel != CHANNEL {
                    continue;
                }
                // Claimed before the flush below, so the approval watch does not show it meanwhile.
                let Some(claim) = claims::claim(shared, &approval.approval_id) else {
                    continue;
                };
                // What the model said before asking goes above the card; the rest below it.
                reply.flush(shared).await;
                *reply = Reply::new(reply.chat);
                call_mark = 0;
                present_to_the_end(shared, reply.chat, approval, attachment.clone(), claim).await;
            }
            Some(Kind::ApprovalResolved(resolved)) => {
                cards::resolved(shared, &resolved.approval_id, resolved.resolution()).await;
            }
            Some(Kind::TurnEnded(end)) => {
                if reply.text.trim().is_empty() && reply.message_ids.is_empty() {
                    reply.text = end.text.clone();
                }
                // How the turn stopped, the line `tau chat` and `tau tui` show (none for a
                // normal end).
                let stop = shared.texts.presenter().live(&Kind::TurnEnded(end));
                for line in stop {
                    reply.append(&format!(
                        "\n{}",
                        shared
                            .texts
                            .get("telegram.turn_notice", &[("notice", &line.text)])
                    ));
                }
                break;
            }
            _ => {}
        }
    }
    drop(own_turn);
    Ok(())
}

/// A turn this run relays, known to the approval watch while the relay lasts (it leaves that
/// turn's questions to the relay).
struct OwnTurn {
    shared: Arc<Shared>,
    turn_id: String,
}

impl OwnTurn {
    fn mark(shared: &Arc<Shared>, turn_id: String) -> Self {
        lock(&shared.own_turns).insert(turn_id.clone());
        Self {
            shared: Arc::clone(shared),
            turn_id,
        }
    }
}

impl Drop for OwnTurn {
    fn drop(&mut self) {
        lock(&self.shared.own_turns).remove(&self.turn_id);
    }
}

/// The reply being streamed: its text and the messages it occupies.
struct Reply {
    chat: i64,
    text: String,
    message_ids: Vec<i64>,
    /// What each message shows now (HTML), to skip edits that change nothing.
    shown: Vec<String>,
    last_flush: Option<Instant>,
}

impl Reply {
    fn new(chat: i64) -> Self {
        Self {
            chat,
            text: String::new(),
            message_ids: Vec::new(),
            shown: Vec::new(),
            last_flush: None,
        }
    }

    fn append(&mut self, text: &str) {
        self.text.push_str(text);
    }

    fn discard_after(&mut self, mark: usize) {
        if mark <= self.text.len() && self.text.is_char_boundary(mark) {
            self.text.truncate(mark);
        }
    }

    async fn flush_if_due(&mut self, shared: &Shared) {
        if self
            .last_flush
            .is_none_or(|at| at.elapsed() >= EDIT_INTERVAL)
        {
            self.flush(shared).await;
        }
    }

    async fn flush(&mut self, shared: &Shared) {
        self.last_flush = Some(Instant::now());
        if self.text.trim().is_empty() {
            return;
        }
        let chunks = split_message(&escape_prose_html(&self.text));
        for (i, chunk) in chunks.into_iter().enumerate() {
            if self.shown.get(i) == Some(&chunk) {
                continue;
            }
            if let Some(&id) = self.message_ids.get(i) {
                let edited = chatter(|| shared.bot.edit_message(self.chat, id, &chunk, None)).await;
                if edited.is_some() {
                    self.shown[i] = chunk;
                }
            } else if let Some(sent) =
                chatter(|| shared.bot.send_message(self.chat, &chunk, None)).await
            {
                self.message_ids.push(sent.message_id);
                self.shown.push(chunk);
            } else {
                // Later chunks would land out of order; the next flush tries again.
                return;
            }
        }
    }
}

/// A chatter call: one retry after a 429's `retry_after` (at most [`MAX_CHATTER_WAIT`]); other
/// failures are logged and dropped.
async fn chatter<T, F, Fut>(mut call: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, BotError>>,
{
    match call().await {
        Ok(value) => Some(value),
        Err(e @ BotError::RetryAfter { .. }) => {
            let wait = e.retry_wait().unwrap_or(MAX_CHATTER_WAIT);
            if wait > MAX_CHATTER_WAIT {
                tracing::warn!(error = %e, "telegram: a reply was dropped rather than wait so long");
                return None;
            }
            tokio::time::sleep(wait).await;
            call()
                .await
                .map_err(|e| tracing::warn!(error = %e, "telegram: a reply could not be sent"))
                .ok()
        }
        Err(e) => {
            tracing::warn!(error = %e, "telegram: a reply could not be sent");
            None
        }
    }
}
