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
//!   (`SessionStore::tidy_session`, at most [`TIDIES_AT_ONCE`] at a time per session, and only
//!   when `SessionStore::tidy_pending` says the store left something for later): both run beside
//!   the next turn, so a turn's latency holds only its own durable writes.
//! - The session's title (`meta.json` in the file store) follows the turn that gives it, like the
//!   record: at most one title's write runs per session, beside the turn and never waited for by
//!   it; every read or rewrite of the session's metadata waits for it first
//!   ([`SessionRuntime::settle_title`]), a session is not retired while it runs, and the worker
//!   waits for it before the session's record is closed. A crash before it is durable loses only
//!   the title, which the next turn takes again from the first user message.
//! - Std locks here are short and never held across an `.await`.
//! - A role switch or compaction never waits behind a turn (which may wait for a person): it takes
//!   `agent_lock` only while no turn runs or waits ([`SessionRuntime::lock_agent_idle`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::agent_build::{AgentParts, AgentSlot, Restore, build_agent};
use super::recorder::SessionRecorder;
use super::turn_queue::TurnQueue;
use crate::agent::TauAgent;
use crate::hub::approvals::{ApprovalReadiness, TurnSlot};
use crate::hub::error::CoreError;
use crate::hub::events::EventBus;
use crate::message::{Message, Role};
use crate::store::{
    DEFAULT_AGENT_ID, REPAIR_NOTICE_VERSION, RepairNotice, SessionError, SessionMessage,
    SessionStore,
};

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
    /// How many tidies of the session's store records run ([`SessionRuntime::tidy_store`]).
    tidying: Arc<AtomicUsize>,
    /// The session has a title (set or found): turns no longer check.
    titled: Arc<AtomicBool>,
    /// Held by a title's write for as long as it runs ([`SessionRuntime::start_title`]).
    title_write: Arc<tokio::sync::Mutex<()>>,
}

impl SessionRuntime {
    /// Builds the session's agent on `role` (blocking: it reads the store, unless the session was
    /// just created) and the runtime around it. The worker is not started here.
    pub(crate) fn open(
        parts: &AgentParts,
        session_id: &str,
        role: &str,
        bus: Arc<EventBus>,
        restore: Restore,
    ) -> Result<Self, CoreError> {
        let readiness = Arc::new(ApprovalReadiness::default());
        let turn_slot = Arc::new(TurnSlot::default());
        let slot = build_agent(
            parts, session_id, role, &bus, &readiness, &turn_slot, restore,
        )?;
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
            titled: Arc::default(),
            title_write: Arc::default(),
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
            Restore::Stored { carried: notice },
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
    /// the worker, unless [`TIDIES_AT_ONCE`] still run: those, or the next turn's, take this
    /// turn's records too. A failure is logged; the records are durable already.
    pub(crate) fn tidy_store(&self) {
        if !self.store.tidy_pending(&self.session_id) {
            return;
        }
        let Some(tidy) = TidySlot::take(&self.tidying) else {
            return;
        };
        let store = Arc::clone(&self.store);
        let session_id = self.session_id.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(error) = store.tidy_session(&session_id) {
                warn!(%session_id, "cannot tidy the session's stored records after a turn: {error}");
            }
            drop(tidy);
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

    /// Marks the session as titled (its stored metadata has a title): turns skip the title.
    pub(crate) fn mark_titled(&self) {
        self.titled.store(true, Ordering::Release);
    }

    /// Starts setting the session's title, if it has none and no title's write runs already: from
    /// its first stored user message when that makes a title (a title lost to a crash comes back
    /// from the same message; not read on the session's `first_turn`), else from `text`. The
    /// write runs beside the turn and may outlive it: the turn's end is not held back for it (a
    /// crash before it is durable loses only the title). Whoever reads or rewrites the session's metadata waits for it first
    /// ([`SessionRuntime::settle_title`]), and a session is not retired while it runs
    /// ([`SessionRuntime::title_in_flight`]). A failure is logged; the next turn tries again. Once
    /// the session is known to have a title, later turns skip the store.
    pub(crate) fn start_title(&self, text: &str, first_turn: bool) {
        if self.titled.load(Ordering::Acquire) {
            return;
        }
        let Ok(writing) = Arc::clone(&self.title_write).try_lock_owned() else {
            return;
        };
        let store = Arc::clone(&self.store);
        let titled = Arc::clone(&self.titled);
        let session_id = self.session_id.clone();
        let text = text.to_owned();
        tokio::task::spawn_blocking(move || {
            match write_title(store.as_ref(), &session_id, &text, first_turn) {
                Ok(found) => titled.store(found, Ordering::Release),
                Err(error) => warn!(%session_id, "cannot set the session title: {error}"),
            }
            drop(writing);
        });
    }

    /// Waits for a title's write [`SessionRuntime::start_title`] started, if one runs.
    pub(crate) async fn settle_title(&self) {
        drop(self.title_write.lock().await);
    }

    /// Whether a title's write runs.
    pub(crate) fn title_in_flight(&self) -> bool {
        self.title_write.try_lock().is_err()
    }
}

/// How many tidies of one session run at once. Two, so that while one waits for a checkpoint's
/// syncs (tens of milliseconds on a slow disk) the other keeps writing the turns' records to their
/// files; with one, they pile up until an append writes them itself, on the turn's path. The file
/// store lets only one of them checkpoint at a time.
pub(crate) const TIDIES_AT_ONCE: usize = 2;

/// One of a session's [`TIDIES_AT_ONCE`] tidy slots, given back when dropped.
struct TidySlot(Arc<AtomicUsize>);

impl TidySlot {
    /// A slot from `running` (the count of the session's tidies), if fewer than
    /// [`TIDIES_AT_ONCE`] run.
    fn take(running: &Arc<AtomicUsize>) -> Option<Self> {
        running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < TIDIES_AT_ONCE).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(Arc::clone(running)))
    }
}

impl Drop for TidySlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Sets the session's title unless it has one (blocking; see [`SessionRuntime::start_title`]);
/// whether the session has a title afterwards.
fn write_title(
    store: &dyn SessionStore,
    session_id: &str,
    text: &str,
    first_turn: bool,
) -> Result<bool, SessionError> {
    let mut meta = store.read_meta(session_id)?.unwrap_or_default();
    if meta.title.as_deref().is_some_and(|t| !t.is_empty()) {
        return Ok(true);
    }
    let first_user_text = if first_turn {
        None
    } else {
        store
            .list_messages(session_id, DEFAULT_AGENT_ID, Some(1), 0)?
            .first()
            .map(SessionMessage::to_message)
            .filter(|m| m.role == Role::User)
            .map(Message::text)
    };
    // The first stored user text names the session when it makes a title, else this turn's.
    let changed = first_user_text.is_some_and(|first| meta.set_title_if_missing(&first))
        || meta.set_title_if_missing(text);
    if changed {
        store.write_meta(session_id, &meta)?;
    }
    Ok(meta.title.is_some_and(|t| !t.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_runs_at_most_two_tidies_and_a_finished_one_frees_its_slot() {
        let running = Arc::new(AtomicUsize::new(0));
        let first = TidySlot::take(&running).expect("a first tidy starts");
        let second = TidySlot::take(&running).expect("a second tidy starts beside it");
        assert!(
            TidySlot::take(&running).is_none(),
            "a third waits for the next turn"
        );
        drop(first);
        let third = TidySlot::take(&running).expect("a slot is free again");
        drop((second, third));
        assert_eq!(running.load(Ordering::Acquire), 0);
    }
}
