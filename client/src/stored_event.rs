//! A stored agent event (`ReadEvents`' `StoredEvent`, JSON with a type) read once into a typed
//! [`Stored`]: what `crate::present` shows and `/resume`'s history places.
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
    Approval {
        tool: Option<String>,
        status: Option<String>,
    },
    /// An error the agent reported.
    Error { message: Option<String> },
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
}

/// The record fields the other stored types use; absent ones stay `None`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Record {
    tool: Option<String>,
    status: Option<String>,
    message: Option<String>,
    stop_reason: Option<String>,
    notice: Option<String>,
    model_calls: Option<u64>,
    before_message: Option<u64>,
}

/// Reads a stored event; a record that does not parse keeps only its type.
pub fn read_stored(event: &pb::StoredEvent) -> Stored {
    let kind = event.r#type.as_str();
    if kind == "tool_call" {
        return Stored::ToolCall(serde_json::from_str(&event.json).unwrap_or_default());
    }
    let record: Record = serde_json::from_str(&event.json).unwrap_or_default();
    match kind {
        "approval" => Stored::Approval {
            tool: record.tool,
            status: record.status,
        },
        "error" => Stored::Error {
            message: record.message,
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
