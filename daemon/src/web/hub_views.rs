//! What the page shows of the hub beside its sessions, as JSON for a signed-in device: the
//! routines with their last firings (`GET /api/routines`, read from the hub core as
//! `ListRoutines` and `RoutineHistory` read them) and the paired nodes with whether each is live
//! (`GET /api/nodes`, the node registry's public view, as `tau node list` reads it).
//!
//! Invariants: read-only (nothing here changes the hub); every answer passes the guard and
//! [`signed_in`] first; at most [`LAST_FIRINGS`] firings per routine, newest first; routines
//! that are off answer `enabled: false` with the reason rather than an error, so the page can say
//! why; a node's key fingerprint and address are not sent (the page has no use for them).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::WebState;
use super::api::core_error;
use super::signin::signed_in;
use crate::hub::CoreError;

/// Firings listed per routine at most.
pub const LAST_FIRINGS: usize = 5;

/// `GET /api/routines`: every routine, its schedule, next firing and last firings.
pub(super) async fn routines(State(state): State<Arc<WebState>>, headers: HeaderMap) -> Response {
    if let Err(refused) = signed_in(&state, &headers) {
        return refused.into_response();
    }
    let core = &state.core;
    let views = match core.list_routines() {
        Ok(views) => views,
        Err(CoreError::FailedPrecondition(problem)) => {
            return Json(json!({"ok": true, "enabled": false, "problem": problem, "routines": []}))
                .into_response();
        }
        Err(e) => return core_error(&e),
    };
    let mut routines = Vec::with_capacity(views.len());
    for view in &views {
        let name = &view.routine.name;
        let firings = match core.routine_history(name) {
            Ok(firings) => firings,
            // Removed between the two reads: not listed.
            Err(CoreError::NotFound(_)) => continue,
            Err(e) => return core_error(&e),
        };
        let last: Vec<Value> = firings
            .iter()
            .rev()
            .take(LAST_FIRINGS)
            .map(|f| {
                json!({
                    "number": f.number,
                    "cause": f.cause.as_str(),
                    "outcome": f.outcome.as_str(),
                    "started_at": f.started_at.to_string(),
                    "ended_at": f.ended_at.map(|t| t.to_string()),
                    "detail": f.detail,
                })
            })
            .collect();
        routines.push(json!({
            "name": name,
            "schedule": view.schedule_text,
            "action": view.routine.action.describe(),
            "paused": view.routine.paused,
            "next_firing": view.next_firing.map(|t| t.to_string()),
            "last_firings": last,
        }));
    }
    Json(json!({"ok": true, "enabled": true, "routines": routines})).into_response()
}

/// `GET /api/nodes`: the paired nodes, live ones first, with the tools each lends.
pub(super) async fn nodes(State(state): State<Arc<WebState>>, headers: HeaderMap) -> Response {
    if let Err(refused) = signed_in(&state, &headers) {
        return refused.into_response();
    }
    let mut views = state
        .nodes
        .as_ref()
        .map(|registry| registry.list())
        .unwrap_or_default();
    views.sort_by(|a, b| b.live.cmp(&a.live).then_with(|| a.name.cmp(&b.name)));
    let nodes: Vec<Value> = views
        .iter()
        .map(|node| {
            let tools: Vec<&str> = node
                .tools
                .iter()
                .filter_map(|t| t.offered_as.as_deref())
                .collect();
            json!({
                "name": node.name,
                "live": node.live,
                "last_seen": (!node.last_seen.is_empty()).then_some(node.last_seen.as_str()),
                "state": node.state.as_str(),
                "tools": tools,
            })
        })
        .collect();
    Json(json!({"ok": true, "nodes": nodes})).into_response()
}
