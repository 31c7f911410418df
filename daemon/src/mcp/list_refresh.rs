//! `notifications/tools/list_changed` → one re-list: the server's notifications are counted (the
//! count is the listing's generation), notifications within [`DEBOUNCE`] of the first cause one
//! `tools/list`, and [`ListingGuard`] keeps a listing asked before a newer one from replacing it.
//!
//! Invariants: the rmcp handler only bumps the counter (no I/O in the callback, nothing awaited);
//! a listing is applied only when its generation is newer than the one applied last, so the
//! published tools never go back to an older list, whatever order the answers come in; applying
//! only publishes the new set, which turns pick up when they next build their catalog (the next
//! turn boundary), never mid-turn.

use std::time::Duration;

use tokio::sync::watch;

/// How long after a first `list_changed` more of them are folded into the same re-list.
pub const DEBOUNCE: Duration = Duration::from_millis(500);

/// The two ends of a server's notification counter: the handler bumps the sender, the
/// supervisor watches the receiver.
pub fn change_counter() -> (watch::Sender<u64>, watch::Receiver<u64>) {
    watch::channel(0)
}

/// Counts one `list_changed` notification.
pub fn count_change(counter: &watch::Sender<u64>) {
    counter.send_modify(|n| *n = n.saturating_add(1));
}

/// The generation of the tool set published last: the number of `list_changed` notifications
/// seen before its `tools/list` was asked (0 for the listing at start).
#[derive(Debug, Default)]
pub struct ListingGuard {
    applied: u64,
}

impl ListingGuard {
    /// Whether a listing asked at `generation` may replace the published one (it is newer); if
    /// so, it becomes the published generation.
    pub fn admit(&mut self, generation: u64) -> bool {
        if generation > self.applied {
            self.applied = generation;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_listing_never_replaces_a_newer_one() {
        let mut guard = ListingGuard::default();
        assert!(!guard.admit(0), "the start listing is generation 0");
        assert!(guard.admit(2));
        assert!(
            !guard.admit(1),
            "asked before the newer one, answered after it"
        );
        assert!(!guard.admit(2));
        assert!(guard.admit(3));
    }

    #[tokio::test]
    async fn notifications_are_counted_and_folded() {
        let (counter, mut seen) = change_counter();
        for _ in 0..5 {
            count_change(&counter);
        }
        seen.changed().await.unwrap();
        assert_eq!(*seen.borrow_and_update(), 5);
        assert!(!seen.has_changed().unwrap());
    }
}
