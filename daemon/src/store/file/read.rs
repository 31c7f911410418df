//! Reading an agent's message files: their ids from the directory's names, and many of them at
//! once, in id order, on a few threads.
//!
//! Invariant: every record read is checked against the id its file name gives; a file that
//! vanished between listing and reading is skipped (only someone removing it behind the store's
//! back does that).

use std::fs;
use std::path::Path;

use crate::store::records::SessionMessage;
use crate::store::store_error::SessionError;

use super::fsutil;
use super::layout::{check_message_id, message_file_name, parse_message_file_name};

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

/// Reads many messages on up to four threads: small-file reads are syscall-bound, and a long
/// session is opened while a person waits.
pub(super) fn read_messages(dir: &Path, ids: &[u64]) -> Result<Vec<SessionMessage>, SessionError> {
    const PER_THREAD_MIN: usize = 512;
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
