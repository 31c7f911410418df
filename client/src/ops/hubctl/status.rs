//! `tau hub status`: running or not, pid, heartbeat age, last crash, and what launchd or systemd
//! says, as text or as JSON (`--json`, for scripts).
//!
//! Invariants: never starts or changes anything; exit code 0 when a hub runs, 3 when none does
//! (as `systemctl status`), so scripts need not parse the text.

use std::io::{self, Write};

use serde::Serialize;
use tau_api::hub_files::{CrashReport, HubState};

use super::probe::HubProbe;
use super::service_manager::LaunchdState;

/// Exit code of `tau hub status` when no hub runs.
pub const NOT_RUNNING: u8 = 3;

/// What launchd or systemd says about the hub's service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ManagerStatus {
    /// Linux.
    Systemd {
        /// `taud.service`.
        unit: String,
        /// The unit file exists.
        installed: bool,
        /// `is-enabled`.
        enabled: Option<String>,
        /// `is-active`.
        active: Option<String>,
        /// Why systemctl could not answer.
        error: Option<String>,
    },
    /// macOS.
    Launchd {
        /// `dev.tau.taud`.
        label: String,
        /// The plist exists.
        installed: bool,
        /// Loaded in the GUI domain.
        loaded: bool,
        /// From `launchctl print`.
        #[serde(flatten)]
        state: LaunchdState,
        /// Why launchctl could not answer.
        error: Option<String>,
    },
    /// No service manager tau knows on this platform.
    None,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    pub running: bool,
    /// Running and done starting its services (so its sockets and control API answer).
    pub ready: bool,
    pub pid: Option<u32>,
    pub started_at: Option<String>,
    pub heartbeat_at: Option<String>,
    /// Seconds since the last heartbeat.
    pub heartbeat_age_s: Option<i64>,
    /// Running, but no heartbeat for more than three intervals (a hung hub).
    pub heartbeat_stale: bool,
    pub heartbeat_seconds: Option<u64>,
    /// Set when the last hub stopped cleanly.
    pub stopped_at: Option<String>,
    /// The last hub stopped without `stopped_at` and no hub runs: the next start records a crash.
    pub unclean_exit: bool,
    pub control_port: Option<u16>,
    pub socket: String,
    pub last_crash: Option<CrashReport>,
    pub service_manager: ManagerStatus,
    pub problems: Vec<String>,
}

fn age_s(at: &str, now: jiff::Timestamp) -> Option<i64> {
    let at: jiff::Timestamp = at.parse().ok()?;
    Some(now.duration_since(at).as_secs())
}

/// Builds the report from a probe at time `now`.
pub fn report(
    probe: HubProbe,
    socket: String,
    manager: ManagerStatus,
    now: jiff::Timestamp,
) -> StatusReport {
    let state: Option<&HubState> = probe.state.as_ref();
    let heartbeat_age_s = state
        .filter(|_| probe.running)
        .and_then(|s| age_s(&s.heartbeat_at, now));
    let interval = state.map(|s| s.heartbeat_seconds);
    let heartbeat_stale = match (heartbeat_age_s, interval) {
        (Some(age), Some(every)) => {
            age > i64::try_from(every.saturating_mul(3)).unwrap_or(i64::MAX)
        }
        _ => false,
    };
    StatusReport {
        running: probe.running,
        ready: probe.running
            && state.is_some_and(|s| s.ready_at.is_some() || s.listening_port.is_some()),
        pid: probe.pid,
        started_at: state.map(|s| s.started_at.clone()),
        heartbeat_at: state.map(|s| s.heartbeat_at.clone()),
        heartbeat_age_s,
        heartbeat_stale,
        heartbeat_seconds: interval,
        stopped_at: state.and_then(|s| s.stopped_at.clone()),
        unclean_exit: !probe.running && state.is_some_and(|s| s.stopped_at.is_none()),
        control_port: state.and_then(|s| s.listening_port.or(Some(s.control_port))),
        socket,
        last_crash: probe.last_crash,
        service_manager: manager,
        problems: probe.problems,
    }
}

fn duration(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m {}s", secs / 60, secs % 60),
        3600..86400 => format!("{}h {}m", secs / 3600, (secs % 3600) / 60),
        _ => format!("{}d {}h", secs / 86400, (secs % 86400) / 3600),
    }
}

