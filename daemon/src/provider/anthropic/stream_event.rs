//! The Messages API stream events, typed: one SSE `data` is one [`StreamEvent`], told apart by
//! its JSON `type`. See ARCHITECTURE.md, `provider/`.
//!
//! Invariants: unknown event, block and delta types read as `Other` and unknown fields are
//! ignored; a known field of an unexpected shape reads as absent or empty (see
//! [`crate::provider::lenient_json`]), and data that is JSON but not an event object (no `type`)
//! reads as `Other`; only data that is not JSON fails ([`StreamEvent::parse`]).

use serde::Deserialize;
use serde_json::Value;

use crate::provider::lenient_json::{self, fit, or_default};

/// One event of the stream.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    MessageStart {
        #[serde(default, deserialize_with = "fit")]
        message: Option<MessageStart>,
    },
    ContentBlockStart {
        #[serde(default, deserialize_with = "fit")]
        index: Option<u64>,
        #[serde(default, deserialize_with = "fit")]
        content_block: Option<ContentBlock>,
    },
    ContentBlockDelta {
        #[serde(default, deserialize_with = "fit")]
        index: Option<u64>,
        #[serde(default, deserialize_with = "fit")]
        delta: Option<BlockDelta>,
    },
    ContentBlockStop {
        #[serde(default, deserialize_with = "fit")]
        index: Option<u64>,
    },
    MessageDelta {
        #[serde(default, deserialize_with = "fit")]
        delta: Option<MessageDelta>,
        #[serde(default, deserialize_with = "fit")]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        #[serde(default, deserialize_with = "fit")]
        error: Option<StreamError>,
    },
    /// `ping` and any event type this build does not know.
    #[serde(other)]
    Other,
}

impl StreamEvent {
    /// Reads one SSE `data`; fails only when it is not JSON.
    pub fn parse(data: &str) -> Result<Self, serde_json::Error> {
        lenient_json::parse(data.as_bytes(), || StreamEvent::Other)
    }
}

/// The `message` of `message_start`.
#[derive(Debug, Deserialize)]
pub struct MessageStart {
    #[serde(default, deserialize_with = "fit")]
    pub usage: Option<WireUsage>,
}

/// Token counts; each event carries the ones it updates.
#[derive(Debug, Deserialize)]
pub struct WireUsage {
    #[serde(default, deserialize_with = "fit")]
    pub input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "fit")]
    pub output_tokens: Option<u64>,
    #[serde(default, deserialize_with = "fit")]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(default, deserialize_with = "fit")]
    pub cache_creation_input_tokens: Option<u64>,
}

/// The block a `content_block_start` opens.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    Text {
        #[serde(default, deserialize_with = "or_default")]
        text: String,
    },
    ToolUse {
        #[serde(default, deserialize_with = "or_default")]
        id: String,
        #[serde(default, deserialize_with = "or_default")]
        name: String,
        /// Usually `{}` (the input follows as `input_json_delta`s).
        #[serde(default)]
        input: Option<Value>,
    },
    Thinking {
        #[serde(default, deserialize_with = "or_default")]
        thinking: String,
    },
    RedactedThinking {
        #[serde(default, deserialize_with = "or_default")]
        data: String,
    },
    /// Server tool blocks and any block type this build does not know.
    #[serde(other)]
    Other,
}

/// A piece of an open block.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockDelta {
    TextDelta {
        #[serde(default, deserialize_with = "or_default")]
        text: String,
    },
    InputJsonDelta {
        #[serde(default, deserialize_with = "or_default")]
        partial_json: String,
    },
    ThinkingDelta {
        #[serde(default, deserialize_with = "or_default")]
        thinking: String,
    },
    SignatureDelta {
        #[serde(default, deserialize_with = "or_default")]
        signature: String,
    },
    #[serde(other)]
    Other,
}

/// The `delta` of `message_delta`.
#[derive(Debug, Deserialize)]
pub struct MessageDelta {
    #[serde(default, deserialize_with = "fit")]
    pub stop_reason: Option<String>,
}

/// The `error` of an `error` event.
#[derive(Debug, Default, Deserialize)]
pub struct StreamError {
    #[serde(rename = "type", default, deserialize_with = "or_default")]
    pub kind: String,
    #[serde(default, deserialize_with = "or_default")]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_of_odd_shapes_are_tolerated_and_only_non_json_fails() {
        for data in [
            "42",
            "[]",
            r#"{"no_type":1}"#,
            r#"{"type":7}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"brand_new","x":{}}"#,
        ] {
            assert!(
                matches!(StreamEvent::parse(data), Ok(StreamEvent::Other)),
                "{data}"
            );
        }
        let event = StreamEvent::parse(
            r#"{"type":"content_block_start","index":"0","content_block":{"type":"text","text":5}}"#,
        )
        .unwrap();
        assert!(matches!(
            event,
            StreamEvent::ContentBlockStart {
                index: None,
                content_block: Some(ContentBlock::Text { ref text }),
            } if text.is_empty()
        ));
        let event =
            StreamEvent::parse(r#"{"type":"content_block_delta","index":2,"delta":"x"}"#).unwrap();
        assert!(matches!(
            event,
            StreamEvent::ContentBlockDelta {
                index: Some(2),
                delta: None
            }
        ));
        assert!(StreamEvent::parse("{oops").is_err());
    }
}
