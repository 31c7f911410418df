//! The hub's files under `<TAU_DATA_DIR>/hub/` ([`HubPaths`]), shared by the daemon (which writes
//! them) and the client (`tau hub status` / `stop`, which reads them): their versioned JSON formats,
//! the exit codes of `taud` and the one message both sides print for a refused second start.
//!
//! Invariants: every persisted format carries `version`; a reader refuses a version it does not
//! know instead of guessing; times are RFC 3339 strings in UTC. Nothing here touches the disk.

use std::path::{Path, PathBuf};

pub use crate::paths::HubPaths;

use serde::{Deserialize, Serialize};

/// The format version of `state.json`, `crash.json` and the crash reports written by this build.
pub const FORMAT_VERSION: u32 = 1;

/// The node pairing store's name in the hub directory (`nodes.json`: written by `taud`, read
/// by `tau doctor` on a node).
pub const PAIRING_FILE: &str = "nodes.json";
/// The pairing store's version this build writes and the newest it reads.
pub const PAIRING_VERSION: u32 = 1;

/// The reason recorded when a hub died without writing `crash.json`.
pub const UNEXPECTED_EXIT_REASON: &str = "unexpected exit (no clean shutdown)";

/// Exit codes of `taud`. The systemd unit lists [`exit::ALREADY_RUNNING`] and [`exit::CONFIG`] in
/// `RestartPreventExitStatus`, so neither a refused second start nor a bad config loops.
pub mod exit {
    /// Clean stop (SIGTERM / SIGINT), or a refused start under `taud --launchd`.
    pub const OK: u8 = 0;
    /// Another hub holds the lock (`tau hub is already running (pid N)…`). Nothing else exits 1.
    pub const ALREADY_RUNNING: u8 = 1;
    /// The hub could not create or lock its files (EX_CANTCREAT).
    pub const CANT_CREATE: u8 = 73;
    /// A fatal error after start-up (EX_SOFTWARE); `crash.json` names it.
    pub const FATAL: u8 = 70;
    /// A bad configuration (EX_CONFIG): one line names the problem.
    pub const CONFIG: u8 = 78;
}

/// The line `taud` prints (and exits [`exit::ALREADY_RUNNING`] after) when another hub holds the lock.
pub fn already_running_message(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => {
            format!("tau hub is already running (pid {pid}); `tau hub stop` stops it")
        }
        None => "tau hub is already running (pid unknown); `tau hub stop` stops it".to_owned(),
    }
}

/// `state.json`: what the running (or last) hub says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubState {
    /// Format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// The hub's process id.
    pub pid: u32,
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
    /// Its last heartbeat (RFC 3339, UTC).
    pub heartbeat_at: String,
    /// Set on a clean stop; absent while running or after a crash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<String>,
    /// The heartbeat interval in seconds, so a reader can tell a stale heartbeat.
    pub heartbeat_seconds: u64,
    /// The TCP port the control API was asked to listen on (0 = any free port).
    pub control_port: u16,
    /// The TCP port the control API actually listens on, once it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listening_port: Option<u16>,
    /// Set once every hub service has started or failed to (RFC 3339, UTC); absent while the
    /// hub is still starting. Files written before this field existed lack it: a reader takes
    /// their `listening_port` as the sign of a started hub instead, since those hubs wrote the
    /// port only once their services had started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
    /// Installation profile (home, travel, sport).
    pub profile: String,
    /// Host role (hub, node).
    pub role: String,
    /// The version of tau that wrote this file.
    pub tau_version: String,
}

/// `crash.json`: the reason a dying hub wrote down for its successor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashNote {
    /// Format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// The pid of the hub that wrote it; a note from another pid is ignored.
    pub pid: u32,
    /// When it was written (RFC 3339, UTC).
    pub at: String,
    /// Why the hub is dying (a panic message, a fatal error).
    pub reason: String,
}

