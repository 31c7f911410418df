//! The approval watch: every question asked on channel `telegram`, whoever asked it (a routine's
//! turn on session `routine-<name>`, a turn of an earlier run that is still pending), reaches the
//! owner's chat as a card, or ends at its deadline on the hub.
//!
//! Invariants:
//! - while the run lasts, a `WatchApprovals { channel: "telegram" }` stream is open or about to be
//!   opened again: a stream that ends or fails is reopened after a pause doubling from
//!   [`RETRY_FIRST`] to [`RETRY_MAX`] (back to [`RETRY_FIRST`] after a stream that stayed up
//!   [`RETRY_MAX`]); the run's stop ends the watch at once, whatever it waits for;
//! - an approval gets at most one card per run: one this run shows or is setting up (a relay's,
//!   one re-presented at start, an earlier offer of the watch, a repeat after a lag or a
//!   reconnect) is skipped (see [`claims::claim`]), and a question of a turn this run's relay
//!   streams is left to that relay, which shows it below the text that led to it;
//! - a card is shown through [`presenting::re_present`] (a subscription of the approval's session
//!   on this channel, which is shown the approval and so may decide it; it ends when the approval
//!   does), in a task of its own that a stop does not cut between `sendMessage` and the card's
//!   record; at most [`MAX_FOLLOWED`] such cards are followed at once: past that the watch reads
//!   no further until one ends (the hub offers what is pending again after a lag);
//! - with no owner bound, a question is left pending (it ends at its deadline on the hub): the
//!   first one is logged at warn, later ones at debug;
//! - no lock is held across an `.await`.

use std::sync::Arc;
use std::time::Duration;

use tau_api::proto::v1 as pb;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::hub_link::{HubError, unary};

use super::commands::CHANNEL;
use super::{Shared, claims, lock, presenting};

/// The pause before the watch is opened again after its stream ended or failed.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest such pause.
pub const RETRY_MAX: Duration = Duration::from_secs(60);
/// The most cards the watch follows at once.
pub const MAX_FOLLOWED: usize = 32;

/// Starts the watch as a task of the run.
pub(super) fn spawn(shared: &Arc<Shared>) {
    let task_shared = Arc::clone(shared);
    shared.tasks.spawn(async move { watch(&task_shared).await });
}

/// Why one watch stream ended.
enum Ended {
    Stopped,
    Closed,
    Failed(HubError),
}

async fn watch(shared: &Arc<Shared>) {
    let followed = Arc::new(Semaphore::new(MAX_FOLLOWED));
    let mut warned_unpaired = false;
    let mut pause = RETRY_FIRST;
    loop {
        let opened_at = Instant::now();
        let opened = tokio::select! {
            () = shared.stop.cancelled() => return,
            opened = open(shared) => opened,
        };
        let ended = match opened {
            Ok(mut stream) => read(shared, &mut stream, &followed, &mut warned_unpaired).await,
            Err(e) => Ended::Failed(e),
        };
        if opened_at.elapsed() >= RETRY_MAX {
            pause = RETRY_FIRST;
        }
        match ended {
            Ended::Stopped => return,
            Ended::Closed => {
                tracing::debug!(retry_in = ?pause, "telegram: the approval watch ended");
            }
            Ended::Failed(e) => {
                tracing::warn!(
                    error = %e,
                    retry_in = ?pause,
                    "telegram: the approval watch failed"
                );
            }
        }
        tokio::select! {
            () = shared.stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
        pause = pause.saturating_mul(2).min(RETRY_MAX);
    }
}

async fn open(shared: &Shared) -> Result<tonic::Streaming<pb::PendingApproval>, HubError> {
    let mut hub = shared.hub.clone();
    unary(hub.watch_approvals(pb::WatchApprovalsRequest {
        channel: CHANNEL.into(),
    }))
    .await
}

async fn read(
    shared: &Arc<Shared>,
    stream: &mut tonic::Streaming<pb::PendingApproval>,
    followed: &Arc<Semaphore>,
    warned_unpaired: &mut bool,
) -> Ended {
    loop {
        let next = tokio::select! {
            () = shared.stop.cancelled() => return Ended::Stopped,
            next = stream.message() => next,
        };
        match next {
            Ok(Some(approval)) => {
                if !offer(shared, approval, followed, warned_unpaired).await {
                    return Ended::Stopped;
                }
            }
            Ok(None) => return Ended::Closed,
            Err(status) => return Ended::Failed(status.into()),
        }
    }
}

/// Shows `approval` to the owner unless it is shown already or nobody can be shown it; `false`
/// when the run stopped meanwhile.
async fn offer(
    shared: &Arc<Shared>,
    approval: pb::PendingApproval,
    followed: &Arc<Semaphore>,
    warned_unpaired: &mut bool,
) -> bool {
    if approval.channel != CHANNEL {
        return true;
    }
    let Some(owner) = shared.owner() else {
        if *warned_unpaired {
            tracing::debug!(approval = %approval.approval_id, "telegram: no owner to ask");
        } else {
            *warned_unpaired = true;
            tracing::warn!(
                approval = %approval.approval_id,
                tool = %approval.tool,
                "telegram: a question was asked on channel telegram but no owner is paired; it \
                 stays pending until its deadline (`tau telegram pair`)"
            );
        }
        return true;
    };
    if lock(&shared.own_turns).contains(&approval.turn_id) {
        tracing::debug!(approval = %approval.approval_id, "telegram: its turn's relay shows it");
        return true;
    }
    if claims::is_presented(shared, &approval.approval_id) {
        tracing::debug!(approval = %approval.approval_id, "telegram: the approval has its card");
        return true;
    }
    let permit = tokio::select! {
        () = shared.stop.cancelled() => return false,
        permit = Arc::clone(followed).acquire_owned() => permit,
    };
    // The semaphore is never closed; were it, nothing would be followed.
    let Ok(permit) = permit else { return true };
    let task_shared = Arc::clone(shared);
    shared.tasks.spawn(async move {
        let _permit = permit;
        if let Some(following) = presenting::re_present(&task_shared, owner.chat_id, approval).await
        {
            following.follow(&task_shared).await;
        }
    });
    true
}
