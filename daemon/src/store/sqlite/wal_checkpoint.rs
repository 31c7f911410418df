//! The sqlite backend's WAL checkpoint, off the commit path. sqlite's automatic checkpoint runs
//! inside the commit that crosses its threshold, on the write connection, so every write waiting
//! for that commit (every busy session's) waited for the checkpoint's copy and its syncs too. Here
//! the write connection's threshold is a backstop far out ([`WAL_BACKSTOP_PAGES`]), and the
//! store's `tidy_session`, which the hub runs after a turn off the turn's path, checkpoints once
//! [`CHECKPOINT_COMMITS`] commits have gathered, on a connection of its own.
//!
//! Invariants: one checkpoint at a time (a tidy that finds one running leaves it be); a PASSIVE
//! checkpoint never waits for a writer or a reader, so commits and reads go on through it; its
//! connection syncs as the store's writes do (`synchronous` as the write connection's), and it
//! writes nothing but the checkpoint. When tidies stop (a store used without the hub), the backstop
//! still bounds the WAL.

use std::path::PathBuf;
use std::sync::{Mutex, TryLockError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::store::store_error::SessionError;

/// Commits after which a tidy checkpoints: a turn's commit writes a few pages, so about sqlite's
/// own default threshold (1,000 pages).
pub(super) const CHECKPOINT_COMMITS: usize = 256;

/// The write connection's automatic checkpoint, in pages (64 MiB of 4 KiB pages): reached only
/// when tidies fall far behind or never run.
pub(super) const WAL_BACKSTOP_PAGES: i64 = 16_384;

/// What one checkpoint found and did, in WAL frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Checkpointed {
    /// Frames in the WAL.
    pub(super) log: i64,
    /// Frames copied into the database (all of them: the next commit starts the WAL afresh).
    pub(super) copied: i64,
}

/// The connection checkpoints run on, opened at the first.
pub(super) struct WalCheckpoint {
    path: PathBuf,
    synchronous: &'static str,
    busy_timeout: Duration,
    conn: Mutex<Option<Connection>>,
}

impl WalCheckpoint {
    pub(super) fn new(path: PathBuf, synchronous: &'static str, busy_timeout: Duration) -> Self {
        Self {
            path,
            synchronous,
            busy_timeout,
            conn: Mutex::new(None),
        }
    }

    /// Checkpoints the WAL (PASSIVE), unless a checkpoint runs already (`None`).
    pub(super) fn run(&self) -> Result<Option<Checkpointed>, SessionError> {
        let mut slot = match self.conn.try_lock() {
            Ok(slot) => slot,
            // A checkpoint that panicked left the connection as sqlite keeps it: whole.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return Ok(None),
        };
        let conn = match slot.take() {
            Some(conn) => conn,
            None => self.open()?,
        };
        let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok(Checkpointed {
                log: row.get(1)?,
                copied: row.get(2)?,
            })
        });
        *slot = Some(conn);
        drop(slot);
        Ok(Some(done?))
    }

    fn open(&self) -> Result<Connection, SessionError> {
        // The database exists (the store created it): never create it here.
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(self.busy_timeout)?;
        conn.pragma_update(None, "synchronous", self.synchronous)?;
        Ok(conn)
    }
}
