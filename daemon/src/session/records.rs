//! The stored records of a session, shaped like the Strands Agents session JSON (`session.json`,
//! `agent.json`, one record per message) so a stored session reads like one, plus a format version.
//!
//! Invariants: every record carries `"v": FORMAT_VERSION` (a record without `v` was written by
//! Strands and reads as version 1); readers ignore unknown keys, and a record with a higher version
//! than [`FORMAT_VERSION`] is refused by [`check_version`] (additive changes keep the version; only
//! an incompatible change raises it). Timestamps are UTC with microsecond precision, written as
//! fixed-width RFC 3339 (`2026-09-29T15:30:12.123456Z`) so they also sort as text.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::Message;
use crate::session::error::SessionError;
use crate::session::window::ContextMode;

/// The record format this code writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

/// The agent id tau uses for its one agent per session (`agents/tau/`).
pub const DEFAULT_AGENT_ID: &str = "tau";

pub(crate) fn format_version() -> u32 {
    FORMAT_VERSION
}

/// Now, in UTC, cut to microseconds (both backends keep the same precision).
pub fn now_utc() -> Timestamp {
    let now = Timestamp::now();
    Timestamp::from_microsecond(now.as_microsecond()).unwrap_or(now)
}

/// Refuses a record written in a newer, incompatible format.
pub fn check_version(version: u32, location: impl std::fmt::Display) -> Result<(), SessionError> {
    if version > FORMAT_VERSION {
        return Err(SessionError::UnsupportedFormat {
            location: location.to_string(),
            version: u64::from(version),
            supported: FORMAT_VERSION,
        });
    }
    Ok(())
}

/// Serde for `jiff::Timestamp` as fixed-width RFC 3339 UTC text.
pub(crate) mod rfc3339 {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn format(ts: &Timestamp) -> String {
        format!("{ts:.6}")
    }

    pub fn serialize<S: Serializer>(ts: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format(ts))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The kind of a session record; tau only writes agent sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SessionType {
    #[default]
    #[serde(rename = "AGENT")]
    Agent,
}

/// `session.json`: the session record. `updated_at` moves on every message append and orders
/// listings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    #[serde(default = "format_version")]
    pub v: u32,
    pub session_id: String,
    #[serde(default)]
    pub session_type: SessionType,
    #[serde(with = "rfc3339")]
    pub created_at: Timestamp,
    #[serde(with = "rfc3339")]
    pub updated_at: Timestamp,
}

impl Session {
    /// A new agent session created at `now`.
    pub fn new(session_id: impl Into<String>, now: Timestamp) -> Self {
        Self {
            v: FORMAT_VERSION,
            session_id: session_id.into(),
            session_type: SessionType::Agent,
            created_at: now,
            updated_at: now,
        }
    }
}

/// One row of `list_sessions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    pub session_id: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Messages stored in the session (all agents). The file backend may show one message fewer
    /// after a crash in the middle of an append, until the next append.
    pub message_count: u64,
}

/// The conversation manager's state in the agent record:
/// `{"__name__": ..., "removed_message_count": ..., "summary_message": ...}`.
///
/// `removed_message_count` is how many stored messages the model no longer sees (the window start
/// over the full history); `summary_message` is what the summarizing manager puts in front of the
/// remaining ones. Unknown keys are kept in `extra` and written back unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationManagerState {
    #[serde(rename = "__name__")]
    pub name: String,
    #[serde(default)]
    pub removed_message_count: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model_call_count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_message: Option<Message>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ConversationManagerState {
    /// The state of a fresh manager for `mode`.
    pub fn new(mode: ContextMode) -> Self {
        Self {
            name: mode.manager_name().to_owned(),
            removed_message_count: 0,
            model_call_count: 0,
            summary_message: None,
            extra: Map::new(),
        }
    }
}

/// `agents/<id>/agent.json`: the agent's state in the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionAgent {
    #[serde(default = "format_version")]
    pub v: u32,
    pub agent_id: String,
    /// The agent's own key/value state (a JSON object).
    #[serde(default = "empty_object")]
    pub state: Value,
    pub conversation_manager_state: ConversationManagerState,
    /// Loop-internal state (interrupt state, model state), opaque to the store.
    #[serde(
        rename = "_internal_state",
        default = "empty_object",
        skip_serializing_if = "is_empty_object"
    )]
    pub internal_state: Value,
    #[serde(with = "rfc3339")]
    pub created_at: Timestamp,
    #[serde(with = "rfc3339")]
    pub updated_at: Timestamp,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

