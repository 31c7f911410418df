//! Conversation messages, shaped like Bedrock Converse and serialized with the JSON keys Strands Agents
//! uses (`toolUse`, `toolResult`, `reasoningContent`, `cachePoint`, `toolUseId` …), so a stored session
//! reads like one. Providers translate these types at their edge; the rest of taud speaks only these.
//!
//! Invariants: a message has a role and content blocks; `metadata` (usage, metrics) is stored with the
//! message but never sent to a model (`Message::for_model` strips it); unknown keys in stored JSON are
//! ignored and a block of an unknown kind is kept as it was (`ContentBlock::Other`, never sent to a
//! model), so newer records stay readable by older code. An image block (`{"image": {"format",
//! "source": {"bytes": <base64>}}}`) is read only in exactly that shape (any other `image` object
//! stays `Other`), so a record round-trips byte for byte; its bytes stay base64 and are never
//! decoded here, and their size is bounded by whoever made the block (the MCP result cap).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message. Tool results travel in a `user` message; there is no system or tool role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MessageMetadata>,
}

impl Message {
    /// A user message with one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::Text(text.into())],
            metadata: None,
        }
    }

    /// An assistant message with one text block.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![ContentBlock::Text(text.into())],
            metadata: None,
        }
    }

    /// The message as a model receives it: role and content only (blocks this build does not
    /// know and the metadata are dropped). Takes the message, so a model call's view is not copied
    /// again.
    pub fn into_for_model(mut self) -> Self {
        self.content
            .retain(|block| !matches!(block, ContentBlock::Other(_)));
        self.metadata = None;
        self
    }

    /// [`Message::into_for_model`] of a copy.
    pub fn for_model(&self) -> Self {
        self.clone().into_for_model()
    }

    /// Whether the message is already as a model receives it (no metadata, no unknown blocks).
    pub fn is_for_model(&self) -> bool {
        self.metadata.is_none()
            && !self
                .content
                .iter()
                .any(|block| matches!(block, ContentBlock::Other(_)))
    }

    /// A shared message as a model receives it: the same object when it is already
    /// ([`Message::is_for_model`]), else the message without its metadata and unknown blocks
    /// (made in place when nobody else holds it, from a copy otherwise).
    pub fn shared_for_model(message: Arc<Self>) -> Arc<Self> {
        if message.is_for_model() {
            return message;
        }
        Arc::new(Arc::unwrap_or_clone(message).into_for_model())
    }

    /// The concatenated text blocks, joined by newlines.
    pub fn text(&self) -> String {
        let parts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        parts.join("\n")
    }

    /// The tool calls in this message, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = &ToolUse> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolUse(tool_use) => Some(tool_use),
            _ => None,
        })
    }

    /// The tool results in this message, in order.
    pub fn tool_results(&self) -> impl Iterator<Item = &ToolResult> {
        self.content.iter().filter_map(|block| match block {
            ContentBlock::ToolResult(result) => Some(result),
            _ => None,
        })
    }
}

/// One content block: a JSON object with exactly one meaningful key, as in Converse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ContentBlock {
    #[serde(rename = "text")]
    Text(String),
    #[serde(rename = "toolUse")]
    ToolUse(ToolUse),
    #[serde(rename = "toolResult")]
    ToolResult(ToolResult),
    #[serde(rename = "reasoningContent")]
    ReasoningContent(ReasoningContent),
    #[serde(rename = "cachePoint")]
    CachePoint(CachePoint),
    #[serde(rename = "image")]
    Image(ImageBlock),
    /// A block this version does not know (a newer tau, another Strands writer): kept exactly as
    /// stored so the session still opens and is written back unchanged, but never sent to a model.
    #[serde(untagged)]
    Other(Value),
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUse {
    #[serde(rename = "toolUseId")]
    pub tool_use_id: String,
    pub name: String,
    /// Parsed JSON arguments (normally an object).
    pub input: Value,
}

/// Whether a tool call succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolResultStatus {
    Success,
    Error,
}

/// The answer to one `ToolUse`, matched by `tool_use_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    #[serde(rename = "toolUseId")]
    pub tool_use_id: String,
    pub status: ToolResultStatus,
    pub content: Vec<ToolResultContent>,
}

impl ToolResult {
    /// A result with one text block.
    pub fn text(
        tool_use_id: impl Into<String>,
        status: ToolResultStatus,
        text: impl Into<String>,
    ) -> Self {
        Self {
            tool_use_id: tool_use_id.into(),
            status,
            content: vec![ToolResultContent::Text(text.into())],
        }
    }
}

/// One block of a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToolResultContent {
    #[serde(rename = "text")]
    Text(String),
    #[serde(rename = "json")]
    Json(Value),
    #[serde(rename = "image")]
    Image(ImageBlock),
}

