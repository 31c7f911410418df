//! The ConverseStream events, typed: an event frame's `:event-type` header names the
//! [`ConverseEvent`] variant and its payload is deserialized straight into that variant's body.
//! See ARCHITECTURE.md, `provider/`.
//!
//! Invariants: unknown event types read as `Other` (their payload must still be JSON); the
//! padding field `p` and unknown members are ignored; a known member of an unexpected shape reads
//! as absent (see [`crate::provider::lenient_json`]) and a payload that is JSON but not an object
//! reads as an empty one; only a payload that is not JSON fails ([`ConverseEvent::parse`]).

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::provider::lenient_json::{self, Field, fit, or_default};

/// One event of the stream.
#[derive(Debug)]
pub enum ConverseEvent {
    ContentBlockStart(BlockStart),
    ContentBlockDelta(BlockDelta),
    ContentBlockStop(BlockStop),
    MessageStop(MessageStop),
    Metadata(Metadata),
    /// `messageStart` (whose role is always the assistant's) and any event type this build does
    /// not know.
    Other,
}

impl ConverseEvent {
    /// Reads the payload of an event frame of type `event_type`; fails only when it is not JSON.
    pub fn parse(event_type: &str, payload: &[u8]) -> Result<Self, serde_json::Error> {
        Ok(match event_type {
            "contentBlockStart" => {
                Self::ContentBlockStart(lenient_json::parse(payload, BlockStart::default)?)
            }
            "contentBlockDelta" => {
                Self::ContentBlockDelta(lenient_json::parse(payload, BlockDelta::default)?)
            }
            "contentBlockStop" => {
                Self::ContentBlockStop(lenient_json::parse(payload, BlockStop::default)?)
            }
            "messageStop" => Self::MessageStop(lenient_json::parse(payload, MessageStop::default)?),
            "metadata" => Self::Metadata(lenient_json::parse(payload, Metadata::default)?),
            _ => {
                serde_json::from_slice::<IgnoredAny>(payload)?;
                Self::Other
            }
        })
    }
}

/// `contentBlockStart`: only tool blocks are started explicitly.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStart {
    #[serde(default, deserialize_with = "fit")]
    pub content_block_index: Option<u64>,
    #[serde(default, deserialize_with = "fit")]
    pub start: Option<Start>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Start {
    /// A block that has this member is a tool call, whatever its shape.
    #[serde(default)]
    pub tool_use: Field<ToolUseStart>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUseStart {
    #[serde(default, deserialize_with = "or_default")]
    pub tool_use_id: String,
    #[serde(default, deserialize_with = "or_default")]
    pub name: String,
}

/// `contentBlockDelta`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDelta {
    #[serde(default, deserialize_with = "fit")]
    pub content_block_index: Option<u64>,
    #[serde(default, deserialize_with = "fit")]
    pub delta: Option<Delta>,
}

/// The piece itself: one member is set (the first one found, in this order, is read).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delta {
    #[serde(default, deserialize_with = "fit")]
    pub text: Option<String>,
    #[serde(default, deserialize_with = "fit")]
    pub tool_use: Option<ToolUseDelta>,
    #[serde(default, deserialize_with = "fit")]
    pub reasoning_content: Option<ReasoningContentDelta>,
}

#[derive(Debug, Default, Deserialize)]
pub struct ToolUseDelta {
    /// A fragment of the input's JSON text.
    #[serde(default, deserialize_with = "fit")]
    pub input: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningContentDelta {
    #[serde(default, deserialize_with = "fit")]
    pub text: Option<String>,
    #[serde(default, deserialize_with = "fit")]
    pub signature: Option<String>,
    #[serde(default, deserialize_with = "fit")]
    pub redacted_content: Option<String>,
}

/// `contentBlockStop`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockStop {
    #[serde(default, deserialize_with = "fit")]
    pub content_block_index: Option<u64>,
}

/// `messageStop`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageStop {
    #[serde(default, deserialize_with = "fit")]
    pub stop_reason: Option<String>,
}

/// `metadata`: the usage and latency, after `messageStop`.
#[derive(Debug, Default, Deserialize)]
pub struct Metadata {
    /// Present (whatever its shape) means the usage is reported.
    #[serde(default)]
    pub usage: Field<WireUsage>,
    #[serde(default, deserialize_with = "fit")]
    pub metrics: Option<WireMetrics>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireUsage {
    #[serde(default, deserialize_with = "fit")]
    pub input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "fit")]
    pub output_tokens: Option<u64>,
    #[serde(default, deserialize_with = "fit")]
    pub total_tokens: Option<u64>,
    #[serde(default, deserialize_with = "fit")]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "fit")]
    pub cache_write_input_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireMetrics {
    #[serde(default, deserialize_with = "fit")]
    pub latency_ms: Option<u64>,
}

/// The payload of an exception frame (its type is in `:exception-type`).
#[derive(Debug, Default, Deserialize)]
pub struct ExceptionBody {
    #[serde(default, deserialize_with = "or_default")]
    pub message: String,
}

impl ExceptionBody {
    /// Reads an exception payload; one that cannot be read has no message.
    pub fn parse(payload: &[u8]) -> Self {
        serde_json::from_slice(payload).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_payloads_are_tolerated_and_only_non_json_fails() {
        let event = ConverseEvent::parse("messageStop", b"5").unwrap();
        assert!(matches!(
            event,
            ConverseEvent::MessageStop(MessageStop { stop_reason: None })
        ));
        let event = ConverseEvent::parse("metadata", br#"{"usage":null,"p":"abc"}"#).unwrap();
        assert!(matches!(
            event,
            ConverseEvent::Metadata(Metadata {
                usage: Field::Mismatch,
                metrics: None
            })
        ));
        let event =
            ConverseEvent::parse("contentBlockStart", br#"{"start":{"toolUse":"x"}}"#).unwrap();
        assert!(matches!(
            event,
            ConverseEvent::ContentBlockStart(BlockStart {
                content_block_index: None,
                start: Some(Start {
                    tool_use: Field::Mismatch
                })
            })
        ));
        assert!(matches!(
            ConverseEvent::parse("brandNew", b"[1]"),
            Ok(ConverseEvent::Other)
        ));
        assert!(ConverseEvent::parse("brandNew", b"{oops").is_err());
        assert!(ConverseEvent::parse("messageStop", b"{oops").is_err());
        assert_eq!(ExceptionBody::parse(b"not json").message, "");
    }
}
