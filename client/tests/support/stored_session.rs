//! What the scripted hub has on record: the usage table `tau usage` reads, and a stored
//! conversation whose turns stopped and repaired (its messages and `turn_stopped` /
//! `turn_repaired` events, as the real hub stores them) for the resume replay.

use tau_api::proto::v1 as pb;

/// The usage table: one role on one day.
pub fn usage() -> pb::GetUsageResponse {
    pb::GetUsageResponse {
        days: vec![pb::UsageDay {
            date: "2026-12-02".into(),
            roles: vec![pb::RoleUsage {
                role: "brain".into(),
                input_tokens: 1200,
                output_tokens: 300,
                model_calls: 2,
                cost_usd: Some(0.12),
                budget_usd: Some(1.0),
                ..Default::default()
            }],
        }],
        time_zone: "Europe/Istanbul".into(),
    }
}

fn said(index: u64, role: pb::MessageRole, text: &str) -> pb::StoredMessage {
    pb::StoredMessage {
        index,
        role: role as i32,
        content: vec![pb::ContentBlock {
            block: Some(pb::content_block::Block::Text(text.into())),
        }],
        created_at: format!("2026-12-01T10:00:0{index}Z"),
    }
}

/// A conversation of three turns: the first hit its model call limit, the second began by
/// repairing the history and ended normally, the third's model call failed.
pub fn messages() -> Vec<pb::StoredMessage> {
    use pb::MessageRole::{Assistant, User};
    vec![
        said(0, User, "first question"),
        said(1, Assistant, "thinking about it"),
        said(2, User, "second question"),
        said(3, Assistant, "second answer"),
        said(4, User, "third question"),
    ]
}

/// The events of [`messages`], each placed by its `before_message`.
pub fn events() -> Vec<pb::StoredEvent> {
    let event = |kind: &str, json: &str| pb::StoredEvent {
        r#type: kind.into(),
        json: json.into(),
    };
    vec![
        event(
            "turn_stopped",
            r#"{"v":1,"type":"turn_stopped","turn_id":"t1","stop_reason":"limit_turns","notice":"The turn stopped after 1 model calls (its limit).","model_calls":1,"session_id":"s","channel":"terminal","before_message":2}"#,
        ),
        event(
            "turn_repaired",
            r#"{"v":1,"type":"turn_repaired","turn_id":"t2","notice":"The turn stopped after 1 model calls (its limit).","session_id":"s","channel":"terminal","before_message":2}"#,
        ),
        event(
            "turn_stopped",
            r#"{"v":1,"type":"turn_stopped","turn_id":"t3","stop_reason":"error","notice":"The model call failed: boom","model_calls":1,"session_id":"s","channel":"terminal","before_message":5}"#,
        ),
    ]
}