impl ToolResultContent {
    /// The block as text for a protocol that carries only text: JSON as JSON text, an image as
    /// its short note ([`ImageBlock::note`]), never its bytes.
    pub fn as_text(&self) -> String {
        match self {
            ToolResultContent::Text(text) => text.clone(),
            ToolResultContent::Json(value) => value.to_string(),
            ToolResultContent::Image(image) => image.note(),
        }
    }
}

/// The image formats Converse accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl ImageFormat {
    /// The format of a MIME type (`image/png`, `image/jpg` …); `None` when unsupported.
    pub fn from_mime(mime: &str) -> Option<Self> {
        let mime = mime.split(';').next().unwrap_or_default().trim();
        match mime.to_ascii_lowercase().as_str() {
            "image/png" => Some(Self::Png),
            "image/jpeg" | "image/jpg" => Some(Self::Jpeg),
            "image/gif" => Some(Self::Gif),
            "image/webp" => Some(Self::Webp),
            _ => None,
        }
    }

    /// The MIME type (`image/png` …).
    pub fn mime(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Gif => "image/gif",
            Self::Webp => "image/webp",
        }
    }
}

/// An image, as Converse and Strands store it: format and base64 bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageBlock {
    pub format: ImageFormat,
    pub source: ImageSource,
}

/// Where an image's bytes are: inline, base64 (the JSON form of Converse's `bytes` blob).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSource {
    pub bytes: String,
}

impl ImageBlock {
    /// An image from base64 data and its MIME type; `None` when the format is unsupported.
    pub fn from_base64(mime: &str, base64: impl Into<String>) -> Option<Self> {
        Some(Self {
            format: ImageFormat::from_mime(mime)?,
            source: ImageSource {
                bytes: base64.into(),
            },
        })
    }

    /// The MIME type.
    pub fn mime(&self) -> &'static str {
        self.format.mime()
    }

    /// The base64 bytes.
    pub fn base64(&self) -> &str {
        &self.source.bytes
    }

    /// The decoded size in bytes, from the base64 length (padding discounted), without decoding.
    pub fn decoded_len(&self) -> usize {
        let data = self.source.bytes.trim_end();
        let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
        (data.len() / 4 * 3 + (data.len() % 4) * 3 / 4).saturating_sub(padding)
    }

    /// What a model that cannot see images reads instead: the MIME type and size, never the bytes.
    pub fn note(&self) -> String {
        format!(
            "[image {} of {} bytes, not shown]",
            self.mime(),
            self.decoded_len()
        )
    }

    /// A `data:` URL of the image (OpenAI's `image_url`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime(), self.source.bytes)
    }
}

/// Model reasoning ("thinking"), kept so providers that sign it can verify it on the next call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningContent {
    #[serde(
        rename = "reasoningText",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub reasoning_text: Option<ReasoningText>,
    /// Base64 of provider-redacted reasoning.
    #[serde(
        rename = "redactedContent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub redacted_content: Option<String>,
}

/// Visible reasoning text with its optional signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasoningText {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A marker placed after the content a provider may cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachePoint {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
}

impl Default for CachePoint {
    fn default() -> Self {
        Self {
            kind: "default".to_owned(),
            ttl: None,
        }
    }
}

/// One block of a system prompt: text, or a cache marker after the stable part (the persona puts
/// persona + `## User` first, a cache point, then the `## Now` block that changes every minute).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SystemContentBlock {
    #[serde(rename = "text")]
    Text(String),
    #[serde(rename = "cachePoint")]
    CachePoint(CachePoint),
}

impl SystemContentBlock {
    /// The system prompt as one string: the text blocks joined by newlines (cache points dropped).
    pub fn join(blocks: &[SystemContentBlock]) -> String {
        let parts: Vec<&str> = blocks
            .iter()
            .filter_map(|block| match block {
                SystemContentBlock::Text(text) => Some(text.as_str()),
                SystemContentBlock::CachePoint(_) => None,
            })
            .collect();
        parts.join("\n")
    }
}

/// What the loop attaches to an assistant message after a model call; stored, never sent to a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
}

/// Token usage of one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(rename = "inputTokens", default)]
    pub input_tokens: u64,
    #[serde(rename = "outputTokens", default)]
    pub output_tokens: u64,
    #[serde(rename = "totalTokens", default)]
    pub total_tokens: u64,
    #[serde(
        rename = "cacheReadInputTokens",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(
        rename = "cacheWriteInputTokens",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write_input_tokens: Option<u64>,
}

