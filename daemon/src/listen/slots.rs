//! [`Slots`]: the connections open on one listener, bounded by its cap.
//!
//! A connection is *proven* once it has sent the headers of a request. When the table is full, a
//! new connection takes the place of the oldest unproven one (which is told to close), so silent
//! connections cannot lock out a client that speaks at once (`GET /health`, a turn); when every
//! open connection is proven, the new one is refused.
//!
//! Invariants: at most `cap` connections are admitted at a time (an evicted connection leaves the
//! table when it is evicted, its socket a moment later); a slot leaves the table when dropped;
//! only an unproven connection is ever evicted; the lock is never held across an `.await`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

struct Entry {
    proven: Arc<AtomicBool>,
    evict: CancellationToken,
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
    table: Mutex<Table>,
}

/// How a new connection was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// There was room.
    Free,
    /// The oldest connection that had not sent a request was closed to make room.
    Evicted,
}

impl Slots {
    /// An empty table for the listener `name` (for logs), holding at most `cap` connections
    /// (at least one).
    pub fn new(name: &'static str, cap: usize) -> Arc<Self> {
        Arc::new(Self {
            name,
            cap: cap.max(1),
            table: Mutex::new(Table::default()),
        })
    }

    /// Admits a new connection, evicting the oldest unproven one when full; `None`: full of
    /// proven connections, refuse it.
    pub fn admit(self: &Arc<Self>) -> Option<(Slot, Admitted)> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let mut how = Admitted::Free;
        if table.open.len() >= self.cap {
            let oldest = table
                .open
                .iter()
                .find(|(_, e)| !e.proven.load(Ordering::Acquire))
                .map(|(id, _)| *id);
            let evicted = oldest.and_then(|id| table.open.remove(&id));
            if !table.full_reported {
                table.full_reported = true;
                tracing::warn!(
                    listener = self.name,
                    cap = self.cap,
                    "connection cap reached: new connections replace ones that sent no request, \
                     or are closed"
                );
            }
            match evicted {
                Some(entry) => {
                    entry.evict.cancel();
                    how = Admitted::Evicted;
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
        let proven = Arc::new(AtomicBool::new(false));
        let evict = CancellationToken::new();
        table.open.insert(
            id,
            Entry {
                proven: Arc::clone(&proven),
                evict: evict.clone(),
            },
        );
        let slot = Slot {
            id,
            slots: Arc::clone(self),
            proven,
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
    proven: Arc<AtomicBool>,
    evict: CancellationToken,
}

impl Slot {
    /// Marks the connection as having sent a request (it can no longer be evicted).
    pub fn prove(&self) {
        self.proven.store(true, Ordering::Release);
    }

    /// A handle that marks the connection proven, for the request path.
    pub fn prover(&self) -> Prover {
        Prover(Arc::clone(&self.proven))
    }

    /// Whether the connection has sent a request.
    pub fn is_proven(&self) -> bool {
        self.proven.load(Ordering::Acquire)
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

/// Marks a connection proven (cheap to clone into a per-request service).
#[derive(Clone)]
pub struct Prover(Arc<AtomicBool>);

impl Prover {
    /// The connection sent a request.
    pub fn prove(&self) {
        self.0.store(true, Ordering::Release);
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
        a.prove();
        assert_eq!(slots.open(), 3);

        // Full: the oldest unproven one (b) makes room; a is proven and stays.
        let (d, how) = slots.admit().unwrap();
        assert_eq!(how, Admitted::Evicted);
        assert!(b.evict.is_cancelled());
        assert!(!a.evict.is_cancelled() && !c.evict.is_cancelled());
        assert_eq!(slots.open(), 3);
        drop(b); // the evicted connection's task ends; the table is not double-counted
        assert_eq!(slots.open(), 3);

        c.prove();
        d.prove();
        assert!(slots.admit().is_none(), "every open connection is proven");
        drop(c);
        assert_eq!(slots.open(), 2);
        let (_e, how) = slots.admit().unwrap();
        assert_eq!(how, Admitted::Free);
    }

    #[test]
    fn the_cap_is_at_least_one() {
        let slots = Slots::new("test", 0);
        let (first, _) = slots.admit().unwrap();
        first.prove();
        assert!(slots.admit().is_none());
    }
}
