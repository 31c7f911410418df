//! The sqlite backend's write path: one write connection shared by every writing thread, with
//! group commit, so writes of different sessions that arrive together share one transaction and
//! therefore one WAL fsync.
//!
//! How a write runs ([`GroupCommit::write`]), all on the caller's own thread (no hand-off, so a
//! job may borrow from its caller, as the backend's rewrite closures do):
//! 1. The caller announces itself (`arriving`), takes the connection, and opens the batch's
//!    transaction (`BEGIN IMMEDIATE`) if none is open, so a job that reads before it writes sees
//!    what it writes over, as before.
//! 2. It runs its job inside its own `SAVEPOINT`: a job that fails (`MessageExists`, …) is rolled
//!    back alone and answers its own error at once; the jobs staged before it stay.
//! 3. If nobody else is arriving (or the batch is full) it commits the batch (one fsync) and
//!    answers everyone in it; otherwise it leaves the commit to the last arrival and waits.
//!
//! Invariants:
//! - A write returns `Ok` only once the commit holding it returned (durable with
//!   `synchronous=FULL`); a failed commit answers every job of its batch with the error.
//! - Whoever leaves the connection with staged jobs and nobody arriving commits, so a staged job
//!   is always committed by someone: a panicking job is caught, rolled back alone, the batch
//!   settled, and the panic resumed after the connection is released. The wait for a commit
//!   still has a deadline ([`COMMIT_WAIT`]), as a last way out.
//! - No transaction is left open between batches: one holding no staged job is rolled back.
//! - A batch holds at most [`MAX_BATCH`] jobs, so one commit never waits on an endless stream of
//!   arrivals. Nothing grows with the number of writes: one small `Batch` per commit.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ffi};

use crate::store::store_error::SessionError;

/// The most jobs one commit holds.
pub(super) const MAX_BATCH: usize = 64;

/// How long a staged job waits for its batch's commit before giving up with an error. A commit
/// is one fsync (the WAL's checkpoints run at tidies, see `wal_checkpoint`, unless they fall far
/// behind); this only bounds a wait that should never end otherwise.
const COMMIT_WAIT: Duration = Duration::from_secs(60);

/// The write connection and its open batch.
pub(super) struct GroupCommit {
    writer: Mutex<Writer>,
    /// Threads that called `write` and do not hold the connection yet.
    arriving: AtomicUsize,
    /// Commits since the last WAL checkpoint.
    uncheckpointed: Arc<AtomicUsize>,
}

struct Writer {
    conn: Connection,
    /// Jobs staged in the open transaction, not yet committed.
    staged: usize,
    /// The batch being staged; replaced at every commit.
    batch: Arc<Batch>,
    /// Commits made since the store opened (how many fsyncs the writes cost).
    commits: u64,
    /// Commits since the last WAL checkpoint (see `wal_checkpoint`), shared with
    /// [`GroupCommit`] so it is read without the connection's lock.
    uncheckpointed: Arc<AtomicUsize>,
}

/// One commit's outcome, shared by the jobs it holds.
#[derive(Default)]
struct Batch {
    outcome: Mutex<Option<Result<(), CommitFailure>>>,
    done: Condvar,
}

/// Why a batch did not commit, copied to each of its jobs.
#[derive(Debug, Clone)]
struct CommitFailure {
    code: ffi::Error,
    message: Option<String>,
}

impl CommitFailure {
    fn from_error(error: &rusqlite::Error) -> Self {
        match error {
            rusqlite::Error::SqliteFailure(code, message) => Self {
                code: *code,
                message: message.clone(),
            },
            other => Self {
                code: ffi::Error::new(ffi::SQLITE_ERROR),
                message: Some(other.to_string()),
            },
        }
    }

    fn new(code: i32, message: &str) -> Self {
        Self {
            code: ffi::Error::new(code),
            message: Some(message.to_owned()),
        }
    }
}