/// Timing of one model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metrics {
    #[serde(rename = "latencyMs", default)]
    pub latency_ms: u64,
    #[serde(
        rename = "timeToFirstByteMs",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub time_to_first_byte_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_with_strands_keys() {
        let message = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::Text("hi".into()),
                ContentBlock::ToolUse(ToolUse {
                    tool_use_id: "t1".into(),
                    name: "current_time".into(),
                    input: json!({}),
                }),
            ],
            metadata: Some(MessageMetadata {
                usage: Some(Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                    total_tokens: 7,
                    ..Usage::default()
                }),
                metrics: None,
            }),
        };
        let value = serde_json::to_value(&message).unwrap();
        assert_eq!(
            value,
            json!({
                "role": "assistant",
                "content": [
                    {"text": "hi"},
                    {"toolUse": {"toolUseId": "t1", "name": "current_time", "input": {}}}
                ],
                "metadata": {"usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}}
            })
        );
        assert_eq!(serde_json::from_value::<Message>(value).unwrap(), message);
    }

    #[test]
    fn an_unknown_block_is_kept_as_stored_but_never_sent_to_a_model() {
        let raw = json!({"role": "user", "content": [
            {"text": "look"},
            {"video": {"format": "mp4", "source": {"bytes": "AAAA"}}},
            {"image": {"format": "bmp", "source": {"bytes": "AAAA"}}},
            {"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/k"}}}},
        ]});
        let message: Message = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(message.content.len(), 4);
        assert!(
            matches!(&message.content[1], ContentBlock::Other(v) if v["video"]["format"] == "mp4")
        );
        assert!(
            message.content[2..]
                .iter()
                .all(|block| matches!(block, ContentBlock::Other(_)))
        );
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            raw,
            "written back unchanged"
        );
        assert_eq!(
            message.for_model().content,
            vec![ContentBlock::Text("look".into())]
        );
        assert_eq!(message.clone().into_for_model(), message.for_model());
        assert_eq!(message.text(), "look");
    }

    #[test]
    fn images_round_trip_in_a_message_and_a_tool_result() {
        let raw = json!({"role": "user", "content": [
            {"toolResult": {"toolUseId": "t1", "status": "success", "content": [
                {"text": "a pixel"},
                {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
            ]}},
            {"image": {"format": "jpeg", "source": {"bytes": "/9j/4A"}}},
        ]});
        let message: Message = serde_json::from_value(raw.clone()).unwrap();
        let png = ImageBlock::from_base64("image/png", "iVBORw0KGgo=").unwrap();
        assert_eq!(
            message.tool_results().next().unwrap().content[1],
            ToolResultContent::Image(png.clone())
        );
        assert!(
            matches!(&message.content[1], ContentBlock::Image(i) if i.format == ImageFormat::Jpeg)
        );
        assert_eq!(serde_json::to_value(&message).unwrap(), raw);
        assert_eq!(message.for_model().content.len(), 2, "images reach a model");
        assert_eq!(png.decoded_len(), 8);
        assert_eq!(png.note(), "[image image/png of 8 bytes, not shown]");
        assert_eq!(png.data_url(), "data:image/png;base64,iVBORw0KGgo=");
        assert_eq!(
            ImageFormat::from_mime("IMAGE/JPG; q=1"),
            Some(ImageFormat::Jpeg)
        );
        assert_eq!(ImageFormat::from_mime("image/bmp"), None);
    }

    #[test]
    fn for_model_strips_metadata() {
        let mut message = Message::assistant_text("x");
        message.metadata = Some(MessageMetadata::default());
        assert!(message.for_model().metadata.is_none());
        assert_eq!(message.into_for_model(), Message::assistant_text("x"));
    }

    #[test]
    fn a_shared_message_is_copied_only_when_it_has_something_to_strip() {
        let plain = Arc::new(Message::user_text("hi"));
        assert!(plain.is_for_model());
        let shared = Message::shared_for_model(Arc::clone(&plain));
        assert!(
            Arc::ptr_eq(&plain, &shared),
            "nothing to strip: the same object"
        );
        let mut with_metadata = Message::assistant_text("x");
        with_metadata.metadata = Some(MessageMetadata::default());
        let held = Arc::new(with_metadata);
        assert!(!held.is_for_model());
        let stripped = Message::shared_for_model(Arc::clone(&held));
        assert!(!Arc::ptr_eq(&held, &stripped));
        assert_eq!(*stripped, Message::assistant_text("x"));
        assert!(
            held.metadata.is_some(),
            "the other holder keeps its message"
        );
        let mut unknown = Message::user_text("look");
        unknown
            .content
            .push(ContentBlock::Other(json!({"video": {}})));
        assert!(!unknown.is_for_model());
        let alone = Message::shared_for_model(Arc::new(unknown));
        assert_eq!(*alone, Message::user_text("look"));
    }

    #[test]
    fn tool_result_round_trips() {
        let raw = json!({"role": "user", "content": [{"toolResult": {
            "toolUseId": "t1", "status": "error", "content": [{"text": "no"}]}}]});
        let message: Message = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(message.tool_results().count(), 1);
        assert_eq!(serde_json::to_value(&message).unwrap(), raw);
    }
}
