//! The routine engine: the routines in memory and on disk, the API the hub serves (list, add,
//! remove, pause, resume, run now, history), and the firing loop.
//!
//! Invariants: every change is saved to `routines.json` before it is acted on, and a firing is
//! claimed (its instant marked handled, its history entry `running`) and saved before its action
//! starts, so a kill at any point never fires an instant twice; a claim that cannot be saved does
//! not fire. The routines lock is a `std` mutex never held across an `.await`. The loop reads the
//! injectable clock on every wake and naps at most [`MAX_NAP`], so a wall-clock jump is noticed
//! within that time; it fires each due routine once (see `firing_plan`). Firings run on their own
//! tasks, so a long one (a prompt turn waiting on an approval) delays no other routine; the loop
//! stops on cancellation and the firings get the same token. Its claims and firing outcomes are
//! saved on blocking threads, and async callers save through [`RoutineEngine::saving`], so a slow
//! disk never holds up a runtime thread.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::firing_plan::{DueFiring, Phase, claim_due, claim_manual, next_wake};
use super::routine_error::RoutineError;
use super::routine_file::{load_routines, save_routines};
use super::routine_record::{Firing, FiringOutcome, Routine, check_action, check_name};
use crate::clock::Clock;

/// The longest the loop sleeps before reading the wall clock again.
pub const MAX_NAP: Duration = Duration::from_secs(30);
/// The most routines one hub keeps.
pub const MAX_ROUTINES: usize = 256;

/// How a firing's action ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiringResult {
    pub succeeded: bool,
    /// A short result or error text for the history.
    pub detail: String,
}

/// Runs a routine's action (the hub: a turn on the routine's session, or the fixed tool call
/// through the gate).
#[async_trait]
pub trait RoutineRunner: Send + Sync {
    async fn fire(
        &self,
        routine: &Routine,
        firing: &DueFiring,
        cancel: CancellationToken,
    ) -> FiringResult;
}

/// A routine as listed: the stored record and its next firing.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutineView {
    pub routine: Routine,
    pub next_firing: Option<Timestamp>,
    /// The schedule as a person reads it, in the engine's zone (`Schedule::describe`).
    pub schedule_text: String,
}

struct EngineInner {
    path: PathBuf,
    zone: TimeZone,
    clock: Arc<dyn Clock>,
    runner: Arc<dyn RoutineRunner>,
    routines: Mutex<Vec<Routine>>,
    wake: Notify,
    cancel: CancellationToken,
}

/// The routine engine. Cheap to clone.
#[derive(Clone)]
pub struct RoutineEngine {
    inner: Arc<EngineInner>,
}

