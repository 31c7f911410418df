//! The file backend's deferred session records: a message append changes its session's
//! `session.json` (count, `updated_at`) in memory only, and `FileBackend::flush_deferred` (the
//! store's `flush_session`, after turns, at most once a second) writes it: the index line (not fsynced: derived data),
//! then `session.json` atomically. Every read of the store sees the deferred values.
//!
//! A session this process creates whole starts with its record kept here as created (at most
//! `CREATED_KEPT` such), so its first append does not read `session.json` back.
//!
//! Invariants: the deferred lock is never held while another lock of the store is taken; a
//! deferred record leaves memory only once what was written equals it (an append during a flush
//! keeps it for the next), or, kept as created and unchanged, at its flush, which writes nothing;
//! one flush per session runs at a time (its `flushing` mark), so one writer of its spare file;
//! a store that closes writes what it still defers, and marks a clean stop when nothing is left
//! (`clean_stop`); a crash before a flush leaves `session.json` behind its message files, which
//! the next reconciliation sets to the same values.

use std::collections::HashMap;
use std::sync::{MutexGuard, PoisonError};

use crate::store::file::fsutil::replace_through_spare;
use crate::store::records::SessionInfo;
use crate::store::store_error::SessionError;

use super::index::IndexEntry;
use super::{FileBackend, SESSION_FILE, SessionFile, to_json};
use crate::store::records::FORMAT_VERSION;

/// A session's `session.json` waiting for its flush, and whether a flush is writing it.
pub(super) struct Deferred {
    pub(super) file: SessionFile,
    pub(super) flushing: bool,
    /// The record as this process created it, unchanged since: nothing to write (see
    /// [`FileBackend::record_created`]).
    pub(super) stored: bool,
}

/// At most this many records of sessions created here and not yet written to stay in memory.
const CREATED_KEPT: usize = 64;

impl FileBackend {
    pub(super) fn lock_deferred(&self) -> MutexGuard<'_, HashMap<String, Deferred>> {
        // Each entry is whole: it is replaced in one step under the lock.
        self.deferred.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's record and counter as this process last wrote them, if not yet flushed.
    /// (A record kept as created is the file's: reads go to the file, as they would without it.)
    pub(super) fn deferred(&self, session_id: &str) -> Option<SessionFile> {
        self.lock_deferred()
            .get(session_id)
            .filter(|entry| !entry.stored)
            .map(|entry| entry.file.clone())
    }

    /// A complete session was created with record `file`: its index line (unsynced), and the
    /// record kept as deferred, so the session's first append does not read back what was just
    /// written. Only while few are kept: a session created and never written to keeps its
    /// record in memory until its flush or the store's close.
    pub(super) fn record_created(&self, file: SessionFile) -> Result<(), SessionError> {
        self.lock_index().record_unsynced(&index_entry(&file))?;
        let mut deferred = self.lock_deferred();
        let kept = deferred.values().filter(|entry| entry.stored).count();
        if kept < CREATED_KEPT {
            let id = file.session.session_id.clone();
            deferred.entry(id).or_insert(Deferred {
                file,
                flushing: false,
                stored: true,
            });
        }
        Ok(())
    }

    /// The index line, then `session.json`, then the directory: a crash between them leaves
    /// `session.json` behind its message files, which the next reconciliation sees, never the
    /// index alone. The deferred values stay in memory until they are on disk.
    ///
    /// Flushes of different sessions run in parallel (the index lock is held for the index
    /// append only); a second flush of a session while one runs returns at once, and whatever
    /// the running one did not write stays deferred for the next.
    pub(super) fn flush_deferred(&self, session_id: &str) -> Result<(), SessionError> {
        let file = {
            let mut deferred = self.lock_deferred();
            match deferred.get_mut(session_id) {
                Some(entry) if entry.stored => {
                    // As created: on disk already.
                    deferred.remove(session_id);
                    return Ok(());
                }
                Some(entry) if !entry.flushing => {
                    entry.flushing = true;
                    entry.file.clone()
                }
                _ => return Ok(()),
            }
        };
        let session_dir = self.root.join(session_id);
        // The index lock only for the line (the guard is dropped at the end of its statement).
        let indexed = self.lock_index().record_unsynced(&index_entry(&file));
        let written = indexed.and_then(|()| {
            // Through the spare: no inode freed at each flush (one flush of a session at a time,
            // its `flushing` mark, so one writer of the spare).
            replace_through_spare(
                &session_dir,
                SESSION_FILE,
                &to_json(&file)?,
                self.durability,
            )
        });
        let mut deferred = self.lock_deferred();
        if let Some(entry) = deferred.get_mut(session_id) {
            if written.is_ok() && entry.file == file {
                deferred.remove(session_id);
            } else {
                entry.flushing = false;
            }
        }
        written
    }
}

impl FileBackend {
    /// The reconciled listing with each session's deferred record in place of its index line.
    ///
    /// Deferred records are read before the listing as well as after it: a flush between the two
    /// writes the index line and then drops its record, so a listing that read the index before
    /// that line still finds the record it would otherwise lose.
    pub(super) fn listing_with_deferred(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let before: HashMap<String, SessionFile> = self
            .lock_deferred()
            .iter()
            .filter(|(_, entry)| !entry.stored)
            .map(|(id, entry)| (id.clone(), entry.file.clone()))
            .collect();
        let mut sessions = self.reconciled_listing()?;
        let deferred = self.lock_deferred();
        for info in &mut sessions {
            let newest = deferred
                .get(&info.session_id)
                .filter(|entry| !entry.stored)
                .map(|entry| &entry.file)
                .or_else(|| before.get(&info.session_id));
            if let Some(file) = newest {
                *info = index_entry(file).info();
            }
        }
        Ok(sessions)
    }
}

/// A store going away empties its journals and writes what it deferred (a hub stopping between
/// turns leaves nothing for the next start to repair); a failure is logged, and the next open
/// reconciles.
impl Drop for FileBackend {
    fn drop(&mut self) {
        let mut clean = true;
        for id in self.journaled_sessions() {
            if let Err(err) = self.close_journal(&id) {
                clean = false;
                tracing::warn!(session_id = %id, %err, "cannot empty a session's journal on close");
            }
        }
        let ids: Vec<String> = self.lock_deferred().keys().cloned().collect();
        for id in ids {
            if let Err(err) = self.flush_deferred(&id) {
                clean = false;
                tracing::warn!(session_id = %id, %err, "cannot write a session's record on close");
            }
        }
        // Only a store with nothing left to replay or write may tell the next one so.
        if clean
            && self.journaled_sessions().is_empty()
            && self.lock_deferred().is_empty()
            && let Err(err) = self.mark_clean_stop()
        {
            tracing::warn!(%err, "cannot mark the session store as stopped cleanly; the next start surveys every session");
        }
    }
}

/// The listing index's line for a session record.
pub(super) fn index_entry(file: &SessionFile) -> IndexEntry {
    IndexEntry {
        v: FORMAT_VERSION,
        session_id: file.session.session_id.clone(),
        created_at: file.session.created_at,
        updated_at: file.session.updated_at,
        message_count: file.message_count,
    }
}
