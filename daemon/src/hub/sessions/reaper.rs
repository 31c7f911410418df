//! The idle reaper: a task that retires idle open sessions (their agents and event buses leave
//! memory; their history stays in the store and only their last seq is remembered), through
//! [`OpenSessions::retire_idle`], and cuts the replay buffers of sessions that stay open but idle
//! ([`OpenSessions::trim_idle`]). See ARCHITECTURE.md, "hub/".
//!
//! Invariants:
//! - The reaper runs a timer only while a session is open: with none open it waits, without a
//!   timer, for the next session to open (so an idle hub spends no CPU on it).
//! - What counts as idle, and how a session leaves memory, is [`OpenSessions`]'s: the reaper only
//!   decides when to look.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::open_sessions::{OpenSessions, TRIM_IDLE_AFTER};

/// Starts the reaper of `sessions`, looking every `idle_after / 2` (10 ms to 60 s) while any is
/// open and counting its looks in `passes`; it ends when `stop` is cancelled.
pub(in crate::hub) fn spawn_reaper(
    sessions: Arc<OpenSessions>,
    idle_after: Duration,
    stop: CancellationToken,
    passes: Arc<AtomicU64>,
) {
    let period = (idle_after / 2).clamp(Duration::from_millis(10), Duration::from_secs(60));
    tokio::spawn(async move {
        loop {
            if sessions.len() == 0 {
                // A session opened since the count was read has left a permit: no wake-up is lost.
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = sessions.wait_opened() => continue,
                }
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(period) => {
                    passes.fetch_add(1, Ordering::Relaxed);
                    sessions.retire_idle(idle_after).await;
                    sessions.trim_idle(TRIM_IDLE_AFTER.min(idle_after)).await;
                }
            }
        }
    });
}
