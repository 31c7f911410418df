//! OpenAI-compatible Chat Completions (OpenAI, llama.cpp server, vLLM, LM Studio, OpenRouter, …):
//! one attempt is one `POST <base>/chat/completions` with `stream: true`, its server-sent events
//! decoded as they arrive.
//!
//! Invariants: the key (OPENAI_API_KEY) travels only in `authorization: Bearer`, never in a URL
//! or a log, and is sent only when set (local servers take none; the public API requires it, see
//! [`tau_api::model_endpoints::openai_key`]); the status is checked before the body is read as
//! SSE; the base URL (which includes `/v1`) comes from `[component.openai] base_url`,
//! OPENAI_BASE_URL, or `https://api.openai.com/v1`.

pub mod completion_body;
pub mod completion_chunk;

use async_trait::async_trait;
use tau_api::config::ModelTuning;
use tau_api::credentials::Secret;
use tau_api::model_endpoints::is_public_openai;

use super::compat::{self, Family};
use super::http::open_stream;
use super::retry::{AttemptStream, Failure, Transport};
use crate::model::ModelRequest;

/// What one OpenAI-compatible model needs.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// Up to and including the version, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<Secret>,
    pub model_id: String,
    pub max_tokens: u32,
    pub tuning: ModelTuning,
}

/// One attempt against `/chat/completions`.
pub struct OpenAiTransport {
    client: reqwest::Client,
    settings: OpenAiSettings,
    url: String,
    public_api: bool,
    name: String,
}

impl OpenAiTransport {
    pub fn new(client: reqwest::Client, settings: OpenAiSettings) -> Self {
        let base = settings.base_url.trim_end_matches('/');
        let url = format!("{base}/chat/completions");
        let public_api = is_public_openai(base);
        let name = format!("openai:{}", settings.model_id);
        Self {
            client,
            settings,
            url,
            public_api,
            name,
        }
    }
}

#[async_trait]
impl Transport for OpenAiTransport {
    fn name(&self) -> &str {
        &self.name
    }

    async fn open(&self, request: &ModelRequest) -> Result<AttemptStream, Failure> {
        let s = &self.settings;
        let body = completion_body::body(
            request,
            &s.model_id,
            s.max_tokens,
            &s.tuning,
            self.public_api,
        );
        let mut builder = self
            .client
            .post(&self.url)
            .header("accept", "text/event-stream")
            .json(&body);
        if let Some(key) = &s.api_key {
            builder = builder.bearer_auth(key.expose());
        }
        let decoder = || completion_chunk::OpenAiDecoder::new(&s.model_id);
        open_stream(builder, decoder).await?.map_err(|refused| {
            compat::http_failure(
                Family::OpenAi,
                &s.model_id,
                refused.status,
                &refused.body,
                refused.retry_after,
            )
        })
    }
}
