//! Approvals a hub left pending when it stopped without deciding them (a crash, a kill): at start,
//! each one found pending in a stored session's events is marked expired by restart: an `approval`
//! event with status `expired_by_restart` is appended to the session's events and a warning is
//! logged. Its tool never runs (the agent that asked is gone; the next turn repairs the dangling
//! tool call with "Tool was interrupted.").
//!
//! Invariants: an approval counts as pending when its last `approval` event says `pending`; the
//! appended event copies the pending one (tool, arguments, channel, …) with the new status and an
//! `expired_at` time; a session whose events cannot be read is logged and skipped, never fatal.
//! Cost: one read of the events of every stored session the approval scan mark names (see
//! `scan_mark`), or of every stored session without a usable mark (the first start).
//!
//! How an approval of an earlier hub ended stays readable: [`stored_outcome`] reads it back from
//! the session's events, and a decision on it is answered from that (`approvals::decide`'s
//! `stored_decision`: an approval expired by restart answers `Expired` after any number of
//! restarts, not only after the one that expired it); that read runs through `store_io` and its
//! result is remembered, so it is read at most once per id while remembered. Imports no other
//! part of the hub but its errors, events and the scan mark. Statuses are read and written with the gate's approval
//! vocabulary ([`ApprovalState`]).

use std::collections::HashMap;

use jiff::Timestamp;
use serde_json::Value;
use tracing::warn;

use super::scan_mark::ScanPlan;
use crate::gate::{ApprovalOutcome, ApprovalState};
use crate::hub::error::CoreError;
use crate::hub::events::now_rfc3339;
use crate::store::SessionStore;

/// The status an approval expired by a restart is recorded with.
const EXPIRED_BY_RESTART: ApprovalState = ApprovalState::Ended(ApprovalOutcome::ExpiredByRestart);

/// The stored status of an `approval` event, if it has one this version knows.
fn stored_state(event: &Value) -> Option<ApprovalState> {
    event
        .get("status")
        .and_then(Value::as_str)
        .and_then(ApprovalState::parse)
}

/// What a start-up scan did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    /// The approvals it expired.
    pub expired: Vec<ExpiredApproval>,
    /// Sessions it could not read or write, so the next start must read them again.
    pub unfinished: Vec<String>,
}

/// One approval expired at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredApproval {
    pub session_id: String,
    pub approval_id: String,
    pub tool: String,
}

/// The approvals left pending in `events`, in the order they were asked.
pub fn pending_in(events: &[Value]) -> Vec<Value> {
    let mut order: Vec<String> = Vec::new();
    let mut pending: HashMap<String, Value> = HashMap::new();
    for event in events {
        if event.get("type").and_then(Value::as_str) != Some("approval") {
            continue;
        }
        let Some(id) = event.get("approval_id").and_then(Value::as_str) else {
            continue;
        };
        if stored_state(event) == Some(ApprovalState::Pending) {
            if !pending.contains_key(id) {
                order.push(id.to_owned());
            }
            pending.insert(id.to_owned(), event.clone());
        } else {
            pending.remove(id);
        }
    }
    order
        .into_iter()
        .filter_map(|id| pending.remove(&id))
        .collect()
}

/// How the approval `approval_id` ended according to a session's stored `events`: `None` when it
/// is not there or its last word is still `pending` (asked by this hub, about to be registered).
/// A decision the gate recorded as `error` or `invalid`, or a word this version does not know,
/// never ran its tool and reads as cancelled.
pub fn stored_outcome(events: &[Value], approval_id: &str) -> Option<ApprovalOutcome> {
    let last = events.iter().rev().find(|event| {
        event.get("type").and_then(Value::as_str) == Some("approval")
            && event.get("approval_id").and_then(Value::as_str) == Some(approval_id)
    })?;
    let word = last.get("status").and_then(Value::as_str)?;
    match ApprovalState::parse(word) {
        Some(ApprovalState::Pending) => None,
        Some(ApprovalState::Ended(
            outcome @ (ApprovalOutcome::Approved
            | ApprovalOutcome::Rejected
            | ApprovalOutcome::Timeout
            | ApprovalOutcome::ChannelClosed
            | ApprovalOutcome::ExpiredByRestart),
        )) => Some(outcome),
        Some(ApprovalState::Ended(
            ApprovalOutcome::Error | ApprovalOutcome::Invalid | ApprovalOutcome::Cancelled,
        ))
        | None => Some(ApprovalOutcome::Cancelled),
    }
}

/// The sessions a plan reads, from the store's listing.
fn planned_sessions(store: &dyn SessionStore, plan: &ScanPlan) -> Result<Vec<String>, CoreError> {
    let since: Option<Timestamp> = match plan {
        ScanPlan::Sessions(ids) => return Ok(ids.iter().cloned().collect()),
        ScanPlan::All => None,
        ScanPlan::Since(since) => Some(*since),
    };
    Ok(store
        .list_sessions()?
        .into_iter()
        .filter(|info| since.is_none_or(|since| info.updated_at >= since))
        .map(|info| info.session_id)
        .collect())
}

