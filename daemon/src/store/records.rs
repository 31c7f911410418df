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

use super::context_mode::ContextMode;
use crate::message::Message;
use crate::store::store_error::SessionError;

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

/// The key of the pending repair notice in an agent record's `_internal_state`.
pub const REPAIR_NOTICE_KEY: &str = "repair_notice";

/// The newest version of the [`RepairNotice`] object this code writes and reads.
pub const REPAIR_NOTICE_VERSION: u32 = 1;

/// `_internal_state.repair_notice`: the notice a turn left for the next one when it stopped with
/// the conversation unfinished (a failed model call, a hit limit, a cancel), so that an agent
/// rebuilt from the store (a role switch, an idle session reopened, a hub restart) takes it over.
/// It applies only while the session still holds exactly `message_count` messages. Records
/// without it (older ones, Strands ones) read as having no notice; a newer `v` is ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairNotice {
    #[serde(default = "format_version")]
    pub v: u32,
    pub text: String,
    /// How many messages the session's agent had stored when the notice was left.
    pub message_count: u64,
}

impl SessionAgent {
    /// The pending repair notice, if one was recorded for a session of `message_count` messages.
    pub fn repair_notice(&self, message_count: u64) -> Option<String> {
        let value = self.internal_state.get(REPAIR_NOTICE_KEY)?;
        let notice: RepairNotice = serde_json::from_value(value.clone()).ok()?;
        (notice.v <= REPAIR_NOTICE_VERSION && notice.message_count == message_count)
            .then_some(notice.text)
    }

    /// Records (or with `None` clears) the pending repair notice; other internal state is kept.
    pub fn set_repair_notice(&mut self, notice: Option<RepairNotice>) {
        if !self.internal_state.is_object() {
            self.internal_state = empty_object();
        }
        if let Some(state) = self.internal_state.as_object_mut() {
            match notice.and_then(|n| serde_json::to_value(n).ok()) {
                Some(value) => {
                    state.insert(REPAIR_NOTICE_KEY.to_owned(), value);
                }
                None => {
                    state.remove(REPAIR_NOTICE_KEY);
                }
            }
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
    fn an_agent_record_without_internal_state_has_no_repair_notice() {
        let raw = json!({
            "agent_id": "tau",
            "state": {},
            "conversation_manager_state": {"__name__": "SlidingWindowConversationManager", "removed_message_count": 0},
            "created_at": "2026-09-29T15:30:12.123456+00:00",
            "updated_at": "2026-09-29T15:30:12.123456+00:00"
        });
        let record: SessionAgent = serde_json::from_value(raw).unwrap();
        assert_eq!(record.v, 1);
        assert_eq!(record.repair_notice(0), None);
    }

    #[test]
    fn a_repair_notice_round_trips_and_applies_only_at_its_message_count() {
        let mut agent = SessionAgent::new("tau", ContextMode::Sliding, now_utc());
        agent.internal_state = json!({"model_state": {"x": 1}});
        agent.set_repair_notice(Some(RepairNotice {
            v: REPAIR_NOTICE_VERSION,
            text: "The model call failed: boom".into(),
            message_count: 3,
        }));
        let value = serde_json::to_value(&agent).unwrap();
        assert_eq!(
            value["_internal_state"],
            json!({
                "model_state": {"x": 1},
                "repair_notice": {"v": 1, "text": "The model call failed: boom", "message_count": 3}
            })
        );
        let back: SessionAgent = serde_json::from_value(value).unwrap();
        assert_eq!(
            back.repair_notice(3).as_deref(),
            Some("The model call failed: boom")
        );
        assert_eq!(back.repair_notice(4), None, "more messages came since");
        let mut cleared = back;
        cleared.set_repair_notice(None);
        assert_eq!(cleared.internal_state, json!({"model_state": {"x": 1}}));
    }

    #[test]
    fn a_newer_or_malformed_repair_notice_is_ignored() {
        let mut agent = SessionAgent::new("tau", ContextMode::Sliding, now_utc());
        agent.internal_state = json!({"repair_notice": {"v": 2, "text": "x", "message_count": 1}});
        assert_eq!(agent.repair_notice(1), None);
        agent.internal_state = json!({"repair_notice": "text"});
        assert_eq!(agent.repair_notice(1), None);
        agent.internal_state = json!({"repair_notice": {"text": "old", "message_count": 1}});
        assert_eq!(agent.repair_notice(1).as_deref(), Some("old"));
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
