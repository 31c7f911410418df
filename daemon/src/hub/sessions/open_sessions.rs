//! [`OpenSessions`]: the sessions in memory (one [`SessionRuntime`] and its worker each), the last
//! seq of sessions that left memory, and the one way a session leaves memory ([`Retire`]). See
//! ARCHITECTURE.md, "hub/".
//!
//! Invariants:
//! - At most `max_open` sessions are open. Opening one more first retires the least recently used
//!   session nobody uses, or is refused (`ResourceExhausted`) when every one is in use.
//! - The map is a tokio mutex, held by [`OpenSessionsGuard`] across the store read that opens a
//!   session, so a session is never opened twice; no std lock is held across an `.await`.
//! - A session leaves memory only through [`OpenSessions::retire`], under the map's lock, whatever
//!   the reason (idle, a dead worker, the hub stopping): its turn table is closed to new turns and
//!   its turns end (none for an idle one, with an error for a dead worker, cancelled when the hub
//!   stops), its pending approvals are cancelled, its worker is stopped, it leaves the map and its
//!   last seq is remembered (at most [`REMEMBERED_SEQS`] sessions), all before any call can open it
//!   again, so an old and a new bus never number the same seq.
//! - A session is unused when it has no attachment, subscriber or pending approval, no title's
//!   write runs in it, and no call holds its runtime (only the map and its worker do); only an unused session that has no turn
//!   running or queued is retired as idle.
//! - Once closed for the hub's stop, nothing opens again.
//! - An open session without a turn for [`TRIM_IDLE_AFTER`] keeps at most [`IDLE_REPLAY_BYTES`] of
//!   replayable events (the reaper cuts them on its next look).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::info;

use super::remembered::Remembered;
use super::runtime::SessionRuntime;
use crate::hub::approvals::ApprovalRegistry;
use crate::hub::error::CoreError;
use crate::hub::events::IDLE_REPLAY_BYTES;

/// Sessions whose last seq is remembered after they leave memory.
pub const REMEMBERED_SEQS: usize = 4096;
/// How long an open session goes without a turn before the idle reaper cuts its replay buffer
/// to [`IDLE_REPLAY_BYTES`] (at most the idle time after which it closes).
pub const TRIM_IDLE_AFTER: Duration = Duration::from_secs(60);

/// Why a session leaves memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retire {
    /// Nobody used it for a while, or its place is needed: only when no turn runs or waits.
    Idle,
    /// Its worker panicked or ended: its turns end with an error.
    WorkerDied,
    /// The hub stops: its running turn is cancelled; its worker ends the queued ones.
    HubStopping,
}

/// An open session: its runtime and its worker.
struct OpenEntry {
    runtime: Arc<SessionRuntime>,
    worker: Option<JoinHandle<()>>,
}

/// The sessions in memory.
pub(crate) struct OpenSessions {
    entries: tokio::sync::Mutex<HashMap<String, OpenEntry>>,
    /// `entries.len()`, readable without the tokio lock.
    count: AtomicUsize,
    max_open: usize,
    /// The last seq of sessions that left memory (the oldest forgotten past [`REMEMBERED_SEQS`]).
    last_seqs: Mutex<Remembered<u64>>,
    /// Wakes the idle reaper when a session opens.
    opened: Notify,
    closing: AtomicBool,
    registry: Arc<ApprovalRegistry>,
}

/// The open map, held: look a session up, make room, insert one.
pub(crate) struct OpenSessionsGuard<'a> {
    sessions: &'a OpenSessions,
    entries: tokio::sync::MutexGuard<'a, HashMap<String, OpenEntry>>,
}

impl OpenSessions {
    /// No session open yet; at most `max_open` at once.
    pub(crate) fn new(max_open: usize, registry: Arc<ApprovalRegistry>) -> Self {
        Self {
            entries: tokio::sync::Mutex::new(HashMap::new()),
            count: AtomicUsize::new(0),
            max_open,
            last_seqs: Mutex::new(Remembered::new(REMEMBERED_SEQS)),
            opened: Notify::new(),
            closing: AtomicBool::new(false),
            registry,
        }
    }

