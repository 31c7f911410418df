//! Which approvals get a card in this run, and how a question a relay of this run did not ask is
//! shown: at start, for an approval an earlier run's card showed that is still pending
//! ([`settle_earlier_cards`]); while the run lasts, for every question asked on this channel (see
//! [`super::approval_watch`]).
//!
//! Invariants:
//! - at start, before the first poll, every card an earlier run left shown is edited to
//!   superseded (its buttons gone); only a fresh card of this run decides its approval;
//! - an approval gets at most one card per run, whoever shows it (a turn's relay, the start's
//!   settling, the approval watch): a card is set up under a [`super::claims::Claim`] of its
//!   approval id, and once it is sent this run's card in the log keeps a second one from being
//!   shown;
//! - a card shown by [`re_present`] is decided through a subscription of the approval's session on
//!   this channel, which is shown the approval; that subscription ends when the approval does (or
//!   the run stops), so none outlives its card's question; no card is shown for an approval its
//!   snapshot no longer lists;
//! - no lock is held across an `.await`.

use std::sync::Arc;

use tau_api::proto::v1 as pb;

use crate::hub_link::unary;
use crate::state::{CardState, Presentation};

use super::cards::{finish_with_body, present, resolved};
use super::claims::claim;
use super::commands::CHANNEL;
use super::{Shared, lock};

/// At start: every card an earlier run left shown is superseded; an approval the hub still has
/// pending on this channel gets a fresh card through a subscription of its session.
pub(super) async fn settle_earlier_cards(shared: &Arc<Shared>) {
    let earlier: Vec<Presentation> = lock(&shared.cards)
        .log
        .cards
        .iter()
        .filter(|c| c.state == CardState::Shown && c.epoch != shared.epoch)
        .cloned()
        .collect();
    if earlier.is_empty() {
        return;
    }
    let superseded = shared.texts.plain("telegram.outcome_superseded");
    for card in &earlier {
        finish_with_body(shared, card, CardState::Superseded, &superseded, None).await;
    }
    let mut hub = shared.hub.clone();
    let pending =
        match unary(hub.list_pending_approvals(pb::ListPendingApprovalsRequest::default())).await {
            Ok(listed) => listed.approvals,
            Err(e) => {
                tracing::warn!(error = %e, "telegram: pending approvals could not be listed");
                return;
            }
        };
    for approval in pending {
        if approval.channel != CHANNEL {
            continue;
        }
        let Some(chat) = earlier
            .iter()
            .find(|c| c.approval_id == approval.approval_id)
            .map(|c| c.chat_id)
        else {
            continue;
        };
        if let Some(following) = re_present(shared, chat, approval).await {
            let task_shared = Arc::clone(shared);
            shared
                .tasks
                .spawn(async move { following.follow(&task_shared).await });
        }
    }
}

/// Shows a fresh card for `approval` in `chat` through a subscription of its session on this
/// channel, which is shown the approval and so may decide it: the subscription to follow until
/// the approval ends, when a card was shown. Nothing is shown when this run shows the approval
/// already (see [`claim`]), or when the subscription's snapshot no longer lists it (it ended).
pub(super) async fn re_present(
    shared: &Arc<Shared>,
    chat: i64,
    approval: pb::PendingApproval,
) -> Option<Following> {
    let Some(claim) = claim(shared, &approval.approval_id) else {
        tracing::debug!(approval = %approval.approval_id, "telegram: the approval has its card");
        return None;
    };
    let mut hub = shared.hub.clone();
    let request = pb::SubscribeRequest {
        session_id: approval.session_id.clone(),
        after_seq: None,
        channel: CHANNEL.into(),
        stream_id: String::new(),
    };
    let mut stream = match unary(hub.subscribe(request)).await {
        Ok(stream) => stream,
        Err(e) => {
            tracing::warn!(error = %e, "telegram: could not subscribe to present an approval");
            return None;
        }
    };
    let snapshot = match tokio::time::timeout(crate::hub_link::CALL_TIMEOUT, stream.message()).await
    {
        Ok(Ok(Some(pb::SubscribeResponse {
            kind: Some(pb::subscribe_response::Kind::Snapshot(snapshot)),
        }))) => snapshot,
        _ => {
            tracing::warn!(
                approval = %approval.approval_id,
                "telegram: the subscription to present an approval gave no snapshot"
            );
            return None;
        }
    };
    let still_pending = snapshot
        .pending_approvals
        .iter()
        .any(|p| p.approval_id == approval.approval_id);
    if !still_pending {
        tracing::debug!(approval = %approval.approval_id, "telegram: the approval ended already");
        return None;
    }
    present(shared, chat, &approval, &snapshot.attachment_id, claim)
        .await
        .then_some(Following {
            approval_id: approval.approval_id,
            stream,
        })
}

/// The subscription a re-presented card is decided through.
pub(super) struct Following {
    approval_id: String,
    stream: tonic::Streaming<pb::SubscribeResponse>,
}

impl Following {
    /// Edits the card to the approval's resolution when the hub publishes it, then ends (and with
    /// it the subscription's attachment); ends too when the run stops or the stream ends.
    pub(super) async fn follow(mut self, shared: &Arc<Shared>) {
        loop {
            let message = tokio::select! {
                () = shared.stop.cancelled() => return,
                message = self.stream.message() => message,
            };
            let Ok(Some(message)) = message else { return };
            if let Some(pb::subscribe_response::Kind::Event(pb::SessionEvent {
                kind: Some(pb::session_event::Kind::ApprovalResolved(ended)),
                ..
            })) = message.kind
                && ended.approval_id == self.approval_id
            {
                resolved(shared, &self.approval_id, ended.resolution()).await;
                return;
            }
        }
    }
}
