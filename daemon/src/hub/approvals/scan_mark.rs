//! The approval scan mark: which stored sessions the next start must read for approvals a hub left
//! pending, so a start does not read every session.
//!
//! Every approval is recorded `pending` by a running hub, and a hub that stops without deciding it
//! leaves it pending. So each hub notes, durably and *before* it records an approval's `pending`
//! event, the session it is asked in ([`ScanJournal::note`]); the next start reads exactly the
//! sessions noted since the last completed scan began. This is independent of any clock: a clock
//! stepped back (a Raspberry Pi before NTP) cannot hide a session, which a selection by
//! `updated_at` could.
//!
//! Format (versioned JSON, written atomically, 0600 like every file of the data directory):
//! - v2 (written now): `{"v":2,"backend":..,"scan_started_at":..,"asked_in":[session ids]}`;
//!   the next start reads the sessions in `asked_in`.
//! - v1 (read only, written by earlier hubs): `{"v":1,"backend":..,"scan_started_at":..}`; the next
//!   start reads the sessions updated at or after `scan_started_at` minus [`SCAN_MARGIN`], as the
//!   hub that wrote it expected. A fixture of it is kept in `tests/fixtures/approval-scan-v1.json`.
//!
//! Invariants: the mark is replaced only after a scan completed, and then names the sessions noted
//! since that scan began plus those the scan could not read or write (read again next time); a
//! session is in the mark before any approval's `pending` event of it is stored in this hub's life (a note that cannot be written refuses the question); a mark of
//! another backend, an unknown version, or one that cannot be read or parsed counts as no mark (a
//! full scan); a mark that cannot be written after a scan is logged, never fatal.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use tau_api::durable_file::write_atomic;
use tracing::warn;

/// The format version written.
pub const SCAN_MARK_VERSION: u32 = 2;
/// The version earlier hubs wrote (a time to scan from).
pub const SCAN_MARK_V1: u32 = 1;
/// How far before a v1 mark's scan start sessions are read again (for clock steps).
pub const SCAN_MARGIN: SignedDuration = SignedDuration::from_hours(1);

/// Which sessions a start reads for approvals left pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanPlan {
    /// Every stored session (no usable mark).
    All,
    /// Sessions updated at or after this time (a v1 mark).
    Since(Timestamp),
    /// Exactly these sessions (a v2 mark).
    Sessions(BTreeSet<String>),
}

#[derive(Debug, Deserialize)]
struct StoredMark {
    v: u32,
    backend: String,
    scan_started_at: String,
    #[serde(default)]
    asked_in: Option<BTreeSet<String>>,
}

#[derive(Debug, Serialize)]
struct MarkV2<'a> {
    v: u32,
    backend: &'a str,
    scan_started_at: &'a str,
    asked_in: &'a BTreeSet<String>,
}

/// What the mark at `path` asks a start of the `backend` store to read.
pub fn scan_plan(path: &Path, backend: &str) -> ScanPlan {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return ScanPlan::All,
        Err(error) => {
            warn!(path = %path.display(), "cannot read the approval scan mark; scanning every session: {error}");
            return ScanPlan::All;
        }
    };
    let mark: StoredMark = match serde_json::from_str(&text) {
        Ok(mark) => mark,
        Err(error) => {
            warn!(path = %path.display(), "the approval scan mark is not valid; scanning every session: {error}");
            return ScanPlan::All;
        }
    };
    if mark.backend != backend {
        return ScanPlan::All;
    }
    match (mark.v, mark.asked_in) {
        (SCAN_MARK_VERSION, Some(sessions)) => ScanPlan::Sessions(sessions),
        (SCAN_MARK_V1, _) => match mark.scan_started_at.parse::<Timestamp>() {
            Ok(started) => started
                .checked_sub(SCAN_MARGIN)
                .map_or(ScanPlan::All, ScanPlan::Since),
            Err(_) => ScanPlan::All,
        },
        _ => ScanPlan::All,
    }
}

struct Journal {
    scan_started_at: String,
    asked_in: BTreeSet<String>,
}

/// The running hub's side of the mark: the sessions it asked approvals in since its scan began.
pub struct ScanJournal {
    path: PathBuf,
    backend: String,
    state: Mutex<Journal>,
}

impl std::fmt::Debug for ScanJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanJournal")
            .field("path", &self.path)
            .field("backend", &self.backend)
            .finish()
    }
}

