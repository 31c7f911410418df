//! [`LinkHandle`]: one live link to a node as the hub's side sees it: the bounded queue of frames
//! to send, and the calls in flight, each waiting for its node's answer.
//!
//! Invariants: at most [`MAX_CALLS_IN_FLIGHT`] calls per link; when the link ends
//! ([`LinkHandle::close`]) every call in flight sees its channel end, which the caller reports as
//! "outcome unknown", never as a failure to retry; a result for a call nobody waits for is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::tool::ToolProgress;

/// Frames queued towards the node.
pub const OUTBOUND_QUEUE: usize = 64;
/// Calls one link carries at once.
pub const MAX_CALLS_IN_FLIGHT: usize = 32;

/// A frame for the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outbound {
    Heartbeat,
    Call {
        call_id: u64,
        tool: String,
        arguments_json: String,
        timeout_ms: u32,
        /// The digest of the claim the hub offered (see `ToolClaim::digest`).
        claim_digest: String,
    },
    Cancel {
        call_id: u64,
    },
}

/// What the node said about a call.
#[derive(Debug, Clone, PartialEq)]
pub enum CallEvent {
    Progress(ToolProgress),
    Done { ok: bool, text: String },
}

/// A live link (cheap to clone).
#[derive(Clone)]
pub struct LinkHandle {
    id: u64,
    out: mpsc::Sender<Outbound>,
    pending: Arc<Mutex<HashMap<u64, mpsc::Sender<CallEvent>>>>,
    next_call: Arc<AtomicU64>,
    closed: CancellationToken,
}

impl LinkHandle {
    /// A link numbered `id` and the receiving end of its outbound queue.
    pub fn new(id: u64) -> (Self, mpsc::Receiver<Outbound>) {
        let (out, rx) = mpsc::channel(OUTBOUND_QUEUE);
        let handle = Self {
            id,
            out,
            pending: Arc::default(),
            next_call: Arc::new(AtomicU64::new(1)),
            closed: CancellationToken::new(),
        };
        (handle, rx)
    }

    /// The link's number (a node that reconnects gets a new one).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Cancelled when the link ends.
    pub fn closed(&self) -> &CancellationToken {
        &self.closed
    }

    /// Ends the link: the serving side stops, and every call in flight loses its answer.
    pub fn close(&self) {
        self.closed.cancel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Queues a heartbeat; false when the queue is full or the link is gone.
    pub fn heartbeat(&self) -> bool {
        self.out.try_send(Outbound::Heartbeat).is_ok()
    }

    /// Starts a call of `tool` as claimed with `claim_digest`; `None` when the link is closed or
    /// already carries [`MAX_CALLS_IN_FLIGHT`] calls. The receiver ends without `Done` if the link
    /// drops.
    pub async fn call(
        &self,
        tool: &str,
        arguments_json: String,
        timeout_ms: u32,
        claim_digest: &str,
    ) -> Option<(u64, mpsc::Receiver<CallEvent>)> {
        if self.closed.is_cancelled() {
            return None;
        }
        let call_id = self.next_call.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(8);
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            if pending.len() >= MAX_CALLS_IN_FLIGHT {
                return None;
            }
            pending.insert(call_id, tx);
        }
        let frame = Outbound::Call {
            call_id,
            tool: tool.to_owned(),
            arguments_json,
            timeout_ms,
            claim_digest: claim_digest.to_owned(),
        };
        if self.out.send(frame).await.is_err() {
            self.forget(call_id);
            return None;
        }
        Some((call_id, rx))
    }

    /// Asks the node to stop a call and stops waiting for it.
    pub fn cancel(&self, call_id: u64) {
        self.forget(call_id);
        let _ = self.out.try_send(Outbound::Cancel { call_id });
    }

    /// Stops waiting for a call.
    pub fn forget(&self, call_id: u64) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&call_id);
    }

    /// Hands the node's word about `call_id` to its caller; a final one ends the wait.
    pub fn deliver(&self, call_id: u64, event: CallEvent) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let done = matches!(event, CallEvent::Done { .. });
        if let Some(tx) = pending.get(&call_id) {
            // A full queue of progress reports drops this one: only the latest matters.
            let _ = tx.try_send(event);
        }
        if done {
            pending.remove(&call_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_result_reaches_its_call_and_a_drop_ends_the_others() {
        let (link, mut out) = LinkHandle::new(1);
        let (first, mut answer) = link.call("t", "{}".into(), 1000, "d").await.unwrap();
        assert!(
            matches!(out.recv().await, Some(Outbound::Call { call_id, .. }) if call_id == first)
        );
        link.deliver(first, CallEvent::Progress(ToolProgress::message("half")));
        link.deliver(
            first,
            CallEvent::Done {
                ok: true,
                text: "ok".into(),
            },
        );
        assert_eq!(
            answer.recv().await,
            Some(CallEvent::Progress(ToolProgress::message("half")))
        );
        assert_eq!(
            answer.recv().await,
            Some(CallEvent::Done {
                ok: true,
                text: "ok".into()
            })
        );
        let (_, mut lost) = link.call("t", "{}".into(), 1000, "d").await.unwrap();
        link.close();
        assert_eq!(
            lost.recv().await,
            None,
            "a dropped link ends the wait with no answer"
        );
        assert!(link.call("t", "{}".into(), 1000, "d").await.is_none());
    }
}
