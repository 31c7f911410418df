//! The sqlite backend's read connections: a small pool beside the write connection, so a read
//! (a page of messages, a listing) never waits behind a commit. In WAL mode a reader sees the
//! last commit made before its read began and never blocks the writer, nor the writer it.
//!
//! Invariants: at most [`READERS`] read connections are ever open, each with a page cache of at
//! most [`READER_CACHE_KIB`] KiB, opened when first needed and kept idle for reuse; a read that
//! finds them all busy waits for one, at most [`READER_WAIT`]; each is `query_only`, so nothing
//! is ever written through it; a connection always goes back to the pool, even when its read
//! fails or panics.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, ffi};

use crate::store::store_error::SessionError;

/// The most read connections open at once: one per core of a small machine and a spare, each
/// with its own page cache.
const READERS: usize = 3;

/// How long a read waits for a busy read connection to come back.
const READER_WAIT: Duration = Duration::from_secs(5);

/// Each read connection's page cache, in KiB (sqlite's default is 2 MiB): pages are read once
/// per request, and the operating system caches the file anyway, so several readers stay small.
const READER_CACHE_KIB: i64 = 1024;

/// Read connections to one database.
pub(super) struct ReadPool {
    path: PathBuf,
    busy_timeout: Duration,
    /// Prepared statements each connection keeps.
    statements: usize,
    slots: Mutex<Slots>,
    returned: Condvar,
}

struct Slots {
    idle: Vec<Connection>,
    /// Connections open, idle or lent out.
    open: usize,
}

/// A connection lent out; goes back to the pool when dropped.
struct Lent<'p> {
    pool: &'p ReadPool,
    conn: Option<Connection>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.lock().idle.push(conn);
            self.pool.returned.notify_one();
        }
    }
}

impl ReadPool {
    /// A pool for the database at `path`, which already exists (the write connection made it);
    /// nothing is opened yet.
    pub(super) fn new(path: &Path, busy_timeout: Duration, statements: usize) -> Self {
        Self {
            path: path.to_path_buf(),
            busy_timeout,
            statements,
            slots: Mutex::new(Slots {
                idle: Vec::with_capacity(READERS),
                open: 0,
            }),
            returned: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        // A panic while lending a connection leaves the slots consistent (`Lent` gives it back).
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `read` on a read connection.
    pub(super) fn read<T>(
        &self,
        read: impl FnOnce(&mut Connection) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        let mut lent = Lent {
            pool: self,
            conn: Some(self.take()?),
        };
        match lent.conn.as_mut() {
            Some(conn) => read(conn),
            None => Err(unavailable("a read connection went missing")),
        }
    }

    /// An idle connection, a new one while fewer than [`READERS`] are open, or the first one
    /// given back.
    fn take(&self) -> Result<Connection, SessionError> {
        let deadline = Instant::now() + READER_WAIT;
        let mut slots = self.lock();
        loop {
            if let Some(conn) = slots.idle.pop() {
                return Ok(conn);
            }
            if slots.open < READERS {
                slots.open += 1;
                drop(slots);
                return self.connect().inspect_err(|_| {
                    self.lock().open -= 1;
                    self.returned.notify_one();
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(unavailable(
                    "every read connection stayed busy for 5 s; try again",
                ));
            }
            slots = self
                .returned
                .wait_timeout(slots, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn connect(&self) -> Result<Connection, SessionError> {
        // No CREATE: the database exists; NOFOLLOW: never through a symbolic link put there since.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(&self.path, flags)?;
        conn.busy_timeout(self.busy_timeout)?;
        conn.set_prepared_statement_cache_capacity(self.statements);
        conn.pragma_update(None, "query_only", true)?;
        conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
        Ok(conn)
    }

    /// Read connections open now.
    #[cfg(test)]
    pub(super) fn open_connections(&self) -> usize {
        self.lock().open
    }
}

fn unavailable(why: &str) -> SessionError {
    SessionError::Database(rusqlite::Error::SqliteFailure(
        ffi::Error::new(ffi::SQLITE_BUSY),
        Some(why.to_owned()),
    ))
}