/// Marks every approval left pending in the store as expired by restart (blocking), reading the
/// sessions `plan` names.
pub fn expire_stale_approvals(
    store: &dyn SessionStore,
    plan: &ScanPlan,
) -> Result<ScanOutcome, CoreError> {
    let mut expired = Vec::new();
    let mut unfinished = Vec::new();
    for session_id in planned_sessions(store, plan)? {
        let events = match store.read_events(&session_id) {
            Ok(events) => events,
            Err(crate::store::SessionError::SessionNotFound(_)) => continue,
            Err(error) => {
                warn!(%session_id, "cannot read the session's events to expire its approvals: {error}");
                unfinished.push(session_id);
                continue;
            }
        };
        for mut record in pending_in(&events) {
            let approval_id = record
                .get("approval_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let tool = record
                .get("tool")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if let Value::Object(map) = &mut record {
                map.insert("status".into(), Value::from(EXPIRED_BY_RESTART.as_str()));
                map.insert("expired_at".into(), Value::from(now_rfc3339()));
            }
            if let Err(error) = store.append_event(&session_id, &record) {
                warn!(%session_id, %approval_id, "cannot record an approval as expired by restart: {error}");
                if !unfinished.contains(&session_id) {
                    unfinished.push(session_id.clone());
                }
            }
            warn!(
                %session_id,
                %approval_id,
                %tool,
                "approval expired by restart: the hub stopped while it was pending; the tool did not run"
            );
            expired.push(ExpiredApproval {
                session_id: session_id.clone(),
                approval_id,
                tool,
            });
        }
    }
    Ok(ScanOutcome {
        expired,
        unfinished,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_recorded_status_is_part_of_the_approval_vocabulary() {
        assert_eq!(
            serde_json::to_value(EXPIRED_BY_RESTART).unwrap(),
            json!("expired_by_restart")
        );
    }

    #[test]
    fn a_stored_outcome_is_the_last_word_about_the_approval() {
        let events = vec![
            json!({"type": "approval", "approval_id": "a1", "status": "pending"}),
            json!({"type": "approval", "approval_id": "a2", "status": "pending"}),
            json!({"type": "approval", "approval_id": "a1", "status": "expired_by_restart"}),
            json!({"type": "approval", "approval_id": "a3", "status": "approved"}),
            json!({"type": "approval", "approval_id": "a4", "status": "error"}),
            json!({"type": "approval", "approval_id": "a5", "status": "rejected"}),
            json!({"type": "approval", "approval_id": "a6", "status": "timeout"}),
            json!({"type": "approval", "approval_id": "a7", "status": "invalid"}),
            json!({"type": "approval", "approval_id": "a8", "status": "cancelled"}),
            json!({"type": "approval", "approval_id": "a9", "status": "a word from the future"}),
        ];
        for (id, outcome) in [
            ("a5", ApprovalOutcome::Rejected),
            ("a6", ApprovalOutcome::Timeout),
            ("a7", ApprovalOutcome::Cancelled),
            ("a8", ApprovalOutcome::Cancelled),
            ("a9", ApprovalOutcome::Cancelled),
        ] {
            assert_eq!(stored_outcome(&events, id), Some(outcome), "{id}");
        }
        assert_eq!(
            stored_outcome(&events, "a1"),
            Some(ApprovalOutcome::ExpiredByRestart)
        );
        assert_eq!(stored_outcome(&events, "a2"), None, "still pending");
        assert_eq!(
            stored_outcome(&events, "a3"),
            Some(ApprovalOutcome::Approved)
        );
        assert_eq!(
            stored_outcome(&events, "a4"),
            Some(ApprovalOutcome::Cancelled)
        );
        assert_eq!(stored_outcome(&events, "nope"), None);
    }

    #[test]
    fn only_approvals_whose_last_word_is_pending_are_left() {
        let events = vec![
            json!({"type": "approval", "approval_id": "a1", "status": "pending"}),
            json!({"type": "tool_call", "tool": "x"}),
            json!({"type": "approval", "approval_id": "a2", "status": "pending", "tool": "lamp"}),
            json!({"type": "approval", "approval_id": "a1", "status": "approved"}),
            json!({"type": "approval", "approval_id": "a3", "status": "pending"}),
            json!({"type": "approval", "status": "pending"}),
        ];
        let left: Vec<_> = pending_in(&events)
            .iter()
            .map(|e| e["approval_id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(left, vec!["a2", "a3"]);
        assert!(pending_in(&[]).is_empty());
    }
}
