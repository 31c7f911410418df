//! The file backend's listing index, `<sessions_dir>/.sessions-index.jsonl`: one JSON line per
//! session creation and per message append (`session_id`, `created_at`, `updated_at`,
//! `message_count`; the last line of a session wins), so `list_sessions` reads one file instead of
//! one `session.json` per session (10,000 small-file reads cost ~100 ms here; one index read ~10 ms).
//!
//! Invariants:
//! - The index is derived data: every value in it is also in the session's own files. A turn's
//!   flush writes its line after the message files and before `session.json`, so after a process
//!   crash the index is never behind `session.json`; the line is not fsynced (a power cut may lose
//!   it), and the first listing of a process compares every session's values with the index and
//!   records the ones that differ, as the store's reconciliation (once per session and process,
//!   see `reconcile`) brings both in line with the message files. Its name starts with `.`, so it
//!   is never mistaken for a session.
//! - Membership is checked on every listing against the directory itself (one `readdir`, no per-
//!   session `stat`): a session directory missing from the index (index lost, or a crash between
//!   `session.json` and the index line) is read from its `session.json` and added; an index entry
//!   without a real directory is dropped. Values that lag after a crash are corrected by the
//!   store's reconciliation before a listing is returned.
//! - Appends and compactions run under the store's index lock, in the one process that writes the
//!   store (the hub); a compaction replaces the file atomically with one line per live session.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::store::contract::Durability;
use crate::store::file::fsutil::replace;
use crate::store::file::jsonl::{append_line, read_lines};
use crate::store::id::validate_id;
use crate::store::records::{SessionInfo, format_version, rfc3339};
use crate::store::store_error::{IdKind, SessionError};

pub(crate) const INDEX_FILE: &str = ".sessions-index.jsonl";

/// Compact after this many appends in one process.
const COMPACT_EVERY: usize = 8192;
/// Compact during a listing when the file has this many lines more than twice the live sessions.
const SLACK_LINES: usize = 1024;
/// Sessions found missing from the index in one listing beyond which a compaction is cheaper than
/// appending them one by one.
const REPAIR_APPENDS: usize = 64;

/// One line of the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IndexEntry {
    #[serde(default = "format_version")]
    pub v: u32,
    pub session_id: String,
    #[serde(with = "rfc3339")]
    pub created_at: Timestamp,
    #[serde(with = "rfc3339")]
    pub updated_at: Timestamp,
    #[serde(default)]
    pub message_count: u64,
}

impl IndexEntry {
    pub(crate) fn info(&self) -> SessionInfo {
        SessionInfo {
            session_id: self.session_id.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            message_count: self.message_count,
        }
    }
}

/// The index of one sessions directory; lives behind the store's index lock.
pub(crate) struct ListingIndex {
    root: PathBuf,
    durability: Durability,
    appends: usize,
}

impl ListingIndex {
    pub(crate) fn new(root: &Path, durability: Durability) -> Self {
        Self {
            root: root.to_path_buf(),
            durability,
            appends: 0,
        }
    }

    /// Records the current listing values of one session.
    pub(crate) fn record(&mut self, entry: &IndexEntry) -> Result<(), SessionError> {
        self.append(entry, self.durability)
    }

    /// [`ListingIndex::record`] without waiting for the disk, for a turn's flush: a line lost to
    /// a power cut leaves the index behind `session.json`, which the first listing of the next
    /// process corrects (it compares every session's values with the index).
    pub(crate) fn record_unsynced(&mut self, entry: &IndexEntry) -> Result<(), SessionError> {
        self.append(entry, Durability::NoSync)
    }

    fn append(&mut self, entry: &IndexEntry, durability: Durability) -> Result<(), SessionError> {
        append_line(&self.root, INDEX_FILE, entry, durability)?;
        self.appends += 1;
        if self.appends >= COMPACT_EVERY {
            let (entries, _) = self.load()?;
            let mut live: Vec<IndexEntry> = entries.into_values().collect();
            live.sort_by(|a, b| a.session_id.cmp(&b.session_id));
            self.compact(&live)?;
        }
        Ok(())
    }

    /// The index's entries (last line per session wins) and its line count.
    fn load(&self) -> Result<(HashMap<String, IndexEntry>, usize), SessionError> {
        let lines: Vec<IndexEntry> = read_lines(&self.root.join(INDEX_FILE))?;
        let count = lines.len();
        let mut entries = HashMap::with_capacity(count);
        for entry in lines {
            if entry.v > format_version() {
                continue;
            }
            entries.insert(entry.session_id.clone(), entry);
        }
        Ok((entries, count))
    }

