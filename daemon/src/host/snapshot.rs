//! The hub's status: the domain snapshot behind `GET /status` and `tau.v1.Tau/GetStatus`.
//!
//! Invariants: the core keys (role, profile, version, started_at, heartbeat_at, uptime_s,
//! last_crash, approvals_pending, nodes, pid) always come from the hub, and so does `services`
//! (each hub service started, skipped or failed, with its error; [`super::Hub::status_json`] adds
//! it ahead of every other source); a status source may add keys but never replace those.

use serde::Serialize;
use serde_json::{Map, Value};
use tau_api::hub_files::CrashReport;

/// A snapshot of the hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HubStatus {
    /// Host role (hub, node).
    pub role: String,
    /// Installation profile.
    pub profile: String,
    /// tau's version.
    pub version: String,
    /// When this hub started (RFC 3339, UTC).
    pub started_at: String,
    /// Its last heartbeat (RFC 3339, UTC).
    pub heartbeat_at: String,
    /// Seconds since start.
    pub uptime_s: u64,
    /// The latest crash report, if any hub before this one died.
    pub last_crash: Option<CrashReport>,
    /// Tier-2 approvals waiting for a person.
    pub approvals_pending: u32,
    /// Live nodes the hub knows of.
    pub nodes: Vec<String>,
    /// The hub's process id.
    pub pid: u32,
}

/// Adds keys to `/status`.
pub type StatusSource = std::sync::Arc<dyn Fn() -> Map<String, Value> + Send + Sync>;

impl HubStatus {
    /// The JSON of `/status`: the core keys, then what each source adds (core keys win; the
    /// first source to claim a key keeps it).
    pub fn to_json(&self, sources: &[StatusSource]) -> Value {
        let mut object = match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            Ok(_) | Err(_) => Map::new(),
        };
        for source in sources {
            for (key, value) in source() {
                if object.contains_key(&key) {
                    tracing::debug!(%key, "a status source tried to replace an existing key; ignored");
                    continue;
                }
                object.insert(key, value);
            }
        }
        Value::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn status() -> HubStatus {
        HubStatus {
            role: "hub".into(),
            profile: "home".into(),
            version: "0.1.0".into(),
            started_at: "a".into(),
            heartbeat_at: "b".into(),
            uptime_s: 3,
            last_crash: None,
            approvals_pending: 0,
            nodes: vec![],
            pid: 9,
        }
    }

    #[test]
    fn sources_add_keys_but_never_replace_core_ones() {
        let telegram: StatusSource = Arc::new(|| {
            let mut m = Map::new();
            m.insert("telegram".into(), serde_json::json!({"connected": true}));
            m.insert("role".into(), Value::String("evil".into()));
            m
        });
        let json = status().to_json(&[telegram]);
        assert_eq!(json["role"], "hub");
        assert_eq!(json["telegram"]["connected"], true);
        assert_eq!(json["last_crash"], Value::Null);
        assert_eq!(json["uptime_s"], 3);
    }
}
