//! Model providers: the real ones (Anthropic Messages over SSE, Bedrock ConverseStream over the
//! AWS event stream, Ollama's native chat over NDJSON, OpenAI-compatible Chat Completions over
//! SSE) and the offline fake, built for a role from its `tau.toml` settings.
//!
//! [`build_model`] turns a role into an `Arc<dyn Model>`: the provider's transport wrapped in
//! retries ([`retry`]), and in a [`fallback::FallbackModel`] when the role names a fallback.
//! [`check_credentials`] tells `tau doctor` whether a role could run, without building anything.
//!
//! Invariants: credentials come from the explicit [`Env`] only and are never logged; a missing
//! credential is a [`MissingCredentials`] naming the variables; endpoints can be moved with
//! `[component.anthropic] base_url` / `[component.bedrock] endpoint_url` in `tau.toml` or with
//! ANTHROPIC_BASE_URL / AWS_ENDPOINT_URL_BEDROCK_RUNTIME / AWS_ENDPOINT_URL (tau.toml wins), and
//! `[component.ollama] base_url` / `[component.openai] base_url` beat OLLAMA_HOST /
//! OPENAI_BASE_URL; ollama needs no credentials and openai a key only for the public API; the
//! fake provider needs nothing and stays the offline default.

pub mod anthropic;
pub mod bedrock;
pub mod cache;
pub mod chat_blocks;
pub mod compat;
pub mod credentials;
pub mod fake;
pub mod fallback;
pub mod http;
pub mod lenient_json;
pub mod ndjson;
pub mod ollama;
pub mod openai;
pub mod record_stream;
pub mod reply_mapping;
pub mod retry;
pub mod sse;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tau_api::config::{CacheConfig, ModelTuning, RoleConfig};
use tau_api::env::Env;
use tau_api::model_endpoints;

pub use credentials::{AnthropicAuth, BedrockCredentials, MissingCredentials, Secret};
pub use fallback::FallbackModel;
pub use retry::{RetryPolicy, RetryingModel};

use crate::model::Model;
use fake::FakeModel;

/// A role's model could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// A credential (or the region) is not configured.
    #[error("model role '{role}': {source}")]
    MissingCredentials {
        role: String,
        #[source]
        source: MissingCredentials,
    },
    /// The provider name is not one this build has.
    #[error("model role '{role}': unknown model provider '{provider}'")]
    UnknownProvider { role: String, provider: String },
    /// A provider setting (an endpoint URL, a component setting) is not usable.
    #[error("{0}")]
    Config(String),
    /// The HTTP client could not be set up.
    #[error("{0}")]
    Http(String),
}

/// Settings beyond a role's: endpoints, the retry schedule, the fallback's cool-down.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProviderOptions {
    /// Anthropic base URL (`[component.anthropic] base_url`); beats ANTHROPIC_BASE_URL.
    pub anthropic_base_url: Option<String>,
    /// Bedrock runtime endpoint (`[component.bedrock] endpoint_url`); beats
    /// AWS_ENDPOINT_URL_BEDROCK_RUNTIME and AWS_ENDPOINT_URL.
    pub bedrock_endpoint_url: Option<String>,
    /// Ollama base URL (`[component.ollama] base_url`); beats OLLAMA_HOST.
    pub ollama_base_url: Option<String>,
    /// OpenAI-compatible base URL with its `/v1` (`[component.openai] base_url`); beats
    /// OPENAI_BASE_URL.
    pub openai_base_url: Option<String>,
    /// The retry schedule for every provider; `None`: each provider's own.
    pub retry: Option<RetryPolicy>,
    /// How long a role stays on its fallback before the primary is tried again; `None`:
    /// [`fallback::DEFAULT_COOLDOWN`].
    pub fallback_cooldown: Option<Duration>,
}

