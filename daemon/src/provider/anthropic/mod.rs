//! The Anthropic Messages API over server-sent events: one attempt is one `POST /v1/messages` with
//! `stream: true`, decoded as it arrives.
//!
//! Invariants: the key travels only in its header (`x-api-key`, or `authorization: Bearer` for a
//! gateway token), never in a URL or a log; the status is checked before the body is read as SSE;
//! `anthropic-version` is always sent; the base URL comes from tau.toml, ANTHROPIC_BASE_URL, or the
//! public API, in that order (see [`crate::provider`]).

pub mod messages_body;
pub mod messages_decoder;
pub mod messages_error;
pub mod stream_event;

use async_trait::async_trait;

use super::cache::CachePlan;
use super::credentials::AnthropicAuth;
use super::http::open_stream;
use super::retry::{AttemptStream, Failure, Transport};
use crate::model::ModelRequest;

/// The public API.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version header value.
pub const API_VERSION: &str = "2023-06-01";

/// What one Anthropic model needs.
#[derive(Debug, Clone)]
pub struct AnthropicSettings {
    /// Without the trailing `/v1/messages` (e.g. `https://api.anthropic.com`).
    pub base_url: String,
    pub auth: AnthropicAuth,
    pub model_id: String,
    pub max_tokens: u32,
    pub cache: CachePlan,
}

/// One attempt against the Messages API.
pub struct AnthropicTransport {
    client: reqwest::Client,
    settings: AnthropicSettings,
    url: String,
    name: String,
}

impl AnthropicTransport {
    pub fn new(client: reqwest::Client, settings: AnthropicSettings) -> Self {
        let url = format!("{}/v1/messages", settings.base_url.trim_end_matches('/'));
        let name = format!("anthropic:{}", settings.model_id);
        Self {
            client,
            settings,
            url,
            name,
        }
    }
}

#[async_trait]
impl Transport for AnthropicTransport {
    fn name(&self) -> &str {
        &self.name
    }

    async fn open(&self, request: &ModelRequest) -> Result<AttemptStream, Failure> {
        let body = messages_body::body(
            request,
            &self.settings.model_id,
            self.settings.max_tokens,
            self.settings.cache,
        );
        let builder = self
            .client
            .post(&self.url)
            .header("anthropic-version", API_VERSION)
            .header("accept", "text/event-stream")
            .json(&body);
        let builder = match &self.settings.auth {
            AnthropicAuth::ApiKey(key) => builder.header("x-api-key", key.expose()),
            AnthropicAuth::Bearer(token) => builder.bearer_auth(token.expose()),
        };
        let refused = match open_stream(builder, messages_decoder::AnthropicDecoder::new).await? {
            Ok(stream) => return Ok(stream),
            Err(refused) => refused,
        };
        let should_retry = refused
            .headers
            .get("x-should-retry")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| match v {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            });
        Err(messages_error::http_failure(
            refused.status,
            &refused.body,
            refused.retry_after,
            should_retry,
        ))
    }
}
