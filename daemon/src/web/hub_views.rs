//! What the page shows of the hub beside its sessions, as JSON for a signed-in device: the
//! routines with their last firings (`GET /api/routines`, read from the hub core as
//! `ListRoutines` and `RoutineHistory` read them) and the paired nodes with whether each is live
//! (`GET /api/nodes`, the node registry's public view, as `tau node list` reads it).
//!
//! Invariants: read-only (nothing here changes the hub); every answer passes the guard and
//! [`signed_in`] first; at most [`LAST_FIRINGS`] firings per routine, newest first; routines
//! that are off answer `enabled: false` with the reason rather than an error, so the page can say
//! why; a node's key fingerprint and address are not sent (the page has no use for them); every
//! text a person reads (a routine's name, schedule, action and firing details, a node's name and
//! tool names, the reason routines are off) leaves with its hiding characters written visibly
//! (`tau_api::display::escape_hidden`, as the event JSON sends a tool's name or a message).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tau_api::display::escape_hidden;

use super::WebState;
use super::api::core_error;
use super::signin::signed_in;
use crate::hub::CoreError;
use crate::node::NodeView;
use crate::routine::{Firing, RoutineView};

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
            let problem = escape_hidden(&problem);
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
        routines.push(routine(view, &firings));
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
    let nodes: Vec<Value> = views.iter().map(node).collect();
    Json(json!({"ok": true, "nodes": nodes})).into_response()
}

/// A routine as the page lists it, with its newest [`LAST_FIRINGS`] firings (`firings` oldest
/// first, as the history keeps them).
fn routine(view: &RoutineView, firings: &[Firing]) -> Value {
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
                "detail": escape_hidden(&f.detail),
            })
        })
        .collect();
    json!({
        "name": escape_hidden(&view.routine.name),
        "schedule": escape_hidden(&view.schedule_text),
        "action": escape_hidden(&view.routine.action.describe()),
        "paused": view.routine.paused,
        "next_firing": view.next_firing.map(|t| t.to_string()),
        "last_firings": last,
    })
}

/// A paired node as the page lists it: the tools it lends under the names the model sees.
fn node(node: &NodeView) -> Value {
    let tools: Vec<String> = node
        .tools
        .iter()
        .filter_map(|t| t.offered_as.as_deref())
        .map(escape_hidden)
        .collect();
    json!({
        "name": escape_hidden(&node.name),
        "live": node.live,
        "last_seen": (!node.last_seen.is_empty()).then_some(node.last_seen.as_str()),
        "state": node.state.as_str(),
        "tools": tools,
    })
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::node::{LentToolView, PeerState};
    use crate::routine::{CatchUp, FiringCause, FiringOutcome, Routine, RoutineAction, Schedule};

    /// A bidirectional override, a tag, a soft hyphen, a zero-width space and a private-use
    /// character, as sent and as the page must receive them.
    const HIDING: &str = "\u{202e}\u{e0041}\u{ad}\u{200b}\u{e000}";
    const SHOWN: &str = r"\u{202e}\u{e0041}\u{ad}\u{200b}\u{e000}";

    #[test]
    fn a_routine_reaches_the_page_with_its_hiding_characters_visible() {
        let schedule = Schedule::every("1h", Timestamp::UNIX_EPOCH).unwrap();
        let action = RoutineAction::Prompt {
            text: format!("water{HIDING}the plants"),
            approval_channel: "cli".into(),
        };
        let name = format!("lamp{HIDING}");
        let record = Routine::new(
            &name,
            schedule,
            action,
            CatchUp::Skip,
            Timestamp::UNIX_EPOCH,
        );
        let view = RoutineView {
            routine: record,
            next_firing: None,
            schedule_text: format!("cron 0 23{HIDING} * * *"),
        };
        let firing = Firing {
            number: 1,
            scheduled: None,
            started_at: Timestamp::UNIX_EPOCH,
            ended_at: None,
            cause: FiringCause::Manual,
            outcome: FiringOutcome::Failed,
            detail: format!("refused{HIDING}"),
        };
        let json = routine(&view, &[firing]);
        assert_eq!(json["name"], format!("lamp{SHOWN}"));
        assert_eq!(json["schedule"], format!("cron 0 23{SHOWN} * * *"));
        assert_eq!(json["last_firings"][0]["detail"], format!("refused{SHOWN}"));
        let action = json["action"].as_str().unwrap();
        assert!(action.starts_with("prompt \"water"), "{action}");
        assert!(action.contains("the plants"), "{action}");
        assert!(
            !action.chars().any(tau_api::display::is_hiding_char),
            "{action}"
        );
    }

    #[test]
    fn a_node_reaches_the_page_with_its_hiding_characters_visible() {
        let lent = |offered_as: String| LentToolView {
            name: "lamp".into(),
            tier: Some(1),
            offered_as: Some(offered_as),
            changed: false,
            description: String::new(),
        };
        let view = NodeView {
            name: format!("pi{HIDING}"),
            live: true,
            last_seen: String::new(),
            address: "127.0.0.1:1".into(),
            state: PeerState::Paired,
            fingerprint: "f".into(),
            tools: vec![
                lent(format!("node__pi__lamp{HIDING}")),
                lent("node__pi__clock".into()),
            ],
        };
        let json = node(&view);
        assert_eq!(json["name"], format!("pi{SHOWN}"));
        assert_eq!(
            json["tools"],
            json!([format!("node__pi__lamp{SHOWN}"), "node__pi__clock"])
        );
        assert_eq!(json["last_seen"], Value::Null);
    }
}
