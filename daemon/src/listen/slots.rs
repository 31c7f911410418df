//! [`Slots`]: the connections open on one listener, bounded by its cap.
//!
//! A connection is *proven* once it has sent the headers of a request, and *busy* while a request
//! of it is in flight (until its response body has ended or was dropped). When the table is full,
//! a new connection takes the place of the oldest unproven one; failing that, of the proven one
//! idle the longest (an HTTP/2 client that keeps a connection open but uses it for nothing). Both
//! are told to close: the unproven at once, the idle one gracefully. So neither silent nor idle
//! connections can lock out a client that speaks (`GET /health`, a turn); when every open
//! connection is busy, the new one is refused.
//!
//! Invariants: at most `cap` connections are admitted at a time (an evicted connection leaves the
//! table when it is evicted, its socket a moment later); a slot leaves the table when dropped; a
//! busy connection is never evicted; the lock is never held across an `.await`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

struct Entry {
    activity: Arc<Activity>,
    evict: CancellationToken,
}

/// What a connection's requests did: whether it sent one, how many are in flight, and when the
/// last one ended (milliseconds since the table began).
#[derive(Debug)]
struct Activity {
    started: Instant,
    proven: AtomicBool,
    in_flight: AtomicUsize,
    idle_since_ms: AtomicU64,
}

impl Activity {
    fn new(started: Instant) -> Self {
        let activity = Self {
            started,
            proven: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
        };
        activity.mark_idle();
        activity
    }

    fn mark_idle(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.idle_since_ms.store(ms, Ordering::Release);
    }

    fn is_proven(&self) -> bool {
        self.proven.load(Ordering::Acquire)
    }

    /// When it became idle, if it is (no request in flight).
    fn idle_since(&self) -> Option<u64> {
        (self.in_flight.load(Ordering::Acquire) == 0)
            .then(|| self.idle_since_ms.load(Ordering::Acquire))
    }
}

#[derive(Default)]
struct Table {
    next_id: u64,
    open: BTreeMap<u64, Entry>,
    /// Whether the cap has been reported since the table last had room (one warning per episode).
    full_reported: bool,
}

/// The open connections of one listener.
pub struct Slots {
    name: &'static str,
    cap: usize,
    started: Instant,
    table: Mutex<Table>,
}

/// How a new connection was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// There was room.
    Free,
    /// The oldest connection that had not sent a request was closed to make room.
    Evicted,
    /// Every connection had sent a request; the one idle the longest was closed to make room.
    EvictedIdle,
}

impl Slots {
    /// An empty table for the listener `name` (for logs), holding at most `cap` connections
    /// (at least one).
    pub fn new(name: &'static str, cap: usize) -> Arc<Self> {
        Arc::new(Self {
            name,
            cap: cap.max(1),
            started: Instant::now(),
            table: Mutex::new(Table::default()),
        })
    }

    /// Admits a new connection, evicting the oldest unproven one, or else the proven one idle the
    /// longest, when full; `None`: full of busy connections, refuse it.
    pub fn admit(self: &Arc<Self>) -> Option<(Slot, Admitted)> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let mut how = Admitted::Free;
        if table.open.len() >= self.cap {
            let unproven = table
                .open
                .iter()
                .find(|(_, e)| !e.activity.is_proven())
                .map(|(id, _)| (*id, Admitted::Evicted));
            let choice = unproven.or_else(|| {
                table
                    .open
                    .iter()
                    .filter_map(|(id, e)| e.activity.idle_since().map(|since| (since, *id)))
                    .min()
                    .map(|(_, id)| (id, Admitted::EvictedIdle))
            });
            if !table.full_reported {
                table.full_reported = true;
                tracing::warn!(
                    listener = self.name,
                    cap = self.cap,
                    "connection cap reached: new connections replace ones that sent no request \
                     or sit idle, or are closed"
                );
            }
            match choice.and_then(|(id, why)| table.open.remove(&id).map(|e| (e, why))) {
                Some((entry, why)) => {
                    entry.evict.cancel();
                    how = why;
                }
                None => {
                    tracing::debug!(listener = self.name, "connection refused: cap reached");
                    return None;
                }
            }
        } else if table.open.len() + 1 < self.cap {
            table.full_reported = false;
        }
        let id = table.next_id;
        table.next_id += 1;
        let activity = Arc::new(Activity::new(self.started));
        let evict = CancellationToken::new();
        table.open.insert(
            id,
            Entry {
                activity: Arc::clone(&activity),
                evict: evict.clone(),
            },
        );
        let slot = Slot {
            id,
            slots: Arc::clone(self),
            activity,
            evict,
        };
        Some((slot, how))
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .len()
    }

    fn release(&self, id: u64) {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .remove(&id);
    }
}

