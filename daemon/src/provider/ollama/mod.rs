//! Ollama's native chat API: one attempt is one `POST /api/chat` with `stream: true`, its
//! newline-delimited JSON decoded as it arrives. The native API (not Ollama's OpenAI-compatible
//! one) is used because only it can set the context length (`num_ctx`) and `keep_alive`.
//!
//! Invariants: no credentials are sent; the status is checked before the body is read as NDJSON;
//! the base URL comes from `[component.ollama] base_url`, OLLAMA_HOST, or `http://127.0.0.1:11434`
//! (see [`tau_api::model_endpoints`]); a missing model is a fatal error that says how to pull it.

pub mod chat_body;
pub mod chat_chunk;

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use tau_api::config::ModelTuning;

use super::compat::{self, Family};
use super::http::open_stream;
use super::retry::{AttemptStream, Failure, Transport};
use crate::model::ModelRequest;

/// What one Ollama model needs.
#[derive(Debug, Clone)]
pub struct OllamaSettings {
    /// Without the trailing `/api/chat` (e.g. `http://127.0.0.1:11434`).
    pub base_url: String,
    pub model_id: String,
    pub max_tokens: u32,
    pub tuning: ModelTuning,
}

/// One attempt against `/api/chat`.
pub struct OllamaTransport {
    client: reqwest::Client,
    settings: OllamaSettings,
    url: String,
    name: String,
}

impl OllamaTransport {
    pub fn new(client: reqwest::Client, settings: OllamaSettings) -> Self {
        let url = format!("{}/api/chat", settings.base_url.trim_end_matches('/'));
        let name = format!("ollama:{}", settings.model_id);
        Self {
            client,
            settings,
            url,
            name,
        }
    }
}

/// A prefix for the ids of tool calls the server sent without one, unique to this attempt.
fn call_id_prefix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("call_{:x}_", nanos & 0xffff_ffff_ffff)
}

#[async_trait]
impl Transport for OllamaTransport {
    fn name(&self) -> &str {
        &self.name
    }

    async fn open(&self, request: &ModelRequest) -> Result<AttemptStream, Failure> {
        let s = &self.settings;
        let body = chat_body::body(request, &s.model_id, s.max_tokens, &s.tuning);
        let request = self
            .client
            .post(&self.url)
            .header("accept", "application/x-ndjson")
            .json(&body);
        let decoder = || chat_chunk::OllamaDecoder::new(&s.model_id, call_id_prefix());
        open_stream(request, decoder).await?.map_err(|refused| {
            compat::http_failure(
                Family::Ollama,
                &s.model_id,
                refused.status,
                &refused.body,
                refused.retry_after,
            )
        })
    }
}
