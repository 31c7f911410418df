//! What a running hub says about its services (the `services` key of `GET /status`), and how a
//! client merges that into the built-in table ([`merge_hub_report`]).
//!
//! The hub writes one [`HubServiceReport`] per registered service, in start order; the client
//! reads them back with the same types, so the JSON shape is defined once here.
//!
//! Invariants: a report's `error` is set exactly when its state is [`ServiceState::Failed`]
//! (a skipped service may carry a `reason`); merging never switches on a component the table
//! marks disabled except from the hub's own word that it started, and never drops a table row:
//! a service the hub runs that the table does not list is added as a row of its own.

use serde::{Deserialize, Serialize};

use super::{BUILTIN_DISTRIBUTION, ComponentKind, ComponentState};

/// How one hub service came out when the hub started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceState {
    /// Built and started; it is running.
    Started,
    /// Not built: `[components.hub] services` leaves it out (or the hub stopped before it).
    Skipped,
    /// It failed to build or to start; the hub runs on without it.
    Failed,
}

impl ServiceState {
    /// `started`, `skipped` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceState::Started => "started",
            ServiceState::Skipped => "skipped",
            ServiceState::Failed => "failed",
        }
    }
}

/// One hub service as the running hub reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HubServiceReport {
    /// The service's name (`control-api`, `grpc`, …).
    pub name: String,
    /// How it came out.
    pub state: ServiceState,
    /// Why it failed (only for [`ServiceState::Failed`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it was skipped (only for [`ServiceState::Skipped`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl HubServiceReport {
    /// A service that started.
    pub fn started(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            state: ServiceState::Started,
            error: None,
            reason: None,
        }
    }

    /// A service that was not built, with why.
    pub fn skipped(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            state: ServiceState::Skipped,
            error: None,
            reason: Some(reason.into()),
        }
    }

    /// A service that failed to build or start, with the error in one line.
    pub fn failed(name: impl Into<String>, error: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            state: ServiceState::Failed,
            error: Some(error.into()),
            reason: None,
        }
    }
}

/// The hub services of a `GET /status` answer (its `services` key); `None` when the key is
/// missing or not a list of reports (an older hub).
pub fn reports_from_status(status: &serde_json::Value) -> Option<Vec<HubServiceReport>> {
    serde_json::from_value(status.get("services")?.clone()).ok()
}

/// Merges what a running hub reports into `states` (from
/// [`component_states`](super::component_states)): each hub-service row the hub reports takes the
/// hub's word (enabled when started, a failure as its `load_error`, a skip as disabled with the
/// reason); a service the hub reports that the table lacks is appended to the hub-service rows.
pub fn merge_hub_report(states: &mut Vec<ComponentState>, reports: &[HubServiceReport]) {
    for report in reports {
        let row = states
            .iter_mut()
            .find(|s| s.kind == ComponentKind::HubService && s.name == report.name);
        match row {
            Some(row) => apply(row, report),
            None => {
                let mut row = ComponentState {
                    group: ComponentKind::HubService.group(),
                    kind: ComponentKind::HubService,
                    name: report.name.clone(),
                    distribution: BUILTIN_DISTRIBUTION.to_string(),
                    version: crate::VERSION.to_string(),
                    enabled: false,
                    tier: None,
                    note: None,
                    load_error: None,
                };
                apply(&mut row, report);
                let at = states
                    .iter()
                    .rposition(|s| s.kind == ComponentKind::HubService)
                    .map_or(states.len(), |i| i + 1);
                states.insert(at, row);
            }
        }
    }
}

fn apply(row: &mut ComponentState, report: &HubServiceReport) {
    match report.state {
        ServiceState::Started => {
            row.enabled = true;
            row.load_error = None;
            row.note = Some(match row.note.take() {
                Some(note) => format!("{note}; running in the hub"),
                None => "running in the hub".to_string(),
            });
        }
        ServiceState::Skipped => {
            row.enabled = false;
            row.note = Some(format!(
                "skipped by the hub: {}",
                report.reason.as_deref().unwrap_or("not enabled")
            ));
        }
        ServiceState::Failed => {
            row.enabled = false;
            row.load_error = Some(
                report
                    .error
                    .clone()
                    .unwrap_or_else(|| "failed (the hub gave no reason)".to_string()),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::component_states;
    use crate::config::{Config, KnownNames};
    use crate::env::Env;
    use std::path::Path;

    fn states() -> Vec<ComponentState> {
        let cfg = Config::from_toml_str(
            "",
            Path::new("/h/tau.toml"),
            &Env::new(),
            &KnownNames::builtin(),
        )
        .unwrap();
        component_states(&cfg)
    }

    #[test]
    fn the_hub_word_wins_and_unknown_services_are_added() {
        let mut s = states();
        let before = s.len();
        merge_hub_report(
            &mut s,
            &[
                HubServiceReport::started("control-api"),
                HubServiceReport::failed("grpc", "cannot bind /x/taud.sock: denied"),
                HubServiceReport::failed("telegram", "no token"),
                HubServiceReport::failed("relay", "no such thing"),
            ],
        );
        assert_eq!(s.len(), before + 1);
        let get = |n: &str| s.iter().find(|r| r.name == n).unwrap();
        assert!(get("control-api").enabled);
        assert!(
            get("control-api")
                .note
                .as_deref()
                .unwrap()
                .contains("running")
        );
        assert!(!get("grpc").enabled);
        assert_eq!(
            get("grpc").load_error.as_deref(),
            Some("cannot bind /x/taud.sock: denied")
        );
        assert_eq!(get("telegram").load_error.as_deref(), Some("no token"));
        let relay = get("relay");
        assert_eq!(relay.kind, ComponentKind::HubService);
        assert_eq!(relay.load_error.as_deref(), Some("no such thing"));
        assert_eq!(
            s.last().unwrap().kind,
            ComponentKind::HubService,
            "appended among the hub services"
        );
    }

    #[test]
    fn reports_round_trip_through_status_json() {
        let reports = vec![
            HubServiceReport::started("control-api"),
            HubServiceReport::skipped("relay", "not in [components.hub] services"),
            HubServiceReport::failed("grpc", "boom"),
        ];
        let status = serde_json::json!({"role": "hub", "services": reports});
        assert_eq!(status["services"][1]["state"], "skipped");
        assert!(status["services"][0].get("error").is_none());
        assert_eq!(reports_from_status(&status), Some(reports));
        assert_eq!(
            reports_from_status(&serde_json::json!({"role": "hub"})),
            None
        );
    }
}
