//! Crash detection and crash notes.
//!
//! A hub that stops cleanly writes `stopped_at` into `state.json`. The next start runs [`check`]:
//! a `state.json` without `stopped_at` means the previous hub died, so a [`CrashReport`] is
//! appended to `crash_reports.jsonl` and written to `last_crash.json`. Its reason comes from
//! `crash.json` when the dying hub wrote one (the panic hook, a fatal error) for the same pid,
//! else [`UNEXPECTED_EXIT_REASON`].
//!
//! Invariants: `crash.json` is consumed by every check (a stale note never explains a later
//! crash) and removed on a clean stop; `crash_reports.jsonl` is only ever appended to.

use std::io;
use std::path::{Path, PathBuf};

use tau_api::hub_files::{
    self, CrashNote, CrashReport, FORMAT_VERSION, HubPaths, HubState, UNEXPECTED_EXIT_REASON,
};

use super::files::{append_line, now_rfc3339, read_optional, remove_if_exists, write_atomic};

/// A crash file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct CrashError {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    pub source: io::Error,
}

/// What the crash check found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CrashCheck {
    /// The report recorded by this check, if the previous hub crashed.
    pub recorded: Option<CrashReport>,
    /// The latest crash known (`recorded`, else `last_crash.json`).
    pub last_crash: Option<CrashReport>,
}

fn err(path: &Path) -> impl FnOnce(io::Error) -> CrashError + '_ {
    move |source| CrashError {
        path: path.to_owned(),
        source,
    }
}

/// Looks for an unclean previous stop and records it. Unreadable files are logged and treated as
/// absent; only failures to write the report are errors.
pub fn check(paths: &HubPaths) -> Result<CrashCheck, CrashError> {
    let note_path = paths.crash_file.clone();
    let note = read_note(&note_path);
    remove_if_exists(&note_path).map_err(err(&note_path))?;
    let previous = read_state(&paths.state_file);
    let recorded = match previous {
        Some(state) if state.stopped_at.is_none() => {
            let reason = note
                .filter(|n| n.pid == state.pid)
                .map(|n| n.reason)
                .unwrap_or_else(|| UNEXPECTED_EXIT_REASON.to_owned());
            let report = CrashReport {
                version: FORMAT_VERSION,
                detected_at: now_rfc3339(),
                reason,
                pid: state.pid,
                started_at: state.started_at,
                heartbeat_at: state.heartbeat_at,
            };
            record(paths, &report)?;
            tracing::warn!(pid = report.pid, reason = %report.reason, "the previous hub did not stop cleanly; crash report written");
            Some(report)
        }
        Some(_) | None => None,
    };
    let last_crash = match &recorded {
        Some(report) => Some(report.clone()),
        None => read_last_crash(&paths.last_crash_file),
    };
    Ok(CrashCheck {
        recorded,
        last_crash,
    })
}

fn record(paths: &HubPaths, report: &CrashReport) -> Result<(), CrashError> {
    let line = serde_json::to_string(report).map_err(|e| CrashError {
        path: paths.crash_reports_file.clone(),
        source: io::Error::other(e),
    })?;
    let reports = paths.crash_reports_file.clone();
    append_line(&reports, &line).map_err(err(&reports))?;
    let last = paths.last_crash_file.clone();
    write_atomic(&last, line.as_bytes()).map_err(err(&last))
}