    /// Holds the open map (waiting for it), to open a session.
    pub(crate) async fn lock(&self) -> OpenSessionsGuard<'_> {
        OpenSessionsGuard {
            sessions: self,
            entries: self.entries.lock().await,
        }
    }

    /// The runtime of a session in memory.
    pub(crate) async fn get(&self, session_id: &str) -> Option<Arc<SessionRuntime>> {
        self.entries
            .lock()
            .await
            .get(session_id)
            .map(|e| Arc::clone(&e.runtime))
    }

    /// Waits for the title writes that run in open sessions (`SessionRuntime::start_title`), so a
    /// read of the store's metadata after it sees their titles.
    pub(crate) async fn settle_titles(&self) {
        let writing: Vec<Arc<SessionRuntime>> = self
            .entries
            .lock()
            .await
            .values()
            .filter(|e| e.runtime.title_in_flight())
            .map(|e| Arc::clone(&e.runtime))
            .collect();
        for runtime in writing {
            runtime.settle_title().await;
        }
    }

    /// How many sessions are open.
    pub(crate) fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// How many sessions anything is kept for: open ones, and remembered seqs.
    pub(crate) fn tracked(&self) -> usize {
        self.len() + lock(&self.last_seqs).len()
    }

    /// Waits until a session opens (a permit left by an opening since the last wait counts).
    pub(crate) async fn wait_opened(&self) {
        self.opened.notified().await;
    }

    /// Cuts the replay buffer of every open session without a turn for `after` to
    /// [`IDLE_REPLAY_BYTES`] (the reaper passes [`TRIM_IDLE_AFTER`], or the idle time when sooner).
    pub(crate) async fn trim_idle(&self, after: Duration) {
        let entries = self.entries.lock().await;
        for entry in entries.values() {
            let runtime = &entry.runtime;
            // The turn table's lock is let go before the bus's is taken (bus first, always).
            let busy = runtime.turns.lock().busy();
            if !busy && runtime.idle_for() >= after {
                runtime.bus.trim_to(IDLE_REPLAY_BYTES);
            }
        }
    }

    /// Retires every session unused for `idle_after` with no turn running or queued. A title's
    /// write still running after a session's last turn is waited for first (a session is not
    /// retired while one runs).
    pub(crate) async fn retire_idle(&self, idle_after: Duration) {
        self.settle_titles().await;
        let mut entries = self.entries.lock().await;
        let idle: Vec<Arc<SessionRuntime>> = entries
            .values()
            .filter(|e| e.runtime.idle_for() >= idle_after && self.unused(&e.runtime))
            .map(|e| Arc::clone(&e.runtime))
            .collect();
        for runtime in idle {
            if self.retire(&mut entries, &runtime, Retire::Idle).is_some() {
                info!(session_id = %runtime.session_id, "dropped an idle session's agent from memory");
            }
        }
    }

    /// Retires the session of a worker that is gone (it panicked, or ended while its session
    /// was still open); returns how many turns it ended, or `None` when there was nothing to do
    /// (its session had already left memory, and the worker ended normally).
    pub(crate) async fn retire_dead(
        &self,
        runtime: &Arc<SessionRuntime>,
        panicked: bool,
    ) -> Option<usize> {
        let mut entries = self.entries.lock().await;
        let current = is_current(&entries, runtime);
        if !current && !panicked {
            // Retired as idle or with the hub: its worker's end is expected.
            return None;
        }
        self.retire(&mut entries, runtime, Retire::WorkerDied)
            .map(|retired| retired.turns_ended)
    }

    /// Closes for the hub's stop: nothing opens again, and every open session is retired.
    /// Returns their workers, to wait for.
    pub(crate) async fn close_all(&self) -> Vec<JoinHandle<()>> {
        self.closing.store(true, Ordering::SeqCst);
        let mut entries = self.entries.lock().await;
        let runtimes: Vec<Arc<SessionRuntime>> =
            entries.values().map(|e| Arc::clone(&e.runtime)).collect();
        runtimes
            .iter()
            .filter_map(|runtime| self.retire(&mut entries, runtime, Retire::HubStopping))
            .filter_map(|retired| retired.worker)
            .collect()
    }

    /// Whether nothing uses an open session (see the module invariants): the map and the worker
    /// hold its runtime; a call holding it too is about to use it. A title's write running counts
    /// as a use: a session opened again meanwhile would rewrite its metadata beside it.
    fn unused(&self, runtime: &Arc<SessionRuntime>) -> bool {
        let id = runtime.session_id.as_str();
        Arc::strong_count(runtime) <= 2
            && !runtime.title_in_flight()
            && self.registry.attachments_on(id) == 0
            && self.registry.list_pending(Some(id)).is_empty()
            && runtime.bus.subscriber_count() == 0
    }

    /// The one retire sequence (see the module invariants), for `runtime` whether or not it is
    /// still the open one of its session (a dead worker's runtime may have left already; then
    /// only its own turns end). `None` when an idle session turned out busy.
    fn retire(
        &self,
        entries: &mut HashMap<String, OpenEntry>,
        runtime: &Arc<SessionRuntime>,
        why: Retire,
    ) -> Option<Retired> {
        let id = runtime.session_id.as_str();
        let current = is_current(entries, runtime);
        let turns_ended = match why {
            Retire::Idle => {
                if !runtime.turns.close_if_idle() {
                    return None;
                }
                0
            }
            Retire::WorkerDied => {
                let ended = runtime.turns.fail_all();
                runtime.turn_slot.set(None);
                ended
            }
            Retire::HubStopping => {
                runtime.turns.close_to_turns();
                runtime.turns.cancel(None);
                0
            }
        };
        if current {
            // Only the open runtime's approvals are this runtime's: a newer one may have opened.
            self.registry.cancel_session(id);
        }
        runtime.stop.cancel();
        let mut worker = None;
        if current && let Some(entry) = entries.remove(id) {
            worker = entry.worker;
            if why != Retire::HubStopping {
                lock(&self.last_seqs).insert(id.to_owned(), runtime.bus.last_seq());
            }
        }
        self.count.store(entries.len(), Ordering::Relaxed);
        Some(Retired {
            turns_ended,
            worker,
        })
    }
}