impl ProviderOptions {
    /// Reads `[component.anthropic] base_url`, `[component.bedrock] endpoint_url`,
    /// `[component.ollama] base_url` and `[component.openai] base_url` from the
    /// `[component.<name>]` tables of `tau.toml`.
    pub fn from_component_settings(
        settings: &BTreeMap<String, toml::Table>,
    ) -> Result<Self, ProviderError> {
        let url = |component: &str, key: &str| -> Result<Option<String>, ProviderError> {
            match settings.get(component).and_then(|t| t.get(key)) {
                None => Ok(None),
                Some(toml::Value::String(s)) if is_http_url(s) => Ok(Some(s.clone())),
                Some(_) => Err(ProviderError::Config(format!(
                    "component.{component}.{key}: expected an http:// or https:// URL"
                ))),
            }
        };
        Ok(Self {
            anthropic_base_url: url("anthropic", "base_url")?,
            bedrock_endpoint_url: url("bedrock", "endpoint_url")?,
            ollama_base_url: url("ollama", "base_url")?,
            openai_base_url: url("openai", "base_url")?,
            retry: None,
            fallback_cooldown: None,
        })
    }
}

fn is_http_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

/// One provider + model of a role (the role itself, or its fallback).
#[derive(Debug, Clone, Copy)]
struct Target<'a> {
    provider: &'a str,
    model_id: &'a str,
    max_tokens: u32,
    cache: Option<&'a CacheConfig>,
    tuning: &'a ModelTuning,
}

fn targets(role: &RoleConfig) -> (Target<'_>, Option<Target<'_>>) {
    let primary = Target {
        provider: &role.provider,
        model_id: &role.model_id,
        max_tokens: role.max_tokens,
        cache: role.cache.as_ref(),
        tuning: &role.tuning,
    };
    let fallback = role.fallback.as_ref().map(|f| Target {
        provider: &f.provider,
        model_id: &f.model_id,
        max_tokens: f.max_tokens.unwrap_or(role.max_tokens),
        cache: role.cache.as_ref(),
        tuning: &role.tuning,
    });
    (primary, fallback)
}

/// Builds the model of `role_name` with the default [`ProviderOptions`].
pub fn build_model(
    role_name: &str,
    role: &RoleConfig,
    env: &Env,
) -> Result<Arc<dyn Model>, ProviderError> {
    build_model_with(role_name, role, env, &ProviderOptions::default())
}

/// Builds the model of `role_name`: its provider with retries, behind its fallback if it has one.
pub fn build_model_with(
    role_name: &str,
    role: &RoleConfig,
    env: &Env,
    options: &ProviderOptions,
) -> Result<Arc<dyn Model>, ProviderError> {
    let (primary, fallback) = targets(role);
    let needs_http = std::iter::once(primary)
        .chain(fallback)
        .any(|t| t.provider != "fake");
    let client = if needs_http {
        Some(http::build_client(env)?)
    } else {
        None
    };
    let first = build_target(role_name, primary, env, options, client.as_ref())?;
    let Some(fallback) = fallback else {
        return Ok(first);
    };
    let second = build_target(role_name, fallback, env, options, client.as_ref())?;
    let cooldown = options
        .fallback_cooldown
        .unwrap_or(fallback::DEFAULT_COOLDOWN);
    Ok(Arc::new(FallbackModel::new(first, second, cooldown)))
}

/// Builds only the fallback model of `role_name` (with retries), for callers that must reach it
/// directly (a role over its daily budget); `None` when the role has no fallback.
pub fn build_fallback_with(
    role_name: &str,
    role: &RoleConfig,
    env: &Env,
    options: &ProviderOptions,
) -> Result<Option<Arc<dyn Model>>, ProviderError> {
    let (_, Some(fallback)) = targets(role) else {
        return Ok(None);
    };
    let client = if fallback.provider == "fake" {
        None
    } else {
        Some(http::build_client(env)?)
    };
    build_target(role_name, fallback, env, options, client.as_ref()).map(Some)
}