/// One hub that stopped without a clean shutdown (a line of `crash_reports.jsonl`, and
/// `last_crash.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashReport {
    /// Format version ([`FORMAT_VERSION`]).
    pub version: u32,
    /// When the next start found the crash (RFC 3339, UTC).
    pub detected_at: String,
    /// From `crash.json` when the dying hub wrote one, else [`UNEXPECTED_EXIT_REASON`].
    pub reason: String,
    /// The pid of the hub that died.
    pub pid: u32,
    /// When that hub started (RFC 3339, UTC).
    pub started_at: String,
    /// Its last heartbeat (RFC 3339, UTC).
    pub heartbeat_at: String,
}

/// Why a hub file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HubFileError {
    /// Not valid JSON for the expected format.
    #[error("{path}: not a valid hub file: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// Written by a newer (or unknown) version of tau.
    #[error("{path}: format version {found} is not supported (this build reads {FORMAT_VERSION})")]
    Version {
        /// The file.
        path: PathBuf,
        /// The version found.
        found: u32,
    },
}

/// Something with a format version.
pub trait Versioned {
    /// The format version the value claims.
    fn format_version(&self) -> u32;
}

impl Versioned for HubState {
    fn format_version(&self) -> u32 {
        self.version
    }
}

impl Versioned for CrashNote {
    fn format_version(&self) -> u32 {
        self.version
    }
}

impl Versioned for CrashReport {
    fn format_version(&self) -> u32 {
        self.version
    }
}

/// Parses one hub file's text, refusing an unknown format version. `path` only names the file in
/// the error.
pub fn parse<T>(path: &Path, text: &str) -> Result<T, HubFileError>
where
    T: for<'de> Deserialize<'de> + Versioned,
{
    let value: T = serde_json::from_str(text).map_err(|source| HubFileError::Parse {
        path: path.to_owned(),
        source,
    })?;
    if value.format_version() != FORMAT_VERSION {
        return Err(HubFileError::Version {
            path: path.to_owned(),
            found: value.format_version(),
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> HubState {
        HubState {
            version: FORMAT_VERSION,
            pid: 42,
            started_at: "2026-01-01T00:00:00Z".into(),
            heartbeat_at: "2026-01-01T00:00:30Z".into(),
            stopped_at: None,
            heartbeat_seconds: 30,
            control_port: 7877,
            listening_port: Some(7877),
            ready_at: Some("2026-01-01T00:00:01Z".into()),
            profile: "home".into(),
            role: "hub".into(),
            tau_version: "0.1.0".into(),
        }
    }

    #[test]
    fn state_round_trips_and_omits_stopped_at_while_running() {
        let text = serde_json::to_string(&state()).unwrap();
        assert!(!text.contains("stopped_at"));
        let back: HubState = parse(Path::new("state.json"), &text).unwrap();
        assert_eq!(back, state());
    }

    /// `state.json` as hubs wrote it before `ready_at` existed.
    const STATE_WITHOUT_READY_AT: &str = r#"{
  "version": 1,
  "pid": 4242,
  "started_at": "2026-11-01T08:00:00Z",
  "heartbeat_at": "2026-11-01T08:00:30Z",
  "heartbeat_seconds": 30,
  "control_port": 0,
  "listening_port": 40123,
  "profile": "home",
  "role": "hub",
  "tau_version": "0.1.0"
}"#;

    #[test]
    fn state_written_before_ready_at_still_reads() {
        let old: HubState = parse(Path::new("state.json"), STATE_WITHOUT_READY_AT).unwrap();
        assert_eq!(old.ready_at, None);
        assert_eq!(old.listening_port, Some(40123));
        assert_eq!(old.pid, 4242);
    }

    #[test]
    fn unknown_version_is_refused() {
        let mut s = state();
        s.version = 99;
        let text = serde_json::to_string(&s).unwrap();
        let err = parse::<HubState>(Path::new("state.json"), &text).unwrap_err();
        assert!(
            matches!(err, HubFileError::Version { found: 99, .. }),
            "{err}"
        );
    }

    #[test]
    fn garbage_is_a_parse_error_naming_the_file() {
        let err = parse::<CrashNote>(Path::new("/x/crash.json"), "{not json").unwrap_err();
        assert!(err.to_string().starts_with("/x/crash.json: "), "{err}");
    }

    #[test]
    fn already_running_message_names_the_pid() {
        assert!(already_running_message(Some(7)).starts_with("tau hub is already running (pid 7)"));
    }
}