fn is_empty_object(value: &Value) -> bool {
    value.as_object().is_some_and(Map::is_empty)
}

impl SessionAgent {
    /// A new agent record under `mode`'s conversation manager, created at `now`.
    pub fn new(agent_id: impl Into<String>, mode: ContextMode, now: Timestamp) -> Self {
        Self {
            v: FORMAT_VERSION,
            agent_id: agent_id.into(),
            state: empty_object(),
            conversation_manager_state: ConversationManagerState::new(mode),
            internal_state: empty_object(),
            created_at: now,
            updated_at: now,
        }
    }
}

/// `agents/<id>/messages/NNNNNN.json`: one message with its numeric id (0, 1, 2 … in order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMessage {
    #[serde(default = "format_version")]
    pub v: u32,
    pub message_id: u64,
    pub message: Message,
    /// Set only by a redaction (`update_message`); the original `message` stays on record.
    #[serde(default)]
    pub redact_message: Option<Message>,
    #[serde(with = "rfc3339")]
    pub created_at: Timestamp,
    #[serde(with = "rfc3339")]
    pub updated_at: Timestamp,
}

impl SessionMessage {
    /// A new message record created at `now`.
    pub fn new(message_id: u64, message: Message, now: Timestamp) -> Self {
        Self {
            v: FORMAT_VERSION,
            message_id,
            message,
            redact_message: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// The message the agent sees: the redaction if there is one, else the original.
    pub fn to_message(&self) -> &Message {
        self.redact_message.as_ref().unwrap_or(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_are_fixed_width_utc() {
        let ts: Timestamp = "2026-09-29T15:30:12+00:00".parse().unwrap();
        assert_eq!(rfc3339::format(&ts), "2026-09-29T15:30:12.000000Z");
        assert_eq!(now_utc().subsec_nanosecond() % 1000, 0);
    }

    #[test]
    fn a_strands_written_message_record_reads_as_version_one() {
        let raw = json!({
            "message": {"role": "user", "content": [{"text": "hi"}]},
            "message_id": 3,
            "redact_message": null,
            "created_at": "2026-09-29T15:30:12.123456+00:00",
            "updated_at": "2026-09-29T15:30:12.123456+00:00",
            "some_future_key": [1, 2]
        });
        let record: SessionMessage = serde_json::from_value(raw).unwrap();
        assert_eq!(record.v, 1);
        assert_eq!(record.message_id, 3);
        assert_eq!(record.to_message().text(), "hi");
    }

    #[test]
    fn records_carry_their_version() {
        let now = now_utc();
        let value = serde_json::to_value(Session::new("s", now)).unwrap();
        assert_eq!(value["v"], 1);
        assert_eq!(value["session_type"], "AGENT");
        let value =
            serde_json::to_value(SessionAgent::new("tau", ContextMode::Sliding, now)).unwrap();
        assert_eq!(value["v"], 1);
        assert_eq!(
            value["conversation_manager_state"],
            json!({"__name__": "SlidingWindowConversationManager", "removed_message_count": 0})
        );
    }

    #[test]
    fn unknown_manager_state_keys_survive_a_round_trip() {
        let raw = json!({"__name__": "X", "removed_message_count": 4, "future": {"a": 1}});
        let state: ConversationManagerState = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(state.removed_message_count, 4);
        assert_eq!(serde_json::to_value(&state).unwrap(), raw);
    }

    #[test]
    fn a_summary_message_can_be_stored_in_the_agent_record() {
        let mut agent = SessionAgent::new("tau", ContextMode::Summarize, now_utc());
        agent.conversation_manager_state.summary_message = Some(Message::user_text("summary"));
        let back: SessionAgent =
            serde_json::from_value(serde_json::to_value(&agent).unwrap()).unwrap();
        assert_eq!(back, agent);
    }

    #[test]
    fn newer_formats_are_refused() {
        check_version(FORMAT_VERSION, "x").unwrap();
        let err = check_version(FORMAT_VERSION + 1, "session.json").unwrap_err();
        assert!(
            matches!(err, SessionError::UnsupportedFormat { version: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn the_redaction_is_what_the_agent_sees() {
        let mut record = SessionMessage::new(0, Message::user_text("secret"), now_utc());
        record.redact_message = Some(Message::user_text("[redacted]"));
        assert_eq!(record.to_message().text(), "[redacted]");
        assert_eq!(record.message.text(), "secret");
    }
}
