//! The [`Model`] trait every provider implements, and the normalized stream it yields.
//!
//! A provider translates its wire protocol (Bedrock ConverseStream, Anthropic Messages SSE, Ollama's
//! NDJSON chat, OpenAI-compatible chat completions SSE, the fake model) into [`ModelEvent`]s keyed by content-block index; [`MessageAssembler`] turns them
//! into one assistant [`Message`] in one place.
//!
//! Invariants: a request carries the system prompt as blocks, the history without metadata or
//! unknown blocks (the history's own messages, shared, not copies), and the tool specs; a provider ends its stream after `MessageStop` (and an optional final `Metadata`);
//! throttling retries are the provider's and are announced with `Throttled` before the wait (it also
//! voids the output streamed so far, as `OutputDiscarded` does without a wait; a retry after an
//! attempt that streamed content sends `OutputDiscarded` first, so clients need not infer it); a
//! provider watches the cancellation token and the loop also stops reading the stream on cancel.

mod assemble;
mod stop_reason;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::Stream;
use tokio_util::sync::CancellationToken;

pub use assemble::{
    AssembledMessage, InvalidToolInput, MessageAssembler, blank_text, max_tokens_text,
    stopped_tool_text,
};

use crate::message::{Message, Metrics, SystemContentBlock, Usage};
use crate::tool::ToolSpec;
pub use stop_reason::{STOP_REASONS, StopReason, UnknownStopReason};

/// What one model call sends.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The system prompt as blocks (text and cache points), rebuilt before every call.
    pub system: Vec<SystemContentBlock>,
    /// The conversation, metadata and unknown blocks stripped ([`Message::is_for_model`]), each
    /// message shared with the agent's history rather than copied.
    pub messages: Vec<Arc<Message>>,
    /// The tools the model may call (providers drop `annotations` on the wire where needed),
    /// shared with the catalog they come from.
    pub tools: Arc<[ToolSpec]>,
}

/// A piece of streamed reasoning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReasoningDelta {
    Text(String),
    Signature(String),
    /// Base64 of redacted reasoning.
    Redacted(String),
}

/// One normalized stream event. `index` is the provider's content-block index; blocks are assembled
/// in index order and may interleave.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    TextDelta {
        index: u32,
        text: String,
    },
    ToolUseStart {
        index: u32,
        tool_use_id: String,
        name: String,
    },
    /// A fragment of the tool input's JSON text.
    ToolUseInputDelta {
        index: u32,
        partial_json: String,
    },
    ReasoningDelta {
        index: u32,
        delta: ReasoningDelta,
    },
    /// The block at `index` is complete.
    BlockStop {
        index: u32,
    },
    /// Usage and timing of the call (the last one wins).
    Metadata {
        usage: Option<Usage>,
        metrics: Option<Metrics>,
    },
    /// The model finished the message.
    MessageStop {
        stop_reason: StopReason,
    },
    /// The provider was throttled and will retry after `delay`; output streamed so far is void.
    Throttled {
        delay: Duration,
    },
    /// Everything streamed so far in this call is void (a failed attempt whose output the provider
    /// will not finish, e.g. before it switches to a fallback model); the call goes on.
    OutputDiscarded,
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Rate-limited, and the provider gave up retrying.
    #[error("the model is throttled: {0}")]
    Throttled(String),
    /// The conversation no longer fits the model's context window.
    #[error("the conversation is too long for the model: {0}")]
    ContextOverflow(String),
    /// The request failed (network, authentication, a bad request).
    #[error("the model request failed: {0}")]
    Request(String),
    /// The stream broke or did not follow the protocol.
    #[error("the model stream failed: {0}")]
    Stream(String),
    /// The provider is unavailable (overloaded, server errors, unreachable), and retries gave up.
    #[error("the model is unavailable: {0}")]
    Unavailable(String),
    /// The model ended its reply with output the provider reports as malformed (a broken reply or
    /// tool call), so the reply cannot be used.
    #[error("the model's reply was malformed: {0}")]
    MalformedOutput(String),
    /// The model ended its reply in a way tau cannot carry on from (e.g. a paused server-tool
    /// turn); the reply is incomplete.
    #[error("the model's reply is incomplete: {0}")]
    Incomplete(String),
    /// The role spent its daily budget and has no fallback model; nothing was sent.
    #[error("{0}")]
    BudgetExceeded(String),
}

/// The events of one model call.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send>>;

/// A model provider.
#[async_trait]
pub trait Model: Send + Sync {
    /// The provider and model id, for logs (never a key).
    fn name(&self) -> &str;

    /// Starts one model call. The returned stream ends after `MessageStop` (and final metadata).
    async fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelStream, ModelError>;

    /// Whether the most recent call was answered by a configured fallback model (for `/status`).
    fn fallback_in_use(&self) -> bool {
        false
    }
}
