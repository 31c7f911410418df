//! The typed sections of `tau.toml`. Each struct is one table; `Default` is the value used when
//! the table or key is absent (required keys have no default and are checked by the loader).
//!
//! Invariant: values held here have been validated (ranges, closed sets, known provider and
//! backend names), so a consumer never re-checks them.

use std::collections::BTreeMap;

use crate::lang::Lang;

use super::tuning::ModelTuning;

/// `max_tokens` of a role that does not set it.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// `[agent] max_turns` default: model calls per user turn.
pub const DEFAULT_MAX_TURNS: u32 = 12;
/// `[agent] window_size` default: messages the model sees (sliding) or keeps verbatim (summarize).
pub const DEFAULT_WINDOW_SIZE: u32 = 60;
/// `[hub] heartbeat_seconds` default.
pub const DEFAULT_HEARTBEAT_SECONDS: u64 = 30;
/// `[hub] control_port` default (TAU_HUB_PORT overrides it).
pub const DEFAULT_CONTROL_PORT: u16 = 7877;
/// `[hub] idle_session_close` default, in seconds: ten minutes.
pub const DEFAULT_IDLE_SESSION_CLOSE_SECONDS: u64 = 600;
/// The longest `[hub] idle_session_close`, in seconds: seven days.
pub const MAX_IDLE_SESSION_CLOSE_SECONDS: u64 = 7 * 86_400;
/// `[sessions] backend` default.
pub const DEFAULT_SESSION_BACKEND: &str = "file";

/// `[models]`: the model roles.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelsConfig {
    /// `[models.roles.<role>]`, by role name (brain, fast, local, …).
    pub roles: BTreeMap<String, RoleConfig>,
}

/// `[models.roles.<role>]`: which provider and model serve a role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleConfig {
    /// Provider name (built in: bedrock, anthropic, fake; more can be registered).
    pub provider: String,
    /// The provider's model id.
    pub model_id: String,
    /// Most tokens one reply may use (default [`DEFAULT_MAX_TOKENS`]).
    pub max_tokens: u32,
    /// Prompt caching (bedrock, anthropic; the fake provider ignores it).
    pub cache: Option<CacheConfig>,
    /// A second provider/model used when the first is unavailable.
    pub fallback: Option<FallbackConfig>,
    /// `num_ctx`, `keep_alive`, `temperature` (read by ollama and openai).
    pub tuning: ModelTuning,
}

/// `cache = { strategy, ttl, system_prompt_ttl, tools_ttl }` of a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheConfig {
    /// Where cache points go (default `auto`).
    pub strategy: CacheStrategy,
    /// Lifetime of the message cache point (provider default when absent).
    pub ttl: Option<CacheTtl>,
    /// Lifetime of the system prompt cache point.
    pub system_prompt_ttl: Option<CacheTtl>,
    /// Lifetime of the tool specification cache point.
    pub tools_ttl: Option<CacheTtl>,
}

/// `cache.strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheStrategy {
    /// `auto`: caching on for Claude models, off (with a warning) for others.
    #[default]
    Auto,
    /// `anthropic`: Anthropic-style cache points whatever the model id.
    Anthropic,
}

impl CacheStrategy {
    /// Every strategy with its name in `tau.toml`.
    pub const ALL: [(&'static str, CacheStrategy); 2] = [
        ("auto", CacheStrategy::Auto),
        ("anthropic", CacheStrategy::Anthropic),
    ];

    /// The name used in `tau.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheStrategy::Auto => "auto",
            CacheStrategy::Anthropic => "anthropic",
        }
    }
}

/// A cache point lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheTtl {
    /// `5m`.
    FiveMinutes,
    /// `1h`.
    OneHour,
}

impl CacheTtl {
    /// Every lifetime with its name in `tau.toml`.
    pub const ALL: [(&'static str, CacheTtl); 2] =
        [("5m", CacheTtl::FiveMinutes), ("1h", CacheTtl::OneHour)];

    /// The name used in `tau.toml` and on the wire (`5m`, `1h`).
    pub fn as_str(self) -> &'static str {
        match self {
            CacheTtl::FiveMinutes => "5m",
            CacheTtl::OneHour => "1h",
        }
    }
}

/// `fallback = { provider, model_id, max_tokens? }` of a role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FallbackConfig {
    /// Provider name.
    pub provider: String,
    /// The provider's model id.
    pub model_id: String,
    /// `None`: the role's own `max_tokens`.
    pub max_tokens: Option<u32>,
}