/// One admitted connection's place in the table; dropping it frees the place.
pub struct Slot {
    id: u64,
    slots: Arc<Slots>,
    activity: Arc<Activity>,
    evict: CancellationToken,
}

impl Slot {
    /// A handle the request path uses to mark the connection's requests.
    pub fn tracker(&self) -> RequestTracker {
        RequestTracker(Arc::clone(&self.activity))
    }

    /// Whether the connection has sent a request.
    pub fn is_proven(&self) -> bool {
        self.activity.is_proven()
    }

    /// How long the connection has had no request in flight; `None` while one is.
    pub fn idle_for(&self) -> Option<std::time::Duration> {
        let since = self.activity.idle_since()?;
        let now = u64::try_from(self.activity.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Some(std::time::Duration::from_millis(now.saturating_sub(since)))
    }

    /// Resolves when a newer connection evicted this one.
    pub async fn evicted(&self) {
        self.evict.cancelled().await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.release(self.id);
    }
}

/// Marks a connection's requests (cheap to clone into a per-request service).
#[derive(Clone)]
pub struct RequestTracker(Arc<Activity>);

impl RequestTracker {
    /// A request arrived: the connection is proven and busy until the guard is dropped (keep it
    /// with the response body, so a streaming response counts until it ends).
    pub fn begin(&self) -> InFlight {
        self.0.proven.store(true, Ordering::Release);
        self.0.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(&self.0))
    }
}

/// One request in flight on a connection.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        // Idle from now on if this was the last one (the time is only read while idle).
        self.0.mark_idle();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_evicts_the_oldest_silent_connection() {
        let slots = Slots::new("test", 3);
        let (a, how) = slots.admit().unwrap();
        assert_eq!(how, Admitted::Free);
        let (b, _) = slots.admit().unwrap();
        let (c, _) = slots.admit().unwrap();
        let _a_busy = a.tracker().begin();
        assert_eq!(slots.open(), 3);

        // Full: the oldest unproven one (b) makes room; a is proven and stays.
        let (d, how) = slots.admit().unwrap();
        assert_eq!(how, Admitted::Evicted);
        assert!(b.evict.is_cancelled());
        assert!(!a.evict.is_cancelled() && !c.evict.is_cancelled());
        assert_eq!(slots.open(), 3);
        drop(b); // the evicted connection's task ends; the table is not double-counted
        assert_eq!(slots.open(), 3);

        let _c_busy = c.tracker().begin();
        let _d_busy = d.tracker().begin();
        assert!(slots.admit().is_none(), "every open connection is busy");
        drop(c);
        assert_eq!(slots.open(), 2);
        let (_e, how) = slots.admit().unwrap();
        assert_eq!(how, Admitted::Free);
    }

    #[test]
    fn the_cap_is_at_least_one() {
        let slots = Slots::new("test", 0);
        let (first, _) = slots.admit().unwrap();
        let _busy = first.tracker().begin();
        assert!(slots.admit().is_none());
    }

    #[test]
    fn a_table_of_proven_connections_evicts_the_one_idle_the_longest_and_never_a_busy_one() {
        let slots = Slots::new("test", 3);
        let (a, _) = slots.admit().unwrap();
        let (b, _) = slots.admit().unwrap();
        let (c, _) = slots.admit().unwrap();
        let a_busy = a.tracker().begin();
        // b became idle before c did.
        drop(b.tracker().begin());
        std::thread::sleep(std::time::Duration::from_millis(5));
        drop(c.tracker().begin());
        let (d, how) = slots.admit().unwrap();
        assert_eq!(how, Admitted::EvictedIdle);
        assert!(b.evict.is_cancelled());
        assert!(!a.evict.is_cancelled() && !c.evict.is_cancelled());
        // A connection with a request in flight stays, even if it is the oldest.
        let _c_busy = c.tracker().begin();
        let _d_busy = d.tracker().begin();
        assert!(slots.admit().is_none(), "a, c and d are busy");
        drop(a_busy);
        let (_e, how) = slots.admit().unwrap();
        assert_eq!(how, Admitted::EvictedIdle);
        assert!(a.evict.is_cancelled());
    }
}
