//! [`SessionRuntime`]: one open session in memory: its agent slot (the agent on a model role and
//! the recorder that stores what it says, built by `super::agent_build`), its turns
//! ([`TurnQueue`]), the bus its events go out on, the approval hand-offs of its turns, and when it
//! was last used. The worker that runs its turns is `super::worker`.
//!
//! Invariants:
//! - One agent per open session; it is replaced only by a role switch, which holds `agent_lock`
//!   (the worker holds it for each turn), so a turn never runs on a half-switched agent.
//! - A pending repair notice survives a rebuilt agent: a role switch hands the old agent's notice
//!   to the new one, and the worker records it in the agent record (`_internal_state`, see
//!   [`RepairNotice`]) after every turn that leaves one, so an agent rebuilt from the store (an idle
//!   session reopened, a hub restart) takes it over while no message was stored since.
//! - The session's own record (`SessionStore::flush_session`) is written at most once per
//!   `session_record_interval` (1 s by default): a turn that ends later than that after the last
//!   write writes it at once; one that ends sooner leaves it to one delayed write (at the interval,
//!   or at once when the session closes), so a burst of turns costs one write. Messages are durable
//!   either way; only the record's copy of the count and time waits (every read sees the current
//!   values).
//!   The worker never waits for that write, nor for the store's tidying after a turn
//!   (`SessionStore::tidy_session`, at most one at a time per session, and only when
//!   `SessionStore::tidy_pending` says the store left something for later): both run beside the
//!   next turn, so a turn's latency holds only its own durable writes.
//! - Std locks here are short and never held across an `.await`.
//! - A role switch or compaction never waits behind a turn (which may wait for a person): it takes
//!   `agent_lock` only while no turn runs or waits ([`SessionRuntime::lock_agent_idle`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::agent_build::{AgentParts, AgentSlot, build_agent};
use super::recorder::SessionRecorder;
use super::turn_queue::TurnQueue;
use crate::agent::TauAgent;
use crate::hub::approvals::{ApprovalReadiness, TurnSlot};
use crate::hub::error::CoreError;
use crate::hub::events::EventBus;
use crate::store::{
    DEFAULT_AGENT_ID, REPAIR_NOTICE_VERSION, RepairNotice, SessionError, SessionStore,
};

/// A title's write running beside a turn: whether the session has a title once it is done.
pub(crate) type TitleWrite = tokio::task::JoinHandle<Result<bool, SessionError>>;

/// When the session's record was last written, and whether a delayed write is coming.
#[derive(Debug, Default)]
struct RecordFlush {
    last: Option<Instant>,
    delayed: bool,
}

/// Writes the session's deferred record (`SessionStore::flush_session`, or `close_session` when
/// `closing`) off the runtime's threads.
async fn write_session_record(store: Arc<dyn SessionStore>, session_id: String, closing: bool) {
    let id = session_id.clone();
    let flushed = tokio::task::spawn_blocking(move || {
        if closing {
            store.close_session(&id)
        } else {
            store.flush_session(&id)
        }
    })
    .await;
    let error = match flushed {
        Ok(Ok(())) => return,
        Ok(Err(error)) => error.to_string(),
        Err(error) => error.to_string(),
    };
    warn!(%session_id, "cannot write the session's record after a turn: {error}");
}

/// One open session.
pub(crate) struct SessionRuntime {
    pub session_id: String,
    pub bus: Arc<EventBus>,
    pub readiness: Arc<ApprovalReadiness>,
    pub turn_slot: Arc<TurnSlot>,
    /// The session's turns: running, queued and remembered.
    pub turns: TurnQueue,
    pub stop: CancellationToken,
    /// Held by the worker for each turn and by a role switch or compaction. Not a turn queue: the
    /// worker is its only waiter; the others only try it ([`SessionRuntime::lock_agent_idle`]).
    pub agent_lock: tokio::sync::Mutex<()>,
    slot: Mutex<AgentSlot>,
    last_used: Mutex<Instant>,
    store: Arc<dyn SessionStore>,
    record_flush: Arc<Mutex<RecordFlush>>,
    record_interval: Duration,
    /// A tidy of the session's store records runs ([`SessionRuntime::tidy_store`]).
    tidying: Arc<AtomicBool>,
    /// The session has a title (set or found): turns no longer check.
    titled: AtomicBool,
}