fn build_target(
    role_name: &str,
    target: Target<'_>,
    env: &Env,
    options: &ProviderOptions,
    client: Option<&reqwest::Client>,
) -> Result<Arc<dyn Model>, ProviderError> {
    let missing = |source| ProviderError::MissingCredentials {
        role: role_name.to_owned(),
        source,
    };
    let client = || {
        client
            .cloned()
            .ok_or_else(|| ProviderError::Http("no HTTP client".into()))
    };
    match target.provider {
        "fake" => Ok(Arc::new(FakeModel::demo())),
        "anthropic" => {
            let auth = AnthropicAuth::from_env(env).map_err(missing)?;
            let base_url = options
                .anthropic_base_url
                .clone()
                .or_else(|| env.non_empty("ANTHROPIC_BASE_URL").map(str::to_owned))
                .unwrap_or_else(|| anthropic::DEFAULT_BASE_URL.to_owned());
            if !is_http_url(&base_url) {
                return Err(ProviderError::Config(format!(
                    "the Anthropic base URL must start with http:// or https://: {base_url}"
                )));
            }
            let transport = anthropic::AnthropicTransport::new(
                client()?,
                anthropic::AnthropicSettings {
                    base_url,
                    auth,
                    model_id: target.model_id.to_owned(),
                    max_tokens: target.max_tokens,
                    cache: cache::CachePlan::new(target.cache, target.model_id),
                },
            );
            let policy = options.retry.unwrap_or_else(RetryPolicy::anthropic);
            Ok(Arc::new(RetryingModel::new(transport, policy)))
        }
        "bedrock" => {
            let credentials = BedrockCredentials::from_env(env).map_err(missing)?;
            let endpoint = bedrock::endpoint(
                options.bedrock_endpoint_url.as_deref(),
                env,
                &credentials.region,
            );
            if !is_http_url(&endpoint) {
                return Err(ProviderError::Config(format!(
                    "the Bedrock endpoint must start with http:// or https://: {endpoint}"
                )));
            }
            let transport = bedrock::BedrockTransport::new(
                client()?,
                bedrock::BedrockSettings {
                    endpoint,
                    credentials,
                    model_id: target.model_id.to_owned(),
                    max_tokens: target.max_tokens,
                    cache: cache::CachePlan::new(target.cache, target.model_id),
                },
            )
            .map_err(ProviderError::Config)?;
            let policy = options.retry.unwrap_or_else(RetryPolicy::bedrock);
            Ok(Arc::new(RetryingModel::new(transport, policy)))
        }
        "ollama" => {
            let base_url =
                model_endpoints::ollama_base_url(options.ollama_base_url.as_deref(), env);
            if !is_http_url(&base_url) {
                return Err(ProviderError::Config(format!(
                    "the Ollama base URL must start with http:// or https://: {base_url}"
                )));
            }
            let transport = ollama::OllamaTransport::new(
                client()?,
                ollama::OllamaSettings {
                    base_url,
                    model_id: target.model_id.to_owned(),
                    max_tokens: target.max_tokens,
                    tuning: target.tuning.clone(),
                },
            );
            let policy = options.retry.unwrap_or_else(RetryPolicy::local);
            Ok(Arc::new(RetryingModel::new(transport, policy)))
        }
        "openai" => {
            let base_url =
                model_endpoints::openai_base_url(options.openai_base_url.as_deref(), env);
            if !is_http_url(&base_url) {
                return Err(ProviderError::Config(format!(
                    "the OpenAI base URL must start with http:// or https://: {base_url}"
                )));
            }
            let api_key = model_endpoints::openai_key(env, &base_url).map_err(missing)?;
            let transport = openai::OpenAiTransport::new(
                client()?,
                openai::OpenAiSettings {
                    base_url,
                    api_key,
                    model_id: target.model_id.to_owned(),
                    max_tokens: target.max_tokens,
                    tuning: target.tuning.clone(),
                },
            );
            let policy = options.retry.unwrap_or_else(RetryPolicy::anthropic);
            Ok(Arc::new(RetryingModel::new(transport, policy)))
        }
        other => Err(ProviderError::UnknownProvider {
            role: role_name.to_owned(),
            provider: other.to_owned(),
        }),
    }
}

/// Whether `role` (and its fallback) has the credentials it needs, without building a client
/// (`ollama` needs none; `openai` needs a key only for the public API, which depends on
/// `[component.openai] base_url`, so building the model is what checks it).
pub fn check_credentials(role: &RoleConfig, env: &Env) -> Result<(), MissingCredentials> {
    let (primary, fallback) = targets(role);
    for target in std::iter::once(primary).chain(fallback) {
        match target.provider {
            "anthropic" => {
                AnthropicAuth::from_env(env)?;
            }
            "bedrock" => {
                BedrockCredentials::from_env(env)?;
            }
            _ => {}
        }
    }
    Ok(())
}
