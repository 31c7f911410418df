//! Reading an agent's message files: their ids from the directory's names, many of them at once,
//! in id order, on a few threads, and a page of the newest by id without listing the directory.
//!
//! Invariants: every record read is checked against the id its file name gives; a file that
//! vanished between listing and reading is skipped (only someone removing it behind the store's
//! back does that). A page read by id ([`page_by_id`]) is returned only when every id it expects
//! has its file and no file sits at the count it was given; otherwise the caller lists.

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::sync::{MutexGuard, PoisonError};

use crate::store::records::SessionMessage;
use crate::store::store_error::SessionError;

use super::layout::{check_message_id, message_file_name, parse_message_file_name};
use super::{FileBackend, fsutil};

/// The ids of the message files in `dir` below `before` (all when `None`), in order. Names only:
/// one directory read, no message file opened.
pub(super) fn message_ids(dir: &Path, before: Option<u64>) -> Result<Vec<u64>, SessionError> {
    let mut ids = Vec::new();
    for entry in fs::read_dir(dir).map_err(|err| SessionError::io(dir, err))? {
        let entry = entry.map_err(|err| SessionError::io(dir, err))?;
        if let Some(id) = entry.file_name().to_str().and_then(parse_message_file_name)
            && before.is_none_or(|before| id < before)
        {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// The most (session, agent) marks `paged_by_id` holds, so a hub that pages through many sessions
/// over months keeps a bounded set: past it the set starts again, and a session whose mark went
/// costs one more listing.
const PAGED_BY_ID_MAX: usize = 1024;

/// Adds `key` to `paged`, emptying it first when it holds `max` marks.
fn remember(paged: &mut HashSet<(String, String)>, key: (String, String), max: usize) {
    if paged.len() >= max && !paged.contains(&key) {
        paged.clear();
    }
    paged.insert(key);
}

impl FileBackend {
    pub(super) fn lock_paged_by_id(&self) -> MutexGuard<'_, HashSet<(String, String)>> {
        // Each change is one insert or removal: a poisoned set is still whole.
        self.paged_by_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's message count as every read of this store sees it (deferred or in
    /// `session.json`); `None` without a `session.json`.
    fn message_count(&self, session_id: &str) -> Result<Option<u64>, SessionError> {
        if let Some(file) = self.deferred(session_id) {
            return Ok(Some(file.message_count));
        }
        let dir = self.root.join(session_id);
        Ok(self.read_session_file(&dir)?.map(|file| file.message_count))
    }

    /// `list_messages_before` of the agent whose messages are in `dir` (reconciled): by id from
    /// the session's message count once a listing in this process found every file of the agent
    /// below it (`paged_by_id`); by a listing otherwise, or when the page by id finds a gap.
    pub(super) fn read_page(
        &self,
        dir: &Path,
        session_id: &str,
        agent_id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<SessionMessage>, SessionError> {
        // Read before the listing: a count only grows, and an append's file comes before its
        // count, so a listing that finds every file below this count proves the mark.
        let count = self.message_count(session_id)?;
        let key = (session_id.to_owned(), agent_id.to_owned());
        if let Some(count) = count
            && self.lock_paged_by_id().contains(&key)
            && let Some(page) = page_by_id(dir, count, before, limit)?
        {
            return Ok(page);
        }
        let all = message_ids(dir, None)?;
        let below_count = count.is_some_and(|count| all.last().is_none_or(|&last| last < count));
        let mut paged = self.lock_paged_by_id();
        if below_count {
            remember(&mut paged, key, PAGED_BY_ID_MAX);
        } else {
            paged.remove(&key);
        }
        drop(paged);
        let ids = &all[..all.partition_point(|&id| before.is_none_or(|before| id < before))];
        read_messages(dir, &ids[ids.len().saturating_sub(limit)..])
    }
}

/// The newest `limit` messages below `before` (all when `None`) of an agent whose message files
/// all have ids below `count`, read by id: `count − limit .. count` (or below `before`), no
/// directory read. `None` when that cannot be trusted: an expected file is missing (a gap: ids
/// are not positions here) or a file sits at `count` (the count is behind its files); the caller
/// then lists the directory.
pub(super) fn page_by_id(
    dir: &Path,
    count: u64,
    before: Option<u64>,
    limit: usize,
) -> Result<Option<Vec<SessionMessage>>, SessionError> {
    let end = before.map_or(count, |before| before.min(count));
    let start = end.saturating_sub(u64::try_from(limit).unwrap_or(u64::MAX));
    if end == count && fsutil::open_read(&dir.join(message_file_name(count)))?.is_some() {
        return Ok(None);
    }
    let ids: Vec<u64> = (start..end).collect();
    let messages = read_messages(dir, &ids)?;
    Ok((messages.len() == ids.len()).then_some(messages))
}

/// Reads many messages on up to four threads: small-file reads are syscall-bound, and a long
/// session is opened while a person waits.
pub(super) fn read_messages(dir: &Path, ids: &[u64]) -> Result<Vec<SessionMessage>, SessionError> {
    const PER_THREAD_MIN: usize = 512;
    if ids.len() < 2 * PER_THREAD_MIN {
        // One thread whatever the machine: not worth asking it (cgroup files are read for that).
        return read_message_run(dir, ids);
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(4)
        .min(ids.len() / PER_THREAD_MIN)
        .max(1);
    if threads == 1 {
        return read_message_run(dir, ids);
    }
    let chunk = ids.len().div_ceil(threads);
    let results: Vec<Result<Vec<SessionMessage>, SessionError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ids
            .chunks(chunk)
            .map(|run| scope.spawn(move || read_message_run(dir, run)))
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    Err(SessionError::corrupt(
                        dir.display(),
                        "a message reader panicked",
                    ))
                })
            })
            .collect()
    });
    let mut messages = Vec::with_capacity(ids.len());
    for run in results {
        messages.extend(run?);
    }
    Ok(messages)
}

fn read_message_run(dir: &Path, ids: &[u64]) -> Result<Vec<SessionMessage>, SessionError> {
    let mut buf = Vec::with_capacity(4096);
    let mut messages = Vec::with_capacity(ids.len());
    let mut path = dir.to_path_buf();
    for &id in ids {
        path.push(message_file_name(id));
        // A file listed a moment ago is gone only if someone removed it behind our back.
        if fsutil::read_into(&path, &mut buf)? {
            let record: SessionMessage = fsutil::parse_json(&path, &buf)?;
            check_message_id(&path, &record, id)?;
            messages.push(record);
        }
        path.pop();
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: usize) -> (String, String) {
        (format!("s{n}"), "tau".to_owned())
    }

    #[test]
    fn the_paged_marks_stay_bounded() {
        let mut paged = HashSet::new();
        for n in 0..3 {
            remember(&mut paged, key(n), 3);
        }
        remember(&mut paged, key(1), 3);
        assert_eq!(paged.len(), 3, "a mark already held costs nothing");
        remember(&mut paged, key(3), 3);
        assert_eq!(paged, HashSet::from([key(3)]));
    }
}