impl ScanJournal {
    /// The journal of the mark at `path`, for the `backend` store. Nothing is written until a
    /// scan completes or a session is noted.
    /// A temporary file a killed hub left beside the mark is removed here.
    pub fn new(path: impl Into<PathBuf>, backend: impl Into<String>) -> Self {
        let path = path.into();
        remove_stale_temp_files(&path);
        Self {
            path,
            backend: backend.into(),
            state: Mutex::new(Journal {
                scan_started_at: Timestamp::now().to_string(),
                asked_in: BTreeSet::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Journal> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What this start must read (see [`scan_plan`]).
    pub fn plan(&self) -> ScanPlan {
        scan_plan(&self.path, &self.backend)
    }

    /// Records that a scan which began at `started` completed: the mark now names the sessions
    /// noted since (normally none: the scan runs before any turn) and the `unfinished` ones the
    /// scan could not read or write, which the next start reads again.
    pub fn record_scan(&self, started: Timestamp, unfinished: &[String]) {
        let mut journal = self.lock();
        journal.scan_started_at = started.to_string();
        journal.asked_in.extend(unfinished.iter().cloned());
        if let Err(error) = self.write(&journal) {
            warn!(path = %self.path.display(), "cannot record the approval scan mark; the next start scans more sessions: {error}");
        }
    }

    /// Notes that an approval is about to be recorded pending in `session_id`; once this returns
    /// `Ok` the next start reads that session. Writes the mark the first time a session is noted.
    pub fn note(&self, session_id: &str) -> io::Result<()> {
        let mut journal = self.lock();
        if journal.asked_in.contains(session_id) {
            return Ok(());
        }
        journal.asked_in.insert(session_id.to_owned());
        let written = self.write(&journal);
        if written.is_err() {
            journal.asked_in.remove(session_id);
        }
        written
    }

    /// Whether `session_id` was noted in this hub's life.
    pub fn noted(&self, session_id: &str) -> bool {
        self.lock().asked_in.contains(session_id)
    }

    fn write(&self, journal: &Journal) -> io::Result<()> {
        let mark = MarkV2 {
            v: SCAN_MARK_VERSION,
            backend: &self.backend,
            scan_started_at: &journal.scan_started_at,
            asked_in: &journal.asked_in,
        };
        let bytes = serde_json::to_vec(&mark).map_err(io::Error::other)?;
        write_atomic(&self.path, &bytes)
    }
}

/// Removes the `<mark>.tmp.<pid>` files beside the mark that a killed hub left (those no live
/// writer holds locked, whatever their pid).
fn remove_stale_temp_files(path: &Path) {
    if let Err(error) = tau_api::durable_file::remove_stale_temp_files_of(path) {
        warn!(file = %path.display(), %error, "cannot remove the stale temporary files of the scan mark");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1_FIXTURE: &str = include_str!("../../../tests/fixtures/approval-scan-v1.json");

    #[test]
    fn an_old_v1_mark_still_reads_as_a_time_with_the_margin_for_its_backend_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approval-scan.json");
        assert_eq!(scan_plan(&path, "file"), ScanPlan::All, "no mark: scan all");
        fs::write(&path, V1_FIXTURE).unwrap();
        assert_eq!(
            scan_plan(&path, "file"),
            ScanPlan::Since("2026-11-30T09:00:00Z".parse().unwrap())
        );
        assert_eq!(scan_plan(&path, "sqlite"), ScanPlan::All, "another store");
        fs::write(&path, V1_FIXTURE.replace("\"v\":1", "\"v\":9")).unwrap();
        assert_eq!(scan_plan(&path, "file"), ScanPlan::All, "another version");
        fs::write(&path, "{not json").unwrap();
        assert_eq!(scan_plan(&path, "file"), ScanPlan::All, "unreadable");
    }

    #[test]
    fn the_journal_names_every_session_noted_since_the_scan_whatever_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approval-scan.json");
        let journal = ScanJournal::new(&path, "file");
        // A start far in the "future" (a clock later stepped back) changes nothing.
        journal.record_scan("2099-01-01T00:00:00Z".parse().unwrap(), &[]);
        assert_eq!(
            scan_plan(&path, "file"),
            ScanPlan::Sessions(BTreeSet::new())
        );
        journal.note("s-b").unwrap();
        journal.note("s-a").unwrap();
        journal.note("s-b").unwrap();
        assert!(journal.noted("s-a"));
        assert_eq!(
            scan_plan(&path, "file"),
            ScanPlan::Sessions(BTreeSet::from(["s-a".to_owned(), "s-b".to_owned()]))
        );
        let value: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(value["v"], 2);
        assert_eq!(value["backend"], "file");
        assert_eq!(value["asked_in"], serde_json::json!(["s-a", "s-b"]));
        assert_eq!(scan_plan(&path, "sqlite"), ScanPlan::All, "another store");
        // The next hub's completed scan starts a new list.
        let next = ScanJournal::new(&path, "file");
        next.record_scan(Timestamp::now(), &[]);
        assert_eq!(
            scan_plan(&path, "file"),
            ScanPlan::Sessions(BTreeSet::new())
        );
        // A session the scan could not finish is read again by the start after.
        next.record_scan(Timestamp::now(), &["s-c".to_owned()]);
        assert_eq!(
            scan_plan(&path, "file"),
            ScanPlan::Sessions(BTreeSet::from(["s-c".to_owned()]))
        );
    }

    #[test]
    fn a_temporary_file_a_killed_hub_left_is_removed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approval-scan.json");
        let stale = dir.path().join("approval-scan.json.tmp.999999999");
        // Left by a killed hub whose successor got the same pid (a container's first process).
        let same_pid = dir
            .path()
            .join(format!("approval-scan.json.tmp.{}", std::process::id()));
        let other = dir.path().join("sessions.tmp.12");
        let odd = dir.path().join("approval-scan.json.tmp.x1");
        for file in [&stale, &same_pid, &other, &odd] {
            fs::write(file, "{").unwrap();
        }
        let _journal = ScanJournal::new(&path, "file");
        assert!(!stale.exists() && !same_pid.exists());
        assert!(other.exists() && odd.exists());
    }

    #[test]
    fn a_note_that_cannot_be_written_fails_and_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let journal = ScanJournal::new(
            dir.path().join("missing").join("approval-scan.json"),
            "file",
        );
        assert!(journal.note("s-a").is_err());
        assert!(!journal.noted("s-a"));
    }
}
