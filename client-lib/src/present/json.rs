//! The JSON-lines form of a turn's events (`tau ask --json`): one object per event with `"type"`
//! and the event's fields, so scripts need no protobuf.
//!
//! Invariants: pure translation of what the hub sent; enum values are written as lower-case names
//! (`approved`, `physical`), never as numbers; every line is one JSON object.

use serde_json::{Value, json};
use tau_api::proto::v1::{self as pb, session_event::Kind};
use tau_api::tiers::tier_number;

use super::names::{resolution_name, tool_status_name};

/// The `accepted` message of StartTurn.
pub fn accepted(accepted: &pb::TurnAccepted) -> Value {
    json!({
        "type": "accepted",
        "session_id": accepted.session_id,
        "turn_id": accepted.turn_id,
        "attachment_id": accepted.attachment_id,
        "duplicate": accepted.duplicate,
        "queued_ahead": accepted.queued_ahead,
    })
}

/// One session event.
pub fn event(event: &pb::SessionEvent) -> Value {
    let mut object = match event.kind.as_ref().map(kind) {
        Some(Value::Object(map)) => map,
        _ => {
            let mut map = serde_json::Map::new();
            map.insert("type".into(), Value::from("unknown"));
            map
        }
    };
    object.insert("seq".into(), Value::from(event.seq));
    object.insert("session_id".into(), Value::from(event.session_id.clone()));
    if !event.turn_id.is_empty() {
        object.insert("turn_id".into(), Value::from(event.turn_id.clone()));
    }
    object.insert("at".into(), Value::from(event.at.clone()));
    Value::Object(object)
}

fn turn(turn: Option<&pb::TurnInfo>) -> Value {
    turn.map_or(Value::Null, |t| {
        json!({"turn_id": t.turn_id, "channel": t.channel, "text": t.text, "accepted_at": t.accepted_at})
    })
}

fn kind(kind: &Kind) -> Value {
    match kind {
        Kind::TurnQueued(q) => {
            json!({"type": "turn_queued", "turn": turn(q.turn.as_ref()), "ahead": q.ahead})
        }
        Kind::TurnStarted(s) => json!({"type": "turn_started", "turn": turn(s.turn.as_ref())}),
        Kind::TextDelta(d) => json!({"type": "text_delta", "text": d.text}),
        Kind::ReasoningDelta(d) => json!({"type": "reasoning_delta", "text": d.text}),
        Kind::ToolUseStarted(t) => {
            json!({"type": "tool_use_started", "tool_use_id": t.tool_use_id, "name": t.name})
        }
        Kind::ToolProgress(p) => json!({
            "type": "tool_progress",
            "tool_use_id": p.tool_use_id,
            "tool": p.tool,
            "message": p.message,
            "progress": p.progress,
            "total": p.total,
        }),
        Kind::ToolCall(c) => json!({
            "type": "tool_call",
            "tool_use_id": c.tool_use_id,
            "tool": c.tool,
            "tier": tier_number(c.tier),
            "status": tool_status_name(c.status),
            "approval": c.approval,
            "result_summary": c.result_summary,
            "duration_ms": c.duration_ms,
            "arguments": c.arguments,
        }),
        Kind::ApprovalRequested(r) => {
            let mut value = pending(r.approval.as_ref());
            if let Value::Object(map) = &mut value {
                map.insert("type".into(), Value::from("approval_requested"));
            }
            value
        }
        Kind::ApprovalResolved(r) => json!({
            "type": "approval_resolved",
            "approval_id": r.approval_id,
            "tool": r.tool,
            "tool_use_id": r.tool_use_id,
            "resolution": resolution_name(r.resolution),
            "decided_by_channel": r.decided_by_channel,
        }),
        Kind::Throttled(t) => json!({"type": "throttled", "delay_ms": t.delay_ms}),
        Kind::OutputDiscarded(_) => json!({"type": "output_discarded"}),
        Kind::TurnEnded(e) => json!({
            "type": "turn_ended",
            "stop_reason": e.stop_reason,
            "text": e.text,
            "model_calls": e.model_calls,
            "notice": e.notice,
            "usage": e.usage.as_ref().map(|u| json!({
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "total_tokens": u.total_tokens,
            })),
        }),
        Kind::Error(e) => json!({
            "type": "error",
            "where": e.r#where,
            "message": e.message,
            "tool": e.tool,
            "tool_use_id": e.tool_use_id,
        }),
        Kind::RoleSwitched(r) => {
            json!({"type": "role_switched", "role": r.role, "previous_role": r.previous_role})
        }
    }
}

/// A pending approval as JSON.
pub fn pending(approval: Option<&pb::PendingApproval>) -> Value {
    approval.map_or(Value::Null, |a| {
        json!({
            "approval_id": a.approval_id,
            "session_id": a.session_id,
            "turn_id": a.turn_id,
            "channel": a.channel,
            "tool": a.tool,
            "tier": tier_number(a.tier),
            "arguments": a.arguments,
            "effect": a.effect,
            "tool_use_id": a.tool_use_id,
            "asked_at": a.asked_at,
            "deadline": a.deadline,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_carry_their_type_and_numbering() {
        let e = pb::SessionEvent {
            seq: 7,
            session_id: "s".into(),
            turn_id: "t".into(),
            at: "now".into(),
            kind: Some(Kind::ToolCall(pb::ToolCallFinished {
                tool_use_id: "tu".into(),
                tool: "demo_physical_action".into(),
                tier: pb::Tier::Physical as i32,
                status: pb::ToolCallStatus::Refused as i32,
                approval: "rejected".into(),
                result_summary: "not approved".into(),
                duration_ms: 0,
                arguments: "{}".into(),
            })),
        };
        let v = event(&e);
        assert_eq!(v["type"], "tool_call");
        assert_eq!(v["seq"], 7);
        assert_eq!(
            v["tier"], 2,
            "the tier people read, as stored events say it"
        );
        assert_eq!(v["status"], "refused");
        assert_eq!(v["turn_id"], "t");
        let none = event(&pb::SessionEvent::default());
        assert_eq!(none["type"], "unknown");
        assert!(none.get("turn_id").is_none());
    }

    #[test]
    fn approvals_and_resolutions_read_as_names() {
        let e = pb::SessionEvent {
            kind: Some(Kind::ApprovalResolved(pb::ApprovalResolved {
                approval_id: "a".into(),
                resolution: pb::ApprovalResolution::ChannelClosed as i32,
                ..Default::default()
            })),
            ..Default::default()
        };
        assert_eq!(event(&e)["resolution"], "channel_closed");
        let e = pb::SessionEvent {
            kind: Some(Kind::ApprovalRequested(pb::ApprovalRequested {
                approval: Some(pb::PendingApproval {
                    approval_id: "a".into(),
                    tier: pb::Tier::Physical as i32,
                    ..Default::default()
                }),
            })),
            ..Default::default()
        };
        let v = event(&e);
        assert_eq!(
            (v["type"].as_str(), v["tier"].as_u64()),
            (Some("approval_requested"), Some(2))
        );
        assert_eq!(resolution_name(99), "unknown");
    }
}