fn read_parsed<T>(path: &Path) -> Option<T>
where
    T: for<'de> serde::Deserialize<'de> + hub_files::Versioned,
{
    match read_optional(path) {
        Ok(Some(text)) => match hub_files::parse(path, &text) {
            Ok(value) => Some(value),
            Err(e) => {
                tracing::warn!("ignoring {e}");
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            tracing::warn!("cannot read {}: {e}", path.display());
            None
        }
    }
}

fn read_note(path: &Path) -> Option<CrashNote> {
    read_parsed(path)
}

fn read_state(path: &Path) -> Option<HubState> {
    read_parsed(path)
}

/// Reads `last_crash.json`, if there is a valid one.
pub fn read_last_crash(path: &Path) -> Option<CrashReport> {
    read_parsed(path)
}

/// Writes `crash.json` for this process, so the next start can say why it died.
pub fn write_note(path: &Path, reason: &str) -> Result<(), CrashError> {
    let note = CrashNote {
        version: FORMAT_VERSION,
        pid: std::process::id(),
        at: now_rfc3339(),
        reason: reason.to_owned(),
    };
    let text = serde_json::to_string(&note).map_err(|e| CrashError {
        path: path.to_owned(),
        source: io::Error::other(e),
    })?;
    write_atomic(path, text.as_bytes()).map_err(err(path))
}

/// Installs a panic hook that writes `crash.json` (then runs the previous hook). A panic in a
/// task the hub survives leaves a note that the clean stop removes again.
pub fn install_panic_hook(note_path: PathBuf) {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic payload".to_owned());
        let reason = match info.location() {
            Some(loc) => format!("panic: {message} (at {}:{})", loc.file(), loc.line()),
            None => format!("panic: {message}"),
        };
        // Best effort: the process is going down, so there is nowhere to report a failure.
        let _ = write_note(&note_path, &reason);
        previous(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::files::ensure_private_dir;

    fn setup() -> (tempfile::TempDir, HubPaths) {
        let tmp = tempfile::tempdir().unwrap();
        let paths = HubPaths::in_dir(tmp.path().join("hub"));
        ensure_private_dir(&paths.dir).unwrap();
        (tmp, paths)
    }

    fn state(pid: u32, stopped: bool) -> HubState {
        HubState {
            version: FORMAT_VERSION,
            pid,
            started_at: "2026-01-01T00:00:00Z".into(),
            heartbeat_at: "2026-01-01T00:01:00Z".into(),
            stopped_at: stopped.then(|| "2026-01-01T00:02:00Z".into()),
            heartbeat_seconds: 30,
            control_port: 7877,
            listening_port: None,
            ready_at: None,
            profile: "home".into(),
            role: "hub".into(),
            tau_version: "0.1.0".into(),
        }
    }

    fn put_state(paths: &HubPaths, s: &HubState) {
        write_atomic(
            &paths.state_file,
            serde_json::to_string(s).unwrap().as_bytes(),
        )
        .unwrap();
    }

    fn put_note(paths: &HubPaths, pid: u32, reason: &str) {
        let note = CrashNote {
            version: FORMAT_VERSION,
            pid,
            at: "2026-01-01T00:01:30Z".into(),
            reason: reason.into(),
        };
        write_atomic(
            &paths.crash_file,
            serde_json::to_string(&note).unwrap().as_bytes(),
        )
        .unwrap();
    }

    #[test]
    fn first_start_and_clean_stop_record_nothing() {
        let (_tmp, paths) = setup();
        assert_eq!(check(&paths).unwrap(), CrashCheck::default());
        put_state(&paths, &state(5, true));
        assert_eq!(check(&paths).unwrap(), CrashCheck::default());
        assert!(!paths.crash_reports_file.exists());
    }

    #[test]
    fn missing_stopped_at_records_an_unexpected_exit() {
        let (_tmp, paths) = setup();
        put_state(&paths, &state(5, false));
        let found = check(&paths).unwrap();
        let report = found.recorded.clone().unwrap();
        assert_eq!(report.reason, UNEXPECTED_EXIT_REASON);
        assert_eq!(report.pid, 5);
        assert_eq!(report.heartbeat_at, "2026-01-01T00:01:00Z");
        assert_eq!(found.last_crash, Some(report.clone()));
        let lines = std::fs::read_to_string(paths.crash_reports_file).unwrap();
        assert_eq!(lines.lines().count(), 1);
        let last: CrashReport =
            serde_json::from_str(&std::fs::read_to_string(paths.last_crash_file).unwrap()).unwrap();
        assert_eq!(last, report);
    }

    #[test]
    fn crash_note_of_the_same_pid_gives_the_reason_and_is_consumed() {
        let (_tmp, paths) = setup();
        put_state(&paths, &state(5, false));
        put_note(&paths, 5, "panic: boom");
        let report = check(&paths).unwrap().recorded.unwrap();
        assert_eq!(report.reason, "panic: boom");
        assert!(!paths.crash_file.exists());
    }

    #[test]
    fn crash_note_of_another_pid_is_ignored() {
        let (_tmp, paths) = setup();
        put_state(&paths, &state(5, false));
        put_note(&paths, 6, "panic: stale");
        let report = check(&paths).unwrap().recorded.unwrap();
        assert_eq!(report.reason, UNEXPECTED_EXIT_REASON);
    }

    #[test]
    fn reports_accumulate_and_last_crash_survives_a_clean_cycle() {
        let (_tmp, paths) = setup();
        put_state(&paths, &state(5, false));
        check(&paths).unwrap();
        put_state(&paths, &state(6, false));
        let second = check(&paths).unwrap().recorded.unwrap();
        put_state(&paths, &state(7, true));
        let found = check(&paths).unwrap();
        assert_eq!(found.recorded, None);
        assert_eq!(found.last_crash, Some(second));
        let lines = std::fs::read_to_string(paths.crash_reports_file).unwrap();
        assert_eq!(lines.lines().count(), 2);
    }

    #[test]
    fn unreadable_state_is_not_a_crash() {
        let (_tmp, paths) = setup();
        write_atomic(&paths.state_file, b"{garbage").unwrap();
        assert_eq!(check(&paths).unwrap(), CrashCheck::default());
    }

    #[test]
    fn write_note_is_readable_by_check() {
        let (_tmp, paths) = setup();
        put_state(&paths, &state(std::process::id(), false));
        write_note(&paths.crash_file, "fatal: disk gone").unwrap();
        let report = check(&paths).unwrap().recorded.unwrap();
        assert_eq!(report.reason, "fatal: disk gone");
    }
}