/// Writes the report as text.
pub fn write_text(
    report: &StatusReport,
    now: jiff::Timestamp,
    out: &mut dyn Write,
) -> io::Result<()> {
    if report.running {
        write_running(report, now, out)?;
    } else {
        write_not_running(report, out)?;
    }
    match &report.last_crash {
        Some(crash) => writeln!(
            out,
            "  last crash: {} (pid {}): {}",
            crash.detected_at, crash.pid, crash.reason
        )?,
        None => writeln!(out, "  last crash: none")?,
    }
    if let Some(line) = service_manager_line(&report.service_manager) {
        writeln!(out, "{line}")?;
    }
    for problem in &report.problems {
        writeln!(out, "  problem:    {problem}")?;
    }
    Ok(())
}

/// The lines of a running hub: pid, start, heartbeat, where it listens.
fn write_running(
    report: &StatusReport,
    now: jiff::Timestamp,
    out: &mut dyn Write,
) -> io::Result<()> {
    let pid = report
        .pid
        .map(|p| format!(" (pid {p})"))
        .unwrap_or_default();
    if report.ready {
        writeln!(out, "tau hub: running{pid}")?;
    } else {
        writeln!(
            out,
            "tau hub: starting{pid}: its services are not all up yet, so clients may not connect"
        )?;
    }
    if let Some(started) = &report.started_at {
        let up = age_s(started, now).map(duration).unwrap_or_default();
        writeln!(out, "  started:    {started} (up {up})")?;
    }
    if let (Some(age), Some(every)) = (report.heartbeat_age_s, report.heartbeat_seconds) {
        let stale = if report.heartbeat_stale {
            " (STALE: the hub may be hung)"
        } else {
            ""
        };
        writeln!(
            out,
            "  heartbeat:  {} ago, every {every}s{stale}",
            duration(age)
        )?;
    }
    if let Some(port) = report.control_port {
        writeln!(out, "  control:    http://127.0.0.1:{port}")?;
    }
    writeln!(out, "  socket:     {}", report.socket)
}

/// The lines of a hub that is not running: how the last one stopped.
fn write_not_running(report: &StatusReport, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "tau hub: not running")?;
    if let Some(stopped) = &report.stopped_at {
        writeln!(out, "  stopped cleanly at {stopped}")?;
    } else if report.unclean_exit {
        let seen = report.heartbeat_at.as_deref().unwrap_or("?");
        writeln!(
            out,
            "  the last hub (pid {}) did not stop cleanly (last heartbeat {seen}); the next start records a crash report",
            report.pid.map_or_else(|| "?".to_owned(), |p| p.to_string())
        )?;
    }
    Ok(())
}

