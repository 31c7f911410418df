//! The idle reaper: drops the agents (and event buses) of sessions nobody uses from memory; their
//! history stays in the store and only their last seq is remembered.
//!
//! Invariants:
//! - The reaper runs a timer only while a session is open: with none open it waits, without a
//!   timer, for the next session to open (so an idle hub spends no CPU on it).
//! - A session leaves memory only when it has been unused for `idle_after`, has no turn running or
//!   queued, no attachment, subscriber or pending approval, and no call holds its runtime.
//! - It holds the open map's tokio mutex while it drops, never a std lock across an `.await`.
//! - When `max_open_sessions` are open, opening another first drops the least recently used
//!   session nobody uses (same rules, whatever its idle time), or is refused when all are in use.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::info;

use super::core::{HubCore, lock};
use super::runtime::SessionRuntime;

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
        let idle: Vec<String> = open
            .iter()
            .filter(|(id, runtime)| runtime.idle_for() >= idle_after && self.unused(id, runtime))
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            if self.retire_unused(&mut open, &id) {
                info!(session_id = %id, "dropped an idle session's agent from memory");
            }
        }
    }

    /// Makes room for one more open session by dropping the least recently used one nobody uses;
    /// false when every open session is in use.
    pub(super) fn retire_least_recent(
        &self,
        open: &mut HashMap<String, Arc<SessionRuntime>>,
    ) -> bool {
        let mut candidates: Vec<(std::time::Duration, String)> = open
            .iter()
            .filter(|(id, runtime)| self.unused(id, runtime))
            .map(|(id, runtime)| (runtime.idle_for(), id.clone()))
            .collect();
        candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
        for (_, id) in candidates {
            if self.retire_unused(open, &id) {
                info!(session_id = %id, "dropped the least recently used session's agent from memory to open another");
                return true;
            }
        }
        false
    }

    /// Whether nothing uses an open session: no attachment, subscriber or pending approval, and
    /// no call holding its runtime (the map and the worker hold it; a call holding it too is
    /// about to use it).
    fn unused(&self, id: &str, runtime: &Arc<SessionRuntime>) -> bool {
        let registry = self.registry();
        Arc::strong_count(runtime) <= 2
            && registry.attachments_on(id) == 0
            && registry.list_pending(Some(id)).is_empty()
            && runtime.bus.subscriber_count() == 0
    }

    /// Drops `id` from memory unless a turn runs or waits there; whether it was dropped.
    fn retire_unused(&self, open: &mut HashMap<String, Arc<SessionRuntime>>, id: &str) -> bool {
        let Some(runtime) = open.get(id) else {
            return false;
        };
        {
            let mut turns = runtime.lock_turns();
            if turns.busy() {
                return false;
            }
            turns.closed = true;
        }
        runtime.stop.cancel();
        self.take_out(open, id);
        true
    }

    /// Takes `id` out of the open map (its runtime already stopped): remembers its last seq for
    /// the next opening and forgets its worker. The one way a session leaves memory before the
    /// hub stops, used by the idle reaper, by making room, and by the worker supervisor.
    pub(super) fn take_out(&self, open: &mut HashMap<String, Arc<SessionRuntime>>, id: &str) {
        if let Some(runtime) = open.remove(id) {
            lock(&self.inner.last_seqs).insert(id.to_owned(), runtime.bus.last_seq());
        }
        lock(&self.inner.workers).remove(id);
        self.inner.open_count.store(open.len(), Ordering::Relaxed);
    }
}