impl std::fmt::Debug for RoutineEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutineEngine")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl RoutineEngine {
    /// Loads `path` (a missing file is no routines) in Europe/Istanbul. Firings a killed hub left
    /// `running` become `interrupted` and are not run again.
    pub fn open(
        path: &Path,
        clock: Arc<dyn Clock>,
        runner: Arc<dyn RoutineRunner>,
    ) -> Result<Self, RoutineError> {
        Self::open_in_zone(path, clock, runner, crate::clock::istanbul())
    }

    /// [`RoutineEngine::open`] in another zone (tests that cross a DST change).
    pub fn open_in_zone(
        path: &Path,
        clock: Arc<dyn Clock>,
        runner: Arc<dyn RoutineRunner>,
        zone: TimeZone,
    ) -> Result<Self, RoutineError> {
        let mut routines = load_routines(path)?;
        let now = now_of(clock.as_ref());
        let interrupted: usize = routines.iter_mut().map(|r| r.interrupt_running(now)).sum();
        if interrupted > 0 {
            warn!(
                interrupted,
                "routine firings the last hub left running are marked interrupted"
            );
            save_routines(path, &routines)?;
        }
        Ok(Self {
            inner: Arc::new(EngineInner {
                path: path.to_owned(),
                zone,
                clock,
                runner,
                routines: Mutex::new(routines),
                wake: Notify::new(),
                cancel: CancellationToken::new(),
            }),
        })
    }

    /// Every routine with its next firing, by name.
    pub fn list(&self) -> Vec<RoutineView> {
        let routines = self.lock();
        let mut views: Vec<RoutineView> = routines.iter().map(|r| self.view(r)).collect();
        views.sort_by(|a, b| a.routine.name.cmp(&b.routine.name));
        views
    }

    /// One routine.
    pub fn get(&self, name: &str) -> Result<RoutineView, RoutineError> {
        let routines = self.lock();
        routines
            .iter()
            .find(|r| r.name == name)
            .map(|r| self.view(r))
            .ok_or_else(|| RoutineError::NotFound(name.to_owned()))
    }

    /// Stores a new routine, or with `replace` one that takes the place of a routine of the same
    /// name (its history and handled instants are kept). Whoever calls this has already had a
    /// tier-2 action approved (`routine_gate::register`); the firing checks that approval again.
    pub fn add(&self, mut routine: Routine, replace: bool) -> Result<RoutineView, RoutineError> {
        check_name(&routine.name).map_err(RoutineError::Invalid)?;
        check_action(&routine.action).map_err(RoutineError::Invalid)?;
        let mut routines = self.lock();
        let existing = routines.iter().position(|r| r.name == routine.name);
        match existing {
            Some(_) if !replace => return Err(RoutineError::AlreadyExists(routine.name)),
            None if routines.len() >= MAX_ROUTINES => {
                return Err(RoutineError::TooMany(MAX_ROUTINES));
            }
            _ => {}
        }
        let mut next = routines.clone();
        match existing {
            Some(index) => {
                let old = &next[index];
                routine.history = old.history.clone();
                routine.next_firing_number = old.next_firing_number;
                routine.handled_through = old.handled_through;
                next[index] = routine.clone();
            }
            None => next.push(routine.clone()),
        }
        save_routines(&self.inner.path, &next)?;
        *routines = next;
        let view = self.view(&routine);
        drop(routines);
        info!(routine = %view.routine.name, "routine stored");
        self.inner.wake.notify_one();
        Ok(view)
    }

    /// Removes a routine (no approval needed); a firing already running finishes.
    pub fn remove(&self, name: &str) -> Result<(), RoutineError> {
        self.change(name, |routines, index| {
            routines.remove(index);
        })?;
        info!(routine = %name, "routine removed");
        Ok(())
    }

    /// Pauses or resumes a routine. Resuming does not fire what was missed while paused.
    pub fn set_paused(&self, name: &str, paused: bool) -> Result<RoutineView, RoutineError> {
        let now = self.now();
        self.change(name, |routines, index| {
            let routine = &mut routines[index];
            if routine.paused && !paused {
                routine.handled_through = Some(routine.schedule_base().max(now));
            }
            routine.paused = paused;
        })?;
        self.inner.wake.notify_one();
        self.get(name)
    }

    /// Fires a routine now, outside its schedule, through the runner; returns the firing's
    /// number.
    pub fn run_now(&self, name: &str) -> Result<u64, RoutineError> {
        let due = self.claim_now(name)?;
        let number = due.number;
        tokio::spawn(fire_one(Arc::clone(&self.inner), due));
        Ok(number)
    }

    /// Claims a manual firing of `name` (saved as `running`) for a caller that runs it itself and
    /// then reports it with [`RoutineEngine::finish`].
    pub fn claim_now(&self, name: &str) -> Result<DueFiring, RoutineError> {
        let now = self.now();
        let mut claimed = None;
        self.change(name, |routines, index| {
            claimed = Some(claim_manual(&mut routines[index], now));
        })?;
        claimed.ok_or_else(|| RoutineError::NotFound(name.to_owned()))
    }

    /// Records how a firing claimed with [`RoutineEngine::claim_now`] ended (saved off the
    /// runtime's threads).
    pub async fn finish(&self, due: &DueFiring, result: &FiringResult) {
        finish_firing(Arc::clone(&self.inner), due.clone(), result).await;
    }

    /// A routine's firings, oldest first (at most the history limit).
    pub fn history(&self, name: &str) -> Result<Vec<Firing>, RoutineError> {
        Ok(self.get(name)?.routine.history.into_iter().collect())
    }

    /// The time zone schedules are read in.
    pub fn zone(&self) -> &TimeZone {
        &self.inner.zone
    }

    /// The file the routines are kept in.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Claims what is due now and saves; the caller fires the result.
    pub fn claim(&self, phase: Phase) -> Vec<DueFiring> {
        let now = self.now();
        let mut routines = self.lock();
        let mut next = routines.clone();
        let (due, changed) = claim_due(&mut next, now, phase, &self.inner.zone);
        if !changed {
            return due;
        }
        match save_routines(&self.inner.path, &next) {
            Ok(()) => {
                *routines = next;
                due
            }
            Err(err) => {
                // At most once: an instant whose claim is not durable is not fired.
                warn!("routine firings not started, their claim could not be saved: {err}");
                Vec::new()
            }
        }
    }

    /// Runs `change`, which saves `routines.json`, on a blocking thread, off the runtime's.
    pub async fn saving<T: Send + 'static>(
        &self,
        change: impl FnOnce(&RoutineEngine) -> Result<T, RoutineError> + Send + 'static,
    ) -> Result<T, RoutineError> {
        let engine = self.clone();
        tokio::task::spawn_blocking(move || change(&engine))
            .await
            .map_err(|err| RoutineError::Io {
                path: self.inner.path.clone(),
                source: std::io::Error::other(err.to_string()),
            })?
    }

    /// [`claim`](Self::claim) on a blocking thread (it writes the file); nothing is due if that
    /// thread failed.
    async fn claim_off_runtime(&self, phase: Phase) -> Vec<DueFiring> {
        let engine = self.clone();
        tokio::task::spawn_blocking(move || engine.claim(phase))
            .await
            .unwrap_or_else(|err| {
                warn!("routine firings not claimed: {err}");
                Vec::new()
            })
    }

    /// One decision of the loop, with its firings run to the end (tests and `run`).
    pub async fn tick_and_wait(&self, phase: Phase) -> Vec<(DueFiring, FiringResult)> {
        let due = self.claim_off_runtime(phase).await;
        let mut results = Vec::with_capacity(due.len());
        for firing in due {
            let result = fire_one(Arc::clone(&self.inner), firing.clone()).await;
            results.push((firing, result));
        }
        results
    }

    /// The firing loop: claims and starts what is due, then sleeps until the next firing (at most
    /// [`MAX_NAP`]), a change, or [`RoutineEngine::shutdown`].
    pub async fn run(self) {
        let mut phase = Phase::Startup;
        loop {
            for firing in self.claim_off_runtime(phase).await {
                tokio::spawn(fire_one(Arc::clone(&self.inner), firing));
            }
            phase = Phase::Running;
            let nap = self.nap();
            tokio::select! {
                () = self.inner.cancel.cancelled() => return,
                () = self.inner.wake.notified() => {}
                () = tokio::time::sleep(nap) => {}
            }
        }
    }

    /// Stops the loop and cancels running firings.
    pub fn shutdown(&self) {
        self.inner.cancel.cancel();
    }

    fn nap(&self) -> Duration {
        let now = self.now();
        let next = next_wake(&self.lock(), &self.inner.zone);
        match next {
            Some(next) => {
                let until = next.duration_since(now);
                Duration::try_from(until)
                    .unwrap_or(Duration::ZERO)
                    .min(MAX_NAP)
            }
            None => MAX_NAP,
        }
    }

    fn change<F>(&self, name: &str, edit: F) -> Result<(), RoutineError>
    where
        F: FnOnce(&mut Vec<Routine>, usize),
    {
        let mut routines = self.lock();
        let index = routines
            .iter()
            .position(|r| r.name == name)
            .ok_or_else(|| RoutineError::NotFound(name.to_owned()))?;
        let mut next = routines.clone();
        edit(&mut next, index);
        save_routines(&self.inner.path, &next)?;
        *routines = next;
        Ok(())
    }

    fn view(&self, routine: &Routine) -> RoutineView {
        let next_firing = if routine.paused {
            None
        } else {
            routine
                .schedule
                .next_after(routine.schedule_base(), &self.inner.zone)
        };
        RoutineView {
            routine: routine.clone(),
            next_firing,
            schedule_text: routine.schedule.describe(&self.inner.zone),
        }
    }

    /// The engine clock's "now".
    pub fn now(&self) -> Timestamp {
        now_of(self.inner.clock.as_ref())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Routine>> {
        self.inner
            .routines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs one claimed firing and records how it ended.
async fn fire_one(inner: Arc<EngineInner>, due: DueFiring) -> FiringResult {
    let snapshot = {
        let routines = inner
            .routines
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        routines.iter().find(|r| r.name == due.routine).cloned()
    };
    let result = match snapshot {
        Some(routine) => {
            info!(routine = %due.routine, firing = due.number, cause = due.cause.as_str(), "routine fires");
            inner
                .runner
                .fire(&routine, &due, inner.cancel.child_token())
                .await
        }
        None => FiringResult {
            succeeded: false,
            detail: "the routine was removed before it ran".into(),
        },
    };
    finish_firing(inner, due, &result).await;
    result
}

/// Records how a firing ended, off the runtime's threads.
async fn finish_firing(inner: Arc<EngineInner>, due: DueFiring, result: &FiringResult) {
    let outcome = if result.succeeded {
        FiringOutcome::Succeeded
    } else {
        warn!(routine = %due.routine, firing = due.number, "routine firing failed: {}", result.detail);
        FiringOutcome::Failed
    };
    let now = now_of(inner.clock.as_ref());
    let detail = result.detail.clone();
    let saved = tokio::task::spawn_blocking(move || {
        record_outcome(&inner, &due, outcome, detail, now);
    })
    .await;
    if let Err(err) = saved {
        warn!("a firing's outcome was not recorded: {err}");
    }
}

/// Records how a firing ended in memory and in the file (blocking).
fn record_outcome(
    inner: &EngineInner,
    due: &DueFiring,
    outcome: FiringOutcome,
    detail: String,
    now: Timestamp,
) {
    let mut routines = inner
        .routines
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let mut next = routines.clone();
    let found = next
        .iter_mut()
        .find(|r| r.name == due.routine)
        .is_some_and(|r| r.end_firing(due.number, outcome, detail, now));
    if found {
        match save_routines(&inner.path, &next) {
            Ok(()) => *routines = next,
            Err(err) => {
                warn!(routine = %due.routine, "a firing's outcome could not be saved: {err}")
            }
        }
    }
}

fn now_of(clock: &dyn Clock) -> Timestamp {
    Timestamp::try_from(clock.now()).unwrap_or_else(|_| {
        // A clock outside jiff's range (years past 9999) reads as the epoch: nothing fires.
        Timestamp::try_from(SystemTime::UNIX_EPOCH).unwrap_or(Timestamp::UNIX_EPOCH)
    })
}
