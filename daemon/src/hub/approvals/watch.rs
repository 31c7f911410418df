//! What is pending, for clients that are not on the session: `ListPendingApprovals`
//! ([`pending_of`]) and `WatchApprovals` ([`watch_channel`]: an [`ApprovalWatch`], the approvals
//! pending on a channel, then each one as it is asked). Telegram shows a card for a routine's
//! question this way, and `tau approvals` lists them.
//!
//! Invariants: a watch's first listing and its stream of new questions come from one registry
//! lock, so nothing asked in between is missed; the stream is bounded ([`super::WATCH_BUFFER`]) and
//! a watcher that falls behind is given what is pending again, never blocks a question; a watch
//! ends when the hub stops.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::ApprovalRegistry;
use crate::hub::error::CoreError;
use crate::hub::events::PendingInfo;
use crate::hub::limits::{check_channel, check_session_id};

/// The approvals asked on `channel` (any, when `None`), in every session: those pending now,
/// then each as it is asked, until `stop`.
pub fn watch_channel(
    registry: &Arc<ApprovalRegistry>,
    channel: Option<&str>,
    stop: CancellationToken,
) -> Result<ApprovalWatch, CoreError> {
    let channel = channel.map(check_channel).transpose()?;
    Ok(ApprovalWatch::new(channel, Arc::clone(registry), stop))
}

/// Pending approvals, oldest first; of one session when `session_id` is given (checked first).
pub fn pending_of(
    registry: &ApprovalRegistry,
    session_id: Option<&str>,
) -> Result<Vec<PendingInfo>, CoreError> {
    if let Some(id) = session_id {
        check_session_id(id)?;
    }
    Ok(registry.list_pending(session_id))
}

/// The approvals asked on one channel (or any): those pending when it began, then each one as it
/// is asked, until the hub stops. A watcher that falls behind is given what is pending again.
#[derive(Debug)]
pub struct ApprovalWatch {
    channel: Option<String>,
    ready: VecDeque<PendingInfo>,
    asked: tokio::sync::broadcast::Receiver<Arc<PendingInfo>>,
    registry: Arc<ApprovalRegistry>,
    stop: CancellationToken,
}

impl ApprovalWatch {
    pub(crate) fn new(
        channel: Option<String>,
        registry: Arc<ApprovalRegistry>,
        stop: CancellationToken,
    ) -> Self {
        let (pending, asked) = registry.watch();
        let mut watch = Self {
            channel,
            ready: VecDeque::new(),
            asked,
            registry,
            stop,
        };
        watch.offer(pending);
        watch
    }

    fn offer(&mut self, pending: Vec<PendingInfo>) {
        let channel = self.channel.as_deref();
        self.ready.extend(
            pending
                .into_iter()
                .filter(|p| channel.is_none_or(|c| c == p.request.channel)),
        );
    }

    /// The next approval; `None` when the hub stops.
    pub async fn next(&mut self) -> Option<PendingInfo> {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            if let Some(next) = self.ready.pop_front() {
                return Some(next);
            }
            let received = tokio::select! {
                () = self.stop.cancelled() => return None,
                received = self.asked.recv() => received,
            };
            match received {
                Ok(info) => self.offer(vec![(*info).clone()]),
                Err(RecvError::Lagged(_)) => {
                    let pending = self.registry.list_pending(None);
                    self.offer(pending);
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}
