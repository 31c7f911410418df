//! Domain → proto translations for the hub's status.
//!
//! Invariants: pure functions; nothing here fails.

use tau_api::components::HubServiceReport;
use tau_api::hub_files::CrashReport;
use tau_api::proto::v1 as pb;

use crate::host::{Hub, HubStatus};

/// A [`HubStatus`] as a `GetStatusResponse`.
pub fn status(status: HubStatus) -> pb::GetStatusResponse {
    pb::GetStatusResponse {
        profile: status.profile,
        role: status.role,
        version: status.version,
        started_at: status.started_at,
        heartbeat_at: status.heartbeat_at,
        uptime_s: status.uptime_s,
        last_crash: status.last_crash.map(crash),
        approvals_pending: status.approvals_pending,
        nodes: status.nodes,
        pid: status.pid,
        ..pb::GetStatusResponse::default()
    }
}

/// The hub's service reports as `GetStatusResponse.services`.
pub fn services(reports: Vec<HubServiceReport>) -> Vec<pb::HubService> {
    reports
        .into_iter()
        .map(|report| pb::HubService {
            name: report.name,
            state: report.state.as_str().to_owned(),
            detail: report.error.or(report.reason).unwrap_or_default(),
        })
        .collect()
}

/// The channels the hub runs (Telegram), as `GetStatusResponse.channels`.
#[cfg(feature = "hub")]
pub fn channels(hub: &Hub) -> Vec<pb::HubChannel> {
    use crate::host::{TELEGRAM_SERVICE, TelegramChannelService};
    hub.find_service_as::<TelegramChannelService>(TELEGRAM_SERVICE)
        .map(|service| service.report())
        .into_iter()
        .map(|report| pb::HubChannel {
            name: report.name,
            state: report.state,
            error: report.error,
            restarts: report.restarts,
        })
        .collect()
}

/// A build without the `hub` feature runs no channel.
#[cfg(not(feature = "hub"))]
pub fn channels(_hub: &Hub) -> Vec<pb::HubChannel> {
    Vec::new()
}

fn crash(report: CrashReport) -> pb::CrashReport {
    pb::CrashReport {
        detected_at: report.detected_at,
        reason: report.reason,
        pid: report.pid,
        started_at: report.started_at,
        heartbeat_at: report.heartbeat_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_reports_carry_their_state_and_why() {
        let reports: Vec<HubServiceReport> = serde_json::from_value(serde_json::json!([
            {"name": "control-api", "state": "started"},
            {"name": "telegram", "state": "failed", "error": "no token"},
            {"name": "mqtt", "state": "skipped", "reason": "not in [components.hub] services"},
        ]))
        .unwrap();
        let services = services(reports);
        let triples: Vec<(&str, &str, &str)> = services
            .iter()
            .map(|s| (s.name.as_str(), s.state.as_str(), s.detail.as_str()))
            .collect();
        assert_eq!(
            triples,
            vec![
                ("control-api", "started", ""),
                ("telegram", "failed", "no token"),
                ("mqtt", "skipped", "not in [components.hub] services"),
            ]
        );
    }

    #[test]
    fn every_field_is_carried() {
        let s = HubStatus {
            role: "hub".into(),
            profile: "travel".into(),
            version: "1.2.3".into(),
            started_at: "s".into(),
            heartbeat_at: "h".into(),
            uptime_s: 5,
            last_crash: Some(CrashReport {
                version: 1,
                detected_at: "d".into(),
                reason: "r".into(),
                pid: 3,
                started_at: "s0".into(),
                heartbeat_at: "h0".into(),
            }),
            approvals_pending: 2,
            nodes: vec!["pi".into()],
            pid: 9,
        };
        let p = status(s);
        assert_eq!(p.profile, "travel");
        assert_eq!(p.approvals_pending, 2);
        assert_eq!(p.nodes, vec!["pi".to_owned()]);
        assert_eq!(p.pid, 9);
        let c = p.last_crash.unwrap();
        assert_eq!(
            (c.reason.as_str(), c.pid, c.heartbeat_at.as_str()),
            ("r", 3, "h0")
        );
    }
}
