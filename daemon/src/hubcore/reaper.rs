//! The idle reaper: drops the agents (and event buses) of sessions nobody uses from memory; their
//! history stays in the store and only their last seq is remembered.
//!
//! Invariants:
//! - The reaper runs a timer only while a session is open: with none open it waits, without a
//!   timer, for the next session to open (so an idle hub spends no CPU on it).
//! - A session leaves memory only when it has been unused for `idle_after`, has no turn running or
//!   queued, no attachment, subscriber or pending approval, and no call holds its runtime.
//! - It holds the open map's tokio mutex while it drops, never a std lock across an `.await`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::info;

use super::core::{HubCore, lock};

/// Starts the reaper of `core`; it ends when the core stops.
pub(super) fn spawn(core: &HubCore) {
    let core = core.clone();
    let period =
        (core.options().idle_after / 2).clamp(Duration::from_millis(10), Duration::from_secs(60));
    tokio::spawn(async move {
        let stop = core.inner.stop.clone();
        loop {
            if core.open_sessions() == 0 {
                // A session opened since the count was read has left a permit: no wake-up is lost.
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = core.inner.opened.notified() => continue,
                }
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(period) => {
                    core.inner.reaper_passes.fetch_add(1, Ordering::Relaxed);
                    core.drop_idle().await;
                }
            }
        }
    });
}

impl HubCore {
    /// How many times the idle reaper has looked for idle sessions (it looks only while sessions
    /// are open).
    pub fn reaper_passes(&self) -> u64 {
        self.inner.reaper_passes.load(Ordering::Relaxed)
    }

    /// Drops the agents of sessions nobody uses (their history stays in the store).
    pub async fn drop_idle(&self) {
        let idle_after = self.options().idle_after;
        let mut open = self.inner.open.lock().await;
        let registry = self.registry();
        let idle: Vec<String> = open
            .iter()
            .filter(|(id, runtime)| {
                // The map and the worker hold it; a call holding it too is about to use it.
                Arc::strong_count(runtime) <= 2
                    && runtime.idle_for() >= idle_after
                    && registry.attachments_on(id) == 0
                    && registry.list_pending(Some(id)).is_empty()
                    && runtime.bus.subscriber_count() == 0
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            let Some(runtime) = open.get(&id) else {
                continue;
            };
            {
                let mut turns = runtime.lock_turns();
                if turns.busy() {
                    continue;
                }
                turns.closed = true;
            }
            runtime.stop.cancel();
            lock(&self.inner.last_seqs).insert(id.clone(), runtime.bus.last_seq());
            open.remove(&id);
            lock(&self.inner.workers).remove(&id);
            info!(session_id = %id, "dropped an idle session's agent from memory");
        }
        self.inner.open_count.store(open.len(), Ordering::Relaxed);
    }
}