/// `[agent]`: limits and the model's window on a long session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentConfig {
    /// Model calls per user turn (default 12).
    pub max_turns: u32,
    /// How the model's window is kept (default sliding).
    pub context: ContextMode,
    /// Sliding: messages kept; summarize: recent messages never summarized (default 60).
    pub window_size: u32,
    /// Optional per-turn token budget.
    pub max_total_tokens: Option<u64>,
    /// Optional deadline on a tier-2 approval: when it runs out the question is cancelled and the
    /// decision is timeout (the call is refused). `None`: wait until a person answers or the
    /// channel that would answer goes away.
    pub approval_timeout_seconds: Option<u32>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_turns: DEFAULT_MAX_TURNS,
            context: ContextMode::default(),
            window_size: DEFAULT_WINDOW_SIZE,
            max_total_tokens: None,
            approval_timeout_seconds: None,
        }
    }
}

/// `[agent] context`: the conversation manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ContextMode {
    /// `sliding`: the last `window_size` messages.
    #[default]
    Sliding,
    /// `summarize`: a summary plus the recent messages.
    Summarize,
}

impl ContextMode {
    /// Every mode with its name in `tau.toml`.
    pub const ALL: [(&'static str, ContextMode); 2] = [
        ("sliding", ContextMode::Sliding),
        ("summarize", ContextMode::Summarize),
    ];

    /// The name used in `tau.toml` (and recorded with a session).
    pub fn as_str(self) -> &'static str {
        match self {
            ContextMode::Sliding => "sliding",
            ContextMode::Summarize => "summarize",
        }
    }
}

/// `[ui]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UiConfig {
    /// UI language of a channel's chrome (TAU_LANG overrides it).
    pub language: Lang,
}

/// `[sessions]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsConfig {
    /// Session store backend name (built in: file, sqlite).
    pub backend: String,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            backend: DEFAULT_SESSION_BACKEND.to_string(),
        }
    }
}

/// `[routines] approval_timeout` default: how long a routine's question waits for the owner.
pub const DEFAULT_ROUTINE_APPROVAL_TIMEOUT_SECONDS: u64 = 600;

/// `[routines]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutinesConfig {
    /// How long a tier-2 question of a routine's turn (asked with nobody attached) waits before it
    /// ends as timeout, in seconds (default 600).
    pub approval_timeout_seconds: u64,
}

impl Default for RoutinesConfig {
    fn default() -> Self {
        Self {
            approval_timeout_seconds: DEFAULT_ROUTINE_APPROVAL_TIMEOUT_SECONDS,
        }
    }
}

/// `[hub]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HubConfig {
    /// How often the hub refreshes its state file (default 30).
    pub heartbeat_seconds: u64,
    /// The loopback TCP port of gRPC and the JSON control API (default 7877; TAU_HUB_PORT
    /// overrides it; 0 asks the system for a free port).
    pub control_port: u16,
    /// `idle_session_close`: seconds after which an open session nobody uses (no turn, client or
    /// pending approval) leaves the hub's memory; its history stays stored (default 600).
    pub idle_session_close_seconds: u64,
    /// `role`: `"hub"` or `"node"` (TAU_ROLE overrides it); `None`: not written (a hub).
    pub role: Option<super::settings::NodeRole>,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            role: None,
            heartbeat_seconds: DEFAULT_HEARTBEAT_SECONDS,
            control_port: DEFAULT_CONTROL_PORT,
            idle_session_close_seconds: DEFAULT_IDLE_SESSION_CLOSE_SECONDS,
        }
    }
}

/// `[components]`: which discovered components are on. Names are not checked against what is
/// installed (`tau doctor` reports unknown ones).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ComponentsConfig {
    /// Enabled context sources; empty = every available one.
    pub context: Vec<String>,
    /// `[components.tools]`.
    pub tools: ToolComponents,
    /// `[components.hub]`.
    pub hub: HubComponents,
}

/// `[components.tools]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolComponents {
    /// Tool names (or `dist:<package>`) switched off. This can only remove tools, never add one or
    /// change a tier.
    pub disabled: Vec<String>,
}

/// `[components.hub]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HubComponents {
    /// Enabled hub services; empty = every available one.
    pub services: Vec<String>,
}
