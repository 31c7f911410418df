//! A stored agent event (`ReadEvents`' `StoredEvent`, JSON with a type) read once into a typed
//! [`Stored`]: what the presenter ([`super::Presenter::stored`]) shows and `/resume`'s history
//! places.
//!
//! Invariants: reading never fails: a record that is not JSON, or has a field of the wrong type,
//! keeps its type and loses its facts (each `None`); an unknown type keeps its name. Nothing here
//! formats.

use serde::Deserialize;
use tau_api::proto::v1 as pb;

/// A stored agent event, as `ReadEvents` gives it, read once. Unknown types keep their name.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// A finished tool call.
    ToolCall(ToolCallFacts),
    /// An approval's state (`pending`, `approved`, …).
    Approval(ApprovalFacts),
    /// An error the agent reported; `tool` when it concerns a call.
    Error {
        message: Option<String>,
        tool: Option<String>,
    },
    /// A turn that stopped early: why, its notice, its model calls, and the index of the first
    /// message stored after it.
    TurnStopped {
        stop_reason: Option<String>,
        notice: Option<String>,
        model_calls: Option<u64>,
        before_message: Option<u64>,
    },
    /// A turn that began by repairing an unfinished history.
    TurnRepaired {
        notice: Option<String>,
        before_message: Option<u64>,
    },
    /// Another type, by name.
    Other(String),
}

/// What a finished tool call says, live or stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ToolCallFacts {
    pub tool: Option<String>,
    /// The tier people read (0-2).
    pub tier: Option<u8>,
    /// `success`, `error`, `refused`, `cancelled`.
    pub status: Option<String>,
    /// How it was allowed: `approved`, `exempt`, `rejected`, …
    pub approval: Option<String>,
    pub duration_ms: Option<u64>,
    /// A short summary of the result, or why it did not run.
    pub result_summary: Option<String>,
    /// The model's id of the call (what ties it to its stored result message).
    pub tool_use_id: Option<String>,
}

/// What an approval's record says, live or stored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ApprovalFacts {
    pub tool: Option<String>,
    /// `pending`, or how it ended: `approved`, `rejected`, `timeout`, `expired_by_restart`, …
    pub status: Option<String>,
    /// The tier people read (0-2).
    pub tier: Option<u8>,
    /// The channel it was asked on.
    pub channel: Option<String>,
}

impl ToolCallFacts {
    /// A live tool call's facts.
    pub fn live(call: &pb::ToolCallFinished) -> Self {
        Self {
            tool: Some(call.tool.clone()),
            tier: tau_api::tiers::tier_number(call.tier),
            status: Some(super::names::tool_status_name(call.status).to_owned()),
            approval: Some(call.approval.clone()),
            duration_ms: Some(call.duration_ms),
            result_summary: Some(call.result_summary.clone()),
            tool_use_id: Some(call.tool_use_id.clone()),
        }
    }
}

impl ApprovalFacts {
    /// A live question's facts (`pending`).
    pub fn requested(approval: &pb::PendingApproval) -> Self {
        Self {
            tool: Some(approval.tool.clone()),
            status: Some("pending".to_owned()),
            tier: tau_api::tiers::tier_number(approval.tier),
            channel: Some(approval.channel.clone()),
        }
    }

    /// A live resolution's facts (its resolution as the stored status word).
    pub fn resolved(resolved: &pb::ApprovalResolved) -> Self {
        Self {
            tool: Some(resolved.tool.clone()),
            status: Some(super::names::resolution_name(resolved.resolution).to_owned()),
            tier: None,
            channel: None,
        }
    }
}

/// The record fields the other stored types use; absent ones stay `None`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Record {
    message: Option<String>,
    tool: Option<String>,
    stop_reason: Option<String>,
    notice: Option<String>,
    model_calls: Option<u64>,
    before_message: Option<u64>,
}

/// Reads a stored event; a record that does not parse keeps only its type.
pub fn read_stored(event: &pb::StoredEvent) -> Stored {
    let kind = event.r#type.as_str();
    match kind {
        "tool_call" => {
            return Stored::ToolCall(serde_json::from_str(&event.json).unwrap_or_default());
        }
        "approval" => {
            return Stored::Approval(serde_json::from_str(&event.json).unwrap_or_default());
        }
        _ => {}
    }
    let record: Record = serde_json::from_str(&event.json).unwrap_or_default();
    match kind {
        "error" => Stored::Error {
            message: record.message,
            tool: record.tool,
        },
        "turn_stopped" => Stored::TurnStopped {
            stop_reason: record.stop_reason,
            notice: record.notice,
            model_calls: record.model_calls,
            before_message: record.before_message,
        },
        "turn_repaired" => Stored::TurnRepaired {
            notice: record.notice,
            before_message: record.before_message,
        },
        other => Stored::Other(other.to_owned()),
    }
}