/// What retiring a session did.
struct Retired {
    turns_ended: usize,
    worker: Option<JoinHandle<()>>,
}

impl OpenSessionsGuard<'_> {
    /// The runtime of a session in memory.
    pub(crate) fn get(&self, session_id: &str) -> Option<Arc<SessionRuntime>> {
        self.entries.get(session_id).map(|e| Arc::clone(&e.runtime))
    }

    /// Makes room for one more session: refused while the hub stops, or when `max_open` are open
    /// and each is in use; else the least recently used unused one without turns is retired.
    pub(crate) fn make_room(&mut self) -> Result<(), CoreError> {
        let sessions = self.sessions;
        if sessions.closing.load(Ordering::SeqCst) {
            return Err(CoreError::Unavailable("the hub is stopping".to_owned()));
        }
        if self.entries.len() < sessions.max_open {
            return Ok(());
        }
        let mut candidates: Vec<(Duration, Arc<SessionRuntime>)> = self
            .entries
            .values()
            .filter(|e| sessions.unused(&e.runtime))
            .map(|e| (e.runtime.idle_for(), Arc::clone(&e.runtime)))
            .collect();
        candidates.sort_by_key(|c| std::cmp::Reverse(c.0));
        for (_, runtime) in candidates {
            if sessions
                .retire(&mut self.entries, &runtime, Retire::Idle)
                .is_some()
            {
                info!(session_id = %runtime.session_id, "dropped the least recently used session's agent from memory to open another");
                return Ok(());
            }
        }
        Err(CoreError::ResourceExhausted(format!(
            "{} sessions are open in memory and each has a turn, a client or an approval (at most {}); try again when one is done",
            self.entries.len(),
            sessions.max_open
        )))
    }

    /// The last seq of a session that left memory (0 for one never open in this process).
    pub(crate) fn last_seq(&self, session_id: &str) -> u64 {
        lock(&self.sessions.last_seqs)
            .get(session_id)
            .copied()
            .unwrap_or(0)
    }

    /// Adds an opened session and its worker (after [`OpenSessionsGuard::make_room`]); the
    /// remembered seq it continues from is forgotten.
    pub(crate) fn insert(&mut self, runtime: Arc<SessionRuntime>, worker: JoinHandle<()>) {
        let sessions = self.sessions;
        let id = runtime.session_id.clone();
        lock(&sessions.last_seqs).remove(&id);
        self.entries.insert(
            id,
            OpenEntry {
                runtime,
                worker: Some(worker),
            },
        );
        sessions.count.store(self.entries.len(), Ordering::Relaxed);
        sessions.opened.notify_one();
    }

    /// Puts `runtime` in place of its session's open one, returning that one (tests only: a
    /// stand-in runtime whose worker misbehaves).
    #[cfg(test)]
    pub(crate) fn replace(&mut self, runtime: Arc<SessionRuntime>) -> Option<Arc<SessionRuntime>> {
        let entry = self.entries.get_mut(&runtime.session_id)?;
        Some(std::mem::replace(&mut entry.runtime, runtime))
    }

    /// Takes a session out of the map without retiring it (tests only: as if retired already).
    #[cfg(test)]
    pub(crate) fn remove(&mut self, session_id: &str) -> Option<Arc<SessionRuntime>> {
        let entry = self.entries.remove(session_id)?;
        self.sessions
            .count
            .store(self.entries.len(), Ordering::Relaxed);
        Some(entry.runtime)
    }
}

fn is_current(entries: &HashMap<String, OpenEntry>, runtime: &Arc<SessionRuntime>) -> bool {
    entries
        .get(&runtime.session_id)
        .is_some_and(|e| Arc::ptr_eq(&e.runtime, runtime))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
