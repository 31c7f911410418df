//! Amazon Bedrock's ConverseStream: one attempt is one `POST /model/<id>/converse-stream`, signed
//! with SigV4 (service `bedrock`) or carrying a Bedrock API key, answered with an AWS event stream.
//!
//! Invariants: the model id is percent-encoded as one path segment (`:` → `%3A`) and that exact URL
//! is both signed and sent; each attempt is signed afresh (a new `x-amz-date`, the transport's
//! clock plus the offset it learned from AWS); a signature AWS rejects as expired or not yet
//! current is re-signed with the clock of the rejection's `Date` header and sent once more, and
//! that offset is kept for the transport's later requests (see [`skew`]); the endpoint is
//! tau.toml's, else AWS_ENDPOINT_URL_BEDROCK_RUNTIME, else AWS_ENDPOINT_URL, else the region's
//! public endpoint; secrets travel only in headers.

pub mod converse_body;
pub mod converse_decoder;
pub mod converse_error;
pub mod converse_event;
pub mod eventstream;
pub mod sigv4;
pub mod skew;

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use tau_api::env::Env;
use tracing::warn;

use super::cache::CachePlan;
use super::credentials::{BedrockAuth, BedrockCredentials};
use super::http::{stream_or_refused, transport_failure};
use super::retry::{AttemptStream, Failure, Transport};
use crate::clock::{Clock, SystemClock};
use crate::model::{ModelError, ModelRequest};

/// The signing name of Bedrock Runtime.
pub const SERVICE: &str = "bedrock";
const CONTENT_TYPE: &str = "application/json";
const ACCEPT: &str = "application/vnd.amazon.eventstream";

/// The endpoint for `region`: `configured`, else the AWS variables, else the public one.
pub fn endpoint(configured: Option<&str>, env: &Env, region: &str) -> String {
    configured
        .or_else(|| env.non_empty("AWS_ENDPOINT_URL_BEDROCK_RUNTIME"))
        .or_else(|| env.non_empty("AWS_ENDPOINT_URL"))
        .map(|e| e.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| format!("https://bedrock-runtime.{region}.amazonaws.com"))
}

/// What one Bedrock model needs.
#[derive(Debug, Clone)]
pub struct BedrockSettings {
    /// Scheme and host (and port), no trailing slash.
    pub endpoint: String,
    pub credentials: BedrockCredentials,
    pub model_id: String,
    pub max_tokens: u32,
    pub cache: CachePlan,
}

/// One attempt against ConverseStream.
pub struct BedrockTransport {
    client: reqwest::Client,
    settings: BedrockSettings,
    url: reqwest::Url,
    name: String,
    clock: Arc<dyn Clock>,
    offset: skew::ClockOffset,
}

impl BedrockTransport {
    /// Fails when the endpoint and model id do not make a URL. Signs with the system clock.
    pub fn new(client: reqwest::Client, settings: BedrockSettings) -> Result<Self, String> {
        let raw = format!(
            "{}/model/{}/converse-stream",
            settings.endpoint,
            sigv4::uri_encode(&settings.model_id, false)
        );
        let url = reqwest::Url::parse(&raw)
            .map_err(|e| format!("the Bedrock endpoint is not a URL ({e}): {raw}"))?;
        let name = format!("bedrock:{}", settings.model_id);
        Ok(Self {
            client,
            settings,
            url,
            name,
            clock: Arc::new(SystemClock),
            offset: skew::ClockOffset::default(),
        })
    }

    /// Signs with `clock` instead of the system clock (tests fix the time).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sends `body`, signed (with SigV4) as of `now` plus the learned offset.
    async fn send(&self, body: &[u8], now: SystemTime) -> Result<reqwest::Response, Failure> {
        let mut builder = self
            .client
            .post(self.url.clone())
            .header("content-type", CONTENT_TYPE)
            .header("accept", ACCEPT);
        match &self.settings.credentials.auth {
            BedrockAuth::Bearer(token) => builder = builder.bearer_auth(token.expose()),
            BedrockAuth::SigV4(keys) => {
                let time = skew::signing_time(now, self.offset.get()).map_err(Failure::fatal)?;
                let amz_date = sigv4::amz_date(time);
                let scope = sigv4::Scope {
                    region: &self.settings.credentials.region,
                    service: SERVICE,
                    amz_date: &amz_date,
                };
                let signed = sigv4::sign(
                    "POST",
                    &self.url,
                    &[("content-type", CONTENT_TYPE), ("accept", ACCEPT)],
                    body,
                    scope,
                    keys,
                )
                .map_err(|e| Failure::fatal(ModelError::Request(e.to_string())))?;
                for (name, value) in signed.headers {
                    builder = builder.header(name, value);
                }
            }
        }
        builder
            .body(body.to_vec())
            .send()
            .await
            .map_err(|e| transport_failure(&e))
    }
}

#[async_trait]
impl Transport for BedrockTransport {
    fn name(&self) -> &str {
        &self.name
    }

    async fn open(&self, request: &ModelRequest) -> Result<AttemptStream, Failure> {
        let body = converse_body::body(request, self.settings.max_tokens, self.settings.cache);
        let body = serde_json::to_vec(&body)
            .map_err(|e| Failure::fatal(ModelError::Request(e.to_string())))?;
        let signed = matches!(self.settings.credentials.auth, BedrockAuth::SigV4(_));
        let mut resigned = false;
        loop {
            let response = self.send(&body, self.clock.now()).await?;
            let refused =
                match stream_or_refused(response, converse_decoder::BedrockDecoder::new).await {
                    Ok(stream) => return Ok(stream),
                    Err(refused) => refused,
                };
            let status = refused.status;
            let error_type = refused
                .headers
                .get("x-amzn-errortype")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let offset = skew::offset_from(&refused.headers, self.clock.now());
            let (code, message) = converse_error::error_parts(error_type.as_deref(), &refused.body);
            if !(signed && skew::is_skew(status, &code, &message)) {
                return Err(converse_error::error_failure(
                    &code,
                    &message,
                    Some(status),
                    refused.retry_after,
                ));
            }
            match offset {
                Some(offset) if !resigned => {
                    warn!(
                        offset_secs = offset.as_secs(),
                        "Bedrock rejected the signature's time; re-signing with AWS's clock \
                         (this machine's clock looks wrong; check NTP)"
                    );
                    self.offset.set(offset);
                    resigned = true;
                }
                offset => {
                    return Err(Failure::fatal(skew::error(offset, status, &code, &message)));
                }
            }
        }
    }
}