/// The service manager's line (systemd or launchd); `None` on a platform without one.
fn service_manager_line(manager: &ManagerStatus) -> Option<String> {
    match manager {
        ManagerStatus::Systemd {
            unit,
            installed,
            enabled,
            active,
            error,
        } => {
            let what = match (installed, error) {
                (false, _) => "not installed (`tau hub install`)".to_owned(),
                (true, Some(e)) => format!("installed; systemctl: {e}"),
                (true, None) => format!(
                    "{}, {}",
                    enabled.as_deref().unwrap_or("?"),
                    active.as_deref().unwrap_or("?")
                ),
            };
            Some(format!("  systemd:    {unit} {what}"))
        }
        ManagerStatus::Launchd {
            label,
            installed,
            loaded,
            state,
            error,
        } => {
            let what = match (installed, loaded, error) {
                (_, _, Some(e)) => format!("launchctl: {e}"),
                (false, false, None) => "not installed (`tau hub install`)".to_owned(),
                (true, false, None) => "installed, not loaded".to_owned(),
                (_, true, None) => {
                    let mut parts = vec![format!(
                        "loaded, {}",
                        state.state.as_deref().unwrap_or("state unknown")
                    )];
                    if let Some(pid) = state.pid {
                        parts.push(format!("pid {pid}"));
                    }
                    if let Some(code) = &state.last_exit {
                        parts.push(format!("last exit {code}"));
                    }
                    parts.join(", ")
                }
            };
            Some(format!("  launchd:    {label} {what}"))
        }
        ManagerStatus::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_api::hub_files::FORMAT_VERSION;

    fn now() -> jiff::Timestamp {
        "2026-01-01T00:10:00Z".parse().unwrap()
    }

    fn state(heartbeat: &str, stopped: Option<&str>) -> HubState {
        HubState {
            version: FORMAT_VERSION,
            pid: 77,
            started_at: "2026-01-01T00:00:00Z".into(),
            heartbeat_at: heartbeat.into(),
            stopped_at: stopped.map(Into::into),
            heartbeat_seconds: 30,
            control_port: 7877,
            listening_port: Some(7877),
            // As a hub older than `ready_at` wrote it: the port alone says it started.
            ready_at: None,
            profile: "home".into(),
            role: "hub".into(),
            tau_version: "0.1.0".into(),
        }
    }

    fn systemd() -> ManagerStatus {
        ManagerStatus::Systemd {
            unit: "taud.service".into(),
            installed: true,
            enabled: Some("enabled".into()),
            active: Some("active".into()),
            error: None,
        }
    }

    fn text(r: &StatusReport) -> String {
        let mut out = Vec::new();
        write_text(r, now(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn running_hub_with_a_fresh_heartbeat() {
        let probe = HubProbe {
            running: true,
            pid: Some(77),
            state: Some(state("2026-01-01T00:09:55Z", None)),
            ..HubProbe::default()
        };
        let r = report(probe, "/d/hub/taud.sock".into(), systemd(), now());
        assert_eq!(r.heartbeat_age_s, Some(5));
        assert!(!r.heartbeat_stale);
        let t = text(&r);
        assert!(t.starts_with("tau hub: running (pid 77)\n"), "{t}");
        assert!(t.contains("heartbeat:  5s ago, every 30s\n"), "{t}");
        assert!(t.contains("up 10m 0s"), "{t}");
        assert!(
            t.contains("systemd:    taud.service enabled, active"),
            "{t}"
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["running"], true);
        assert_eq!(json["service_manager"]["kind"], "systemd");
        assert_eq!(json["heartbeat_age_s"], 5);
    }

    #[test]
    fn a_silent_hub_is_stale() {
        let probe = HubProbe {
            running: true,
            pid: Some(77),
            state: Some(state("2026-01-01T00:08:00Z", None)),
            ..HubProbe::default()
        };
        let r = report(probe, "s".into(), ManagerStatus::None, now());
        assert!(r.heartbeat_stale);
        assert!(text(&r).contains("STALE"));
    }

    #[test]
    fn stopped_and_crashed_hubs() {
        let clean = HubProbe {
            state: Some(state("2026-01-01T00:05:00Z", Some("2026-01-01T00:05:01Z"))),
            ..HubProbe::default()
        };
        let r = report(clean, "s".into(), ManagerStatus::None, now());
        assert!(!r.unclean_exit);
        assert!(text(&r).contains("stopped cleanly at 2026-01-01T00:05:01Z"));

        let crashed = HubProbe {
            state: Some(state("2026-01-01T00:05:00Z", None)),
            last_crash: Some(CrashReport {
                version: FORMAT_VERSION,
                detected_at: "2025-12-31T00:00:00Z".into(),
                reason: "unexpected exit (no clean shutdown)".into(),
                pid: 5,
                started_at: "a".into(),
                heartbeat_at: "b".into(),
            }),
            ..HubProbe::default()
        };
        let r = report(crashed, "s".into(), ManagerStatus::None, now());
        assert!(r.unclean_exit);
        assert_eq!(
            r.heartbeat_age_s, None,
            "no age for a hub that is not running"
        );
        let t = text(&r);
        assert!(t.starts_with("tau hub: not running\n"), "{t}");
        assert!(t.contains("did not stop cleanly"), "{t}");
        assert!(
            t.contains("last crash: 2025-12-31T00:00:00Z (pid 5): unexpected exit"),
            "{t}"
        );
    }

    #[test]
    fn launchd_lines() {
        let manager = ManagerStatus::Launchd {
            label: "dev.tau.taud".into(),
            installed: true,
            loaded: true,
            state: LaunchdState {
                state: Some("running".into()),
                pid: Some(9),
                last_exit: Some("0".into()),
            },
            error: None,
        };
        let r = report(HubProbe::default(), "s".into(), manager, now());
        assert!(text(&r).contains("launchd:    dev.tau.taud loaded, running, pid 9, last exit 0"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["service_manager"]["kind"], "launchd");
        assert_eq!(json["service_manager"]["pid"], 9);
    }
}
