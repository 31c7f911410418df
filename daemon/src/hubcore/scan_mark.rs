//! The approval scan mark: when the last completed start-up scan for approvals left pending began,
//! so the next start reads only the sessions that could hold one.
//!
//! An approval is recorded pending during a turn, after the turn's user message was stored (which
//! moved the session's `updated_at`), and turns never outlive the hub that ran them. Every approval
//! a hub left pending was therefore recorded in a session whose `updated_at` is at or after that
//! hub's start, hence after the start of its scan. The next start reads only sessions updated at or
//! after the mark minus [`SCAN_MARGIN`] (clock steps); older ones were scanned already.
//!
//! Invariants: the mark is a small versioned JSON file (`{"v":1,"backend":..,"scan_started_at":..}`)
//! written atomically (0600, like every file of the data directory) only after a scan completed;
//! a mark of another backend, another version or one that cannot be read or parsed counts as no
//! mark (a full scan); a mark that cannot be written is logged, never fatal (the next start scans
//! more).

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use tracing::warn;

/// The mark file's format version.
pub const SCAN_MARK_VERSION: u32 = 1;
/// How far before the last scan's start sessions are read again (for clock steps).
pub const SCAN_MARGIN: SignedDuration = SignedDuration::from_hours(1);

#[derive(Debug, Serialize, Deserialize)]
struct Mark {
    v: u32,
    backend: String,
    scan_started_at: String,
}

/// The `updated_at` from which sessions must be scanned for the store of `backend`, or `None`
/// (scan them all) without a usable mark at `path`.
pub fn scan_since(path: &Path, backend: &str) -> Option<Timestamp> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return None,
        Err(error) => {
            warn!(path = %path.display(), "cannot read the approval scan mark; scanning every session: {error}");
            return None;
        }
    };
    let mark: Mark = match serde_json::from_str(&text) {
        Ok(mark) => mark,
        Err(error) => {
            warn!(path = %path.display(), "the approval scan mark is not valid; scanning every session: {error}");
            return None;
        }
    };
    if mark.v != SCAN_MARK_VERSION || mark.backend != backend {
        return None;
    }
    let started: Timestamp = mark.scan_started_at.parse().ok()?;
    started.checked_sub(SCAN_MARGIN).ok()
}

/// Records that a scan of the `backend` store that began at `started` completed.
pub fn record_scan(path: &Path, backend: &str, started: Timestamp) {
    let mark = Mark {
        v: SCAN_MARK_VERSION,
        backend: backend.to_owned(),
        scan_started_at: started.to_string(),
    };
    if let Err(error) = write_atomic(path, &mark) {
        warn!(path = %path.display(), "cannot record the approval scan mark; the next start scans every session again: {error}");
    }
}

fn write_atomic(path: &Path, mark: &Mark) -> io::Result<()> {
    let bytes = serde_json::to_vec(mark).map_err(io::Error::other)?;
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_mark_is_read_back_with_the_margin_for_its_backend_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approval-scan.json");
        assert_eq!(scan_since(&path, "file"), None, "no mark: scan all");
        let started: Timestamp = "2026-11-30T10:00:00Z".parse().unwrap();
        record_scan(&path, "file", started);
        assert_eq!(
            scan_since(&path, "file"),
            Some("2026-11-30T09:00:00Z".parse().unwrap())
        );
        assert_eq!(scan_since(&path, "sqlite"), None, "another store");
        let text = fs::read_to_string(&path).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["v"], 1);
        fs::write(&path, text.replace("\"v\":1", "\"v\":2")).unwrap();
        assert_eq!(scan_since(&path, "file"), None, "another version");
        fs::write(&path, "{not json").unwrap();
        assert_eq!(scan_since(&path, "file"), None, "unreadable");
    }
}
