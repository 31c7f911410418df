//! Writing `state.json`: at start, on every heartbeat, and with `stopped_at` on a clean stop.
//!
//! Invariants: every write is atomic (never a half-written file); `stopped_at` is written only by
//! a clean stop, so its absence at the next start means the hub died.

use std::io;
use std::path::PathBuf;

use tau_api::hub_files::{FORMAT_VERSION, HubState};

use super::files::{now_rfc3339, write_atomic};
use super::handle::Hub;

/// `state.json` could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {path}: {source}")]
pub struct StateError {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    pub source: io::Error,
}

/// The current state of `hub` (with `stopped_at` when given).
pub fn snapshot(hub: &Hub, stopped_at: Option<String>) -> HubState {
    let options = hub.options();
    HubState {
        version: FORMAT_VERSION,
        pid: hub.pid(),
        started_at: hub.started_at().to_owned(),
        heartbeat_at: hub.heartbeat_at(),
        stopped_at,
        heartbeat_seconds: options.heartbeat.as_secs(),
        control_port: options.control_port,
        listening_port: hub.listening_port(),
        ready_at: hub.ready_at(),
        profile: options.profile.clone(),
        role: options.role.clone(),
        tau_version: tau_api::VERSION.to_owned(),
    }
}

/// Writes `state` to the hub's `state.json` (blocking: call it off the async workers).
pub fn write(hub: &Hub, state: &HubState) -> Result<(), StateError> {
    let path = hub.paths().state_file.clone();
    let text = serde_json::to_string_pretty(state).map_err(|e| StateError {
        path: path.clone(),
        source: io::Error::other(e),
    })?;
    write_atomic(&path, text.as_bytes()).map_err(|source| StateError { path, source })
}

/// Records a heartbeat and writes it, off the async workers.
pub async fn heartbeat(hub: &Hub) -> Result<(), StateError> {
    hub.beat();
    write_blocking(hub, None).await
}

/// Writes the final state with `stopped_at` = now.
pub async fn write_stopped(hub: &Hub) -> Result<(), StateError> {
    hub.beat();
    write_blocking(hub, Some(now_rfc3339())).await
}

/// Writes the current state (no `stopped_at`), off the async workers.
pub async fn write_running(hub: &Hub) -> Result<(), StateError> {
    write_blocking(hub, None).await
}

async fn write_blocking(hub: &Hub, stopped_at: Option<String>) -> Result<(), StateError> {
    let state = snapshot(hub, stopped_at);
    let hub = hub.clone();
    let path = hub.paths().state_file.clone();
    match tokio::task::spawn_blocking(move || write(&hub, &state)).await {
        Ok(result) => result,
        Err(join) => Err(StateError {
            path,
            source: io::Error::other(join.to_string()),
        }),
    }
}