impl SessionRuntime {
    /// Builds the session's agent on `role` (blocking: it reads the store) and the runtime around
    /// it. The worker is not started here.
    pub(crate) fn open(
        parts: &AgentParts,
        session_id: &str,
        role: &str,
        bus: Arc<EventBus>,
    ) -> Result<Self, CoreError> {
        let readiness = Arc::new(ApprovalReadiness::default());
        let turn_slot = Arc::new(TurnSlot::default());
        let slot = build_agent(parts, session_id, role, &bus, &readiness, &turn_slot, None)?;
        Ok(Self {
            session_id: session_id.to_owned(),
            turns: TurnQueue::new(session_id, Arc::clone(&bus)),
            bus,
            readiness,
            turn_slot,
            stop: CancellationToken::new(),
            agent_lock: tokio::sync::Mutex::new(()),
            slot: Mutex::new(slot),
            last_used: Mutex::new(Instant::now()),
            store: Arc::clone(&parts.store),
            record_flush: Arc::default(),
            record_interval: parts.options.session_record_interval,
            tidying: Arc::default(),
            titled: AtomicBool::new(false),
        })
    }

    /// Takes `agent_lock` for a change of the agent (a role switch, a compaction), refused with
    /// `refusal` as FAILED_PRECONDITION while a turn runs or waits: a turn holds the lock for its
    /// whole length, approvals included. While the lock is held by something else (a worker
    /// finishing a turn, another switch), it waits, checking again every few milliseconds.
    pub(crate) async fn lock_agent_idle(
        &self,
        refusal: &str,
    ) -> Result<tokio::sync::MutexGuard<'_, ()>, CoreError> {
        const POLL: std::time::Duration = std::time::Duration::from_millis(5);
        loop {
            if self.turns.lock().busy() {
                return Err(CoreError::FailedPrecondition(refusal.to_owned()));
            }
            if let Ok(guard) = self.agent_lock.try_lock() {
                // A turn accepted in between waits for this guard; it is not running yet.
                return Ok(guard);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The current agent and its recorder.
    pub(crate) fn agent(&self) -> (TauAgent, Arc<SessionRecorder>) {
        let slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        (slot.agent.clone(), Arc::clone(&slot.recorder))
    }

    /// The role the agent runs on.
    pub(crate) fn role(&self) -> String {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .role
            .clone()
    }

    /// Replaces the agent (the caller holds `agent_lock`); returns the previous role.
    pub(crate) fn replace_agent(&self, slot: AgentSlot) -> String {
        let mut current = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *current, slot).role
    }

    /// Builds an agent for this session on `role` (blocking), for a role switch; it takes over
    /// the current agent's pending repair notice (the caller holds `agent_lock`).
    pub(crate) fn build_for_role(
        &self,
        parts: &AgentParts,
        role: &str,
    ) -> Result<AgentSlot, CoreError> {
        let notice = self.agent().0.pending_notice();
        build_agent(
            parts,
            &self.session_id,
            role,
            &self.bus,
            &self.readiness,
            &self.turn_slot,
            notice,
        )
    }

    /// Records the agent's pending repair notice, if it has one, in the agent record (after a
    /// turn, with `agent_lock` held). A failed write is logged: the notice then lives only in
    /// memory, and a rebuilt agent uses the generic one.
    pub(crate) async fn save_pending_notice(&self) {
        let (agent, recorder) = self.agent();
        let Some(text) = agent.pending_notice() else {
            return;
        };
        // The whole history's length: messages that left memory count too.
        let count = recorder.offset().saturating_add(agent.history_total_len());
        let notice = RepairNotice {
            v: REPAIR_NOTICE_VERSION,
            text,
            message_count: u64::try_from(count).unwrap_or(u64::MAX),
        };
        let store = Arc::clone(&self.store);
        let session_id = self.session_id.clone();
        let written = tokio::task::spawn_blocking(move || {
            let Some(mut record) = store.read_agent(&session_id, DEFAULT_AGENT_ID)? else {
                return Ok(());
            };
            record.set_repair_notice(Some(notice));
            store.update_agent(&session_id, &record)
        })
        .await;
        let error = match written {
            Ok(Ok(())) => return,
            Ok(Err(error)) => error.to_string(),
            Err(error) => error.to_string(),
        };
        warn!(session_id = %self.session_id, "cannot record the pending repair notice: {error}");
    }

    /// Writes what the store deferred about this session during a turn (see
    /// `SessionStore::flush_session`), at once or in one delayed write (see the module's
    /// invariants). A failure is logged: the store still shows the current values, and the next
    /// flush, close or open writes them.
    pub(crate) async fn flush_session(&self) {
        let now = Instant::now();
        let due = {
            let mut flush = self
                .record_flush
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if flush.delayed {
                // The coming write takes this turn's values too.
                return;
            }
            match flush.last.map(|at| at + self.record_interval) {
                Some(due) if due > now => {
                    flush.delayed = true;
                    Some(due)
                }
                _ => {
                    flush.last = Some(now);
                    None
                }
            }
        };
        let store = Arc::clone(&self.store);
        let session_id = self.session_id.clone();
        let Some(due) = due else {
            tokio::spawn(write_session_record(store, session_id, false));
            return;
        };
        let record_flush = Arc::clone(&self.record_flush);
        let closed = self.stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep_until(due.into()) => {}
                () = closed.cancelled() => {}
            }
            {
                let mut flush = record_flush.lock().unwrap_or_else(PoisonError::into_inner);
                flush.delayed = false;
                flush.last = Some(Instant::now());
            }
            write_session_record(store, session_id, false).await;
        });
    }

    /// Starts the store's tidying of the session after a turn (`SessionStore::tidy_session`), off
    /// the worker, unless one still runs: that one, or the next turn's, takes this turn's records
    /// too. A failure is logged; the records are durable already.
    pub(crate) fn tidy_store(&self) {
        if !self.store.tidy_pending(&self.session_id) || self.tidying.swap(true, Ordering::AcqRel) {
            return;
        }
        let store = Arc::clone(&self.store);
        let session_id = self.session_id.clone();
        let tidying = Arc::clone(&self.tidying);
        tokio::task::spawn_blocking(move || {
            if let Err(error) = store.tidy_session(&session_id) {
                warn!(%session_id, "cannot tidy the session's stored records after a turn: {error}");
            }
            tidying.store(false, Ordering::Release);
        });
    }

    /// Writes the session's record as it closes (`SessionStore::close_session`: the file store
    /// also empties the session's journal).
    pub(crate) async fn close_session_record(&self) {
        write_session_record(Arc::clone(&self.store), self.session_id.clone(), true).await;
    }

    /// Marks the session as used now.
    pub(crate) fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    pub(crate) fn idle_for(&self) -> std::time::Duration {
        self.last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }

    /// Starts setting the session's title from its first user text, if it has none: the write
    /// runs beside the turn (its syncs share the disk's flushes with the turn's own writes), and
    /// [`SessionRuntime::finish_title`] waits for it before the turn's end is reported. Once the
    /// session is known to have a title, later turns skip the store (no read at every turn's
    /// start).
    pub(crate) fn start_title(&self, text: &str) -> Option<TitleWrite> {
        if self.titled.load(Ordering::Acquire) {
            return None;
        }
        let store = Arc::clone(&self.store);
        let session_id = self.session_id.clone();
        let text = text.to_owned();
        Some(tokio::task::spawn_blocking(move || {
            let mut meta = store.read_meta(&session_id)?.unwrap_or_default();
            if meta.set_title_if_missing(&text) {
                store.write_meta(&session_id, &meta)?;
            }
            Ok(meta.title.is_some_and(|t| !t.is_empty()))
        }))
    }

    /// Waits for the title's write [`SessionRuntime::start_title`] started; a failure is logged
    /// (the next turn tries again).
    pub(crate) async fn finish_title(&self, write: Option<TitleWrite>) {
        let Some(write) = write else {
            return;
        };
        let error = match write.await {
            Ok(Ok(titled)) => return self.titled.store(titled, Ordering::Release),
            Ok(Err(error)) => error.to_string(),
            Err(error) => error.to_string(),
        };
        warn!(session_id = %self.session_id, "cannot set the session title: {error}");
    }
}