    fn compact(&mut self, live: &[IndexEntry]) -> Result<(), SessionError> {
        let mut bytes = Vec::with_capacity(live.len() * 160);
        for entry in live {
            serde_json::to_writer(&mut bytes, entry)
                .map_err(|err| SessionError::corrupt(INDEX_FILE, err))?;
            bytes.push(b'\n');
        }
        replace(&self.root, INDEX_FILE, &bytes, self.durability)?;
        self.appends = 0;
        Ok(())
    }

    /// Every session of the directory (unsorted), reconciling the index with the directory.
    /// `read_session` reads the listing values of a session from its own records (`None` if it has
    /// none yet).
    pub(crate) fn list(
        &mut self,
        read_session: &dyn Fn(&str) -> Result<Option<IndexEntry>, SessionError>,
    ) -> Result<Vec<SessionInfo>, SessionError> {
        let (mut entries, lines) = self.load()?;
        let mut live = Vec::with_capacity(entries.len());
        let mut repairs = Vec::new();
        let root = &self.root;
        for dir_entry in fs::read_dir(root).map_err(|err| SessionError::io(root, err))? {
            let dir_entry = dir_entry.map_err(|err| SessionError::io(root, err))?;
            let name = dir_entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if validate_id(IdKind::Session, name).is_err() {
                continue;
            }
            let file_type = dir_entry
                .file_type()
                .map_err(|err| SessionError::io(dir_entry.path(), err))?;
            if file_type.is_symlink() {
                tracing::warn!(path = %dir_entry.path().display(), "skipping a symbolic link in the sessions directory");
                continue;
            }
            if !file_type.is_dir() {
                continue;
            }
            if let Some(entry) = entries.remove(name) {
                live.push(entry);
                continue;
            }
            match read_session(name) {
                Ok(Some(entry)) => {
                    repairs.push(entry.clone());
                    live.push(entry);
                }
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(session_id = name, %err, "skipping an unreadable session")
                }
            }
        }
        if repairs.len() > REPAIR_APPENDS || lines > 2 * live.len() + SLACK_LINES {
            live.sort_by(|a, b| a.session_id.cmp(&b.session_id));
            self.compact(&live)?;
        } else {
            for entry in &repairs {
                self.record(entry)?;
            }
        }
        Ok(live.iter().map(IndexEntry::info).collect())
    }
}

/// Newest `updated_at` first; ties broken by the larger id first (ids start with their time): the
/// order of a listing.
pub(crate) fn sort_sessions(sessions: &mut [SessionInfo]) {
    sessions.sort_unstable_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| b.session_id.cmp(&a.session_id))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::now_utc;

    fn entry(id: &str, count: u64) -> IndexEntry {
        let now = now_utc();
        IndexEntry {
            v: 1,
            session_id: id.into(),
            created_at: now,
            updated_at: now,
            message_count: count,
        }
    }

    fn no_records(_: &str) -> Result<Option<IndexEntry>, SessionError> {
        Ok(None)
    }

    #[test]
    fn the_last_line_of_a_session_wins_and_only_directories_count() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("a")).unwrap();
        let mut index = ListingIndex::new(dir.path(), Durability::NoSync);
        index.record(&entry("a", 1)).unwrap();
        index.record(&entry("a", 2)).unwrap();
        index.record(&entry("gone", 5)).unwrap();
        let listed = index.list(&no_records).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].session_id, "a");
        assert_eq!(listed[0].message_count, 2);
    }

    #[test]
    fn sessions_missing_from_the_index_are_read_and_added() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b", "half"] {
            fs::create_dir(dir.path().join(name)).unwrap();
        }
        let mut index = ListingIndex::new(dir.path(), Durability::NoSync);
        let read = |id: &str| Ok((id != "half").then(|| entry(id, 7)));
        let mut listed = index.list(&read).unwrap();
        listed.sort_by(|x, y| x.session_id.cmp(&y.session_id));
        assert_eq!(
            listed
                .iter()
                .map(|s| s.session_id.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        // Now they come from the index alone.
        let listed = index.list(&no_records).unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().all(|s| s.message_count == 7));
    }

    #[test]
    fn a_long_index_is_compacted_to_one_line_per_session() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("a")).unwrap();
        let mut index = ListingIndex::new(dir.path(), Durability::NoSync);
        for n in 0..(SLACK_LINES as u64 + 10) {
            index.record(&entry("a", n)).unwrap();
        }
        let listed = index.list(&no_records).unwrap();
        assert_eq!(listed[0].message_count, SLACK_LINES as u64 + 9);
        let text = fs::read_to_string(dir.path().join(INDEX_FILE)).unwrap();
        assert_eq!(text.lines().count(), 1);
    }
}