impl From<CommitFailure> for SessionError {
    fn from(failure: CommitFailure) -> Self {
        SessionError::Database(rusqlite::Error::SqliteFailure(
            failure.code,
            failure.message,
        ))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Jobs run under `catch_unwind`, so a panic never leaves the writer half-changed; a poisoned
    // lock is still sound to use.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Batch {
    fn finish(&self, outcome: Result<(), CommitFailure>) {
        *lock(&self.outcome) = Some(outcome);
        self.done.notify_all();
    }

    /// Waits for the commit of this batch.
    fn wait(&self) -> Result<(), SessionError> {
        let deadline = Instant::now() + COMMIT_WAIT;
        let mut outcome = lock(&self.outcome);
        loop {
            if let Some(result) = outcome.as_ref() {
                return result.clone().map_err(SessionError::from);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(CommitFailure::new(
                    ffi::SQLITE_BUSY,
                    "the write was staged but its commit did not finish within 60 s",
                )
                .into());
            }
            outcome = self
                .done
                .wait_timeout(outcome, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// The open savepoint of one job; rolled back (alone) unless released.
struct JobSavepoint<'c> {
    conn: &'c Connection,
    released: bool,
}

impl<'c> JobSavepoint<'c> {
    fn open(conn: &'c Connection) -> Result<Self, SessionError> {
        conn.prepare_cached("SAVEPOINT job")?.execute([])?;
        Ok(Self {
            conn,
            released: false,
        })
    }

    fn release(mut self) -> Result<(), SessionError> {
        self.conn.prepare_cached("RELEASE job")?.execute([])?;
        self.released = true;
        Ok(())
    }
}

impl Drop for JobSavepoint<'_> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        // If sqlite already rolled the whole transaction back, there is no savepoint left and
        // this fails; `Writer::settle` notices the lost transaction.
        let undone = self
            .conn
            .execute_batch("ROLLBACK TO job; RELEASE job")
            .or_else(|_| self.conn.execute_batch("RELEASE job"));
        if let Err(err) = undone {
            tracing::debug!(%err, "the failed write's savepoint was already gone");
        }
    }
}

impl Writer {
    /// Runs `job` in its own savepoint of the open batch (opening one if needed). `Ok` means
    /// staged: it still needs the batch's commit.
    fn stage<T>(
        &mut self,
        job: impl FnOnce(&Connection) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        if self.staged > 0 && self.conn.is_autocommit() {
            // An error of an earlier job made sqlite roll the whole transaction back.
            self.commit();
        }
        if self.conn.is_autocommit() {
            self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        }
        let savepoint = JobSavepoint::open(&self.conn)?;
        let value = job(savepoint.conn)?;
        savepoint.release()?;
        self.staged += 1;
        Ok(value)
    }

    /// Closes a transaction that holds nothing (its only jobs failed), so the database is never
    /// left locked between batches.
    fn settle(&mut self) {
        if self.staged == 0
            && !self.conn.is_autocommit()
            && let Err(err) = self.conn.execute_batch("ROLLBACK")
        {
            tracing::warn!(%err, "could not close an empty session database transaction");
        }
    }

    /// Commits the open batch and answers every job staged in it.
    fn commit(&mut self) {
        let outcome = if self.conn.is_autocommit() {
            Err(CommitFailure::new(
                ffi::SQLITE_ABORT,
                "an error in another write of the same commit rolled it back; nothing was stored",
            ))
        } else {
            match self
                .conn
                .prepare_cached("COMMIT")
                .and_then(|mut commit| commit.execute([]))
            {
                Ok(_) => Ok(()),
                Err(err) => {
                    if !self.conn.is_autocommit()
                        && let Err(rollback) = self.conn.execute_batch("ROLLBACK")
                    {
                        tracing::warn!(%rollback, "could not roll back a failed commit");
                    }
                    Err(CommitFailure::from_error(&err))
                }
            }
        };
        if outcome.is_ok() {
            self.uncheckpointed.fetch_add(1, Ordering::Relaxed);
        }
        self.staged = 0;
        self.commits += 1;
        std::mem::take(&mut self.batch).finish(outcome);
    }
}

impl GroupCommit {
    /// The write path over `conn`, an open connection with no transaction.
    pub(super) fn new(conn: Connection) -> Self {
        let uncheckpointed = Arc::new(AtomicUsize::new(0));
        Self {
            writer: Mutex::new(Writer {
                conn,
                staged: 0,
                batch: Arc::default(),
                commits: 0,
                uncheckpointed: Arc::clone(&uncheckpointed),
            }),
            arriving: AtomicUsize::new(0),
            uncheckpointed,
        }
    }

    /// Commits made since the last WAL checkpoint (read without the connection's lock).
    pub(super) fn uncheckpointed(&self) -> usize {
        self.uncheckpointed.load(Ordering::Relaxed)
    }

    /// A checkpoint covered `commits` of them: those are taken off the count, not the ones made
    /// while it ran.
    pub(super) fn checkpointed(&self, commits: usize) {
        let _ = self
            .uncheckpointed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(commits))
            });
    }

    /// Runs `job` on the write connection inside one commit shared with the writes that arrive
    /// with it; returns its value once that commit is durable, or the job's own error (its
    /// changes undone, the others' kept), or the commit's error.
    pub(super) fn write<T>(
        &self,
        job: impl FnOnce(&Connection) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        self.arriving.fetch_add(1, Ordering::SeqCst);
        let mut writer = lock(&self.writer);
        self.arriving.fetch_sub(1, Ordering::SeqCst);
        let ran = catch_unwind(AssertUnwindSafe(|| writer.stage(job)));
        let staged_in = matches!(ran, Ok(Ok(_))).then(|| Arc::clone(&writer.batch));
        writer.settle();
        if writer.staged >= MAX_BATCH
            || (writer.staged > 0 && self.arriving.load(Ordering::SeqCst) == 0)
        {
            writer.commit();
        }
        drop(writer);
        let value = match ran {
            Ok(result) => result?,
            Err(panic) => resume_unwind(panic),
        };
        if let Some(batch) = staged_in {
            batch.wait()?;
        }
        Ok(value)
    }

    /// Commits made so far: the fsyncs the writes cost.
    #[cfg(test)]
    pub(super) fn commits(&self) -> u64 {
        lock(&self.writer).commits
    }

    /// Jobs staged and waiting for a commit.
    #[cfg(test)]
    pub(super) fn staged(&self) -> usize {
        lock(&self.writer).staged
    }

    /// Makes writes behave as if one more were on its way, so they stage and wait, until the
    /// returned guard is dropped (tests build a batch with it).
    #[cfg(test)]
    pub(super) fn hold_commits(&self) -> HeldCommits<'_> {
        self.arriving.fetch_add(1, Ordering::SeqCst);
        HeldCommits(self)
    }
}

/// See [`GroupCommit::hold_commits`].
#[cfg(test)]
pub(super) struct HeldCommits<'g>(&'g GroupCommit);

#[cfg(test)]
impl Drop for HeldCommits<'_> {
    /// The pretend arrival leaves: it commits what is staged, as a last arrival would.
    fn drop(&mut self) {
        let mut writer = lock(&self.0.writer);
        if self.0.arriving.fetch_sub(1, Ordering::SeqCst) == 1 && writer.staged > 0 {
            writer.commit();
        }
    }
}

#[cfg(test)]
mod tests;
