//! The `tau.toml` configuration model: loading, validation, built-in defaults and the environment
//! overrides.
//!
//! A binary normally calls [`crate::installation::Installation::discover`], which runs exactly this
//! sequence. The process environment is never written: `.env` values live in the [`Env`] overlay
//! that is passed to whatever needs a variable (credentials, overrides).
//!
//! ```no_run
//! use tau_api::{config::{Config, KnownNames, Settings}, dotenv, env::Env, paths::{self, Paths}};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut env = Env::from_process();
//! let cwd = std::env::current_dir()?;
//! let user_home = env.user_home();
//! let home = paths::resolve_home(&env, &cwd, user_home.as_deref())?;
//! if let Some(file) = dotenv::load(&home.join(paths::ENV_FILE_NAME))? {
//!     for problem in &file.problems {
//!         eprintln!("{problem}");
//!     }
//!     let to_set = file.pairs_to_set(&env);
//!     env.fill(&to_set);
//! }
//! let paths = Paths::for_home(home, &env, &cwd, user_home.as_deref())?;
//! let config = Config::load_with(&paths.config_file, &env, &KnownNames::builtin())?;
//! let settings = Settings::resolve(&env, &config)?;
//! # let _ = settings; Ok(()) }
//! ```
//!
//! Invariants:
//! - Loading reads one file and builds nothing: provider and session backend names are checked
//!   against [`KnownNames`] only.
//! - Every error is one line naming the file, the dotted key, the bad value and what was expected
//!   ([`ConfigError`]); TOML syntax errors name `file:line:column`.
//! - Unknown top-level tables are ignored with one warning each, kept in [`Config::warnings`],
//!   the only place they are reported from: loading logs nothing, each binary logs them once after
//!   its logging is set up (`tau doctor` shows them as check lines instead); unknown keys anywhere
//!   else are errors.
//! - With no file, the config is the shipped template ([`TEMPLATE`]) rendered for the provider the
//!   credentials allow ([`default_provider`]), and [`Config::source`] says so.
//! - The environment overrides the file in exactly two places: TAU_HUB_PORT replaces
//!   `hub.control_port` and TAU_LANG replaces `ui.language`; a bad value is an error naming the
//!   variable.

mod error;
mod known;
mod mcp;
mod model;
mod nodes;
mod parse;
mod provider_tables;
mod reader;
mod settings;
mod spend;
mod telegram_table;
mod template;
#[cfg(test)]
mod tests;
mod tuning;
mod web_table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use error::ConfigError;
pub use known::{BUILTIN_SESSION_BACKENDS, BuiltinProvider, KnownNames, PLANNED_PROVIDERS};
pub use mcp::{
    DEFAULT_MCP_CALL_MAX_SECONDS, DEFAULT_MCP_CALL_TIMEOUT_SECONDS,
    DEFAULT_MCP_STARTUP_TIMEOUT_SECONDS, McpConfig, McpServerConfig, McpToolConfig,
    SERVER_KEY_RULE, fold_server_key, is_valid_server_key,
};
pub use model::{
    AgentConfig, CacheConfig, CacheStrategy, CacheTtl, ComponentsConfig, ContextMode,
    DEFAULT_CONTROL_PORT, DEFAULT_HEARTBEAT_SECONDS, DEFAULT_IDLE_SESSION_CLOSE_SECONDS,
    DEFAULT_MAX_TOKENS, DEFAULT_MAX_TURNS, DEFAULT_ROUTINE_APPROVAL_TIMEOUT_SECONDS,
    DEFAULT_SESSION_BACKEND, DEFAULT_WINDOW_SIZE, FallbackConfig, HubComponents, HubConfig,
    MAX_IDLE_SESSION_CLOSE_SECONDS, ModelsConfig, RoleConfig, RoutinesConfig, SessionsConfig,
    ToolComponents, UiConfig,
};
pub use nodes::{
    DEFAULT_NODE_CALL_TIMEOUT_SECONDS, DEFAULT_NODE_HEARTBEAT_SECONDS, MAX_NODE_SECONDS,
    NodeConfig, NodeTools, NodesConfig,
};
pub use provider_tables::{PROVIDER_TABLES, base_url as component_base_url};
pub use settings::{
    NodeRole, Profile, Settings, hub_port_from_env, lang_from_env, profile_from_env, role_from_env,
};
pub use spend::{RolePrice, SpendConfig};
pub use telegram_table::{
    APPROVAL_TIMEOUT_BOUNDS, DEFAULT_APPROVAL_TIMEOUT_SECONDS, DEFAULT_POLL_TIMEOUT_SECONDS,
    DEFAULT_TELEGRAM_API_BASE, POLL_TIMEOUT_BOUNDS, TELEGRAM_COMPONENT, TELEGRAM_TOKEN_VAR,
    TelegramConfig,
};
pub use template::{TEMPLATE, default_provider, render_template};
pub use tuning::{KeepAlive, ModelTuning, Temperature};
pub use web_table::{WEB_COMPONENT, WebConfig, host_of, is_loopback_host};

use crate::env::Env;

/// The name used in place of a file path in messages about the built-in defaults.
pub const DEFAULTS_ORIGIN: &str = "<built-in defaults>";

/// Where a [`Config`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// A `tau.toml` file.
    File(PathBuf),
    /// No file existed: the shipped template rendered for `provider` (chosen by credentials).
    Defaults {
        /// The provider every role of the template was set to.
        provider: BuiltinProvider,
    },
}

impl ConfigSource {
    /// Whether the config came from built-in defaults (the CLI then says once that `tau init`
    /// writes a config).
    pub fn is_defaults(&self) -> bool {
        matches!(self, ConfigSource::Defaults { .. })
    }

    /// The file, if it came from one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            ConfigSource::File(p) => Some(p),
            ConfigSource::Defaults { .. } => None,
        }
    }
}

/// A validated `tau.toml` with the environment overrides applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `[models]`: the model roles.
    pub models: ModelsConfig,
    /// `[agent]`.
    pub agent: AgentConfig,
    /// `[ui]` (`language` already reflects TAU_LANG).
    pub ui: UiConfig,
    /// `[sessions]`.
    pub sessions: SessionsConfig,
    /// `[hub]` (`control_port` already reflects TAU_HUB_PORT).
    pub hub: HubConfig,
    /// `[routines]`.
    pub routines: RoutinesConfig,
    /// `[components]`.
    pub components: ComponentsConfig,
    /// `[component.<name>]` tables, free-form, by component name (see [`Config::component`]).
    pub component_settings: BTreeMap<String, toml::Table>,
    /// `[mcp]`: MCP tool servers and the owner's tier for each of their tools.
    pub mcp: McpConfig,
    /// `[nodes]`: the node listener and the owner's tier for each tool a node lends (a hub's).
    pub nodes: NodesConfig,
    /// `[node]`: what this machine lends when it runs as a node.
    pub node: NodeConfig,
    /// Prices of roles (`price` of `[models.roles.<role>]`) and their daily budgets
    /// (`[budget.<role>] daily_usd`).
    pub spend: SpendConfig,
    /// `[web]`: the browser client taud serves.
    pub web: WebConfig,
    /// Things worth telling a person that did not stop loading (each unknown top-level table,
    /// once). Loading does not log them: the caller reports each once (a binary logs them at WARN
    /// after setting up logging).
    pub warnings: Vec<String>,
    source: ConfigSource,
}

impl Config {
    /// Loads `config_file` with the built-in provider and backend names only; see
    /// [`Config::load_with`].
    pub fn load(config_file: &Path, env: &Env) -> Result<Self, ConfigError> {
        Self::load_with(config_file, env, &KnownNames::builtin())
    }

    /// Loads `config_file`, validating provider and backend names against `known`. When the file
    /// does not exist, returns the built-in defaults ([`Config::defaults`]). `env` supplies the
    /// overrides (TAU_HUB_PORT, TAU_LANG) and, for the defaults, the credentials that choose the
    /// provider.
    pub fn load_with(
        config_file: &Path,
        env: &Env,
        known: &KnownNames,
    ) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(config_file) {
            Ok(text) => Self::from_toml_str(&text, config_file, env, known),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::defaults(env),
            Err(source) => Err(ConfigError::Read {
                file: config_file.to_path_buf(),
                source,
            }),
        }
    }

    /// Parses `text` as if read from `file` (which only labels messages and [`Config::source`]).
    pub fn from_toml_str(
        text: &str,
        file: &Path,
        env: &Env,
        known: &KnownNames,
    ) -> Result<Self, ConfigError> {
        Self::build(
            text,
            file,
            env,
            known,
            ConfigSource::File(file.to_path_buf()),
        )
    }

    /// The built-in defaults: [`TEMPLATE`] rendered for [`default_provider`]`(env)`.
    pub fn defaults(env: &Env) -> Result<Self, ConfigError> {
        let provider = default_provider(env);
        let text = render_template(provider);
        Self::build(
            &text,
            Path::new(DEFAULTS_ORIGIN),
            env,
            &KnownNames::builtin(),
            ConfigSource::Defaults { provider },
        )
    }

    fn build(
        text: &str,
        file: &Path,
        env: &Env,
        known: &KnownNames,
        source: ConfigSource,
    ) -> Result<Self, ConfigError> {
        let parsed = parse::parse_document(file, text, known)?;
        let mut config = Self {
            models: parsed.models,
            agent: parsed.agent,
            ui: parsed.ui,
            sessions: parsed.sessions,
            hub: parsed.hub,
            routines: parsed.routines,
            components: parsed.components,
            component_settings: parsed.component_settings,
            mcp: parsed.mcp,
            nodes: parsed.nodes,
            node: parsed.node,
            spend: parsed.spend,
            web: parsed.web,
            warnings: parsed.warnings,
            source,
        };
        if let Some(port) = hub_port_from_env(env)? {
            config.hub.control_port = port;
        }
        if let Some(lang) = lang_from_env(env)? {
            config.ui.language = lang;
        }
        Ok(config)
    }

    /// Where this config came from: a file, or the built-in defaults.
    pub fn source(&self) -> &ConfigSource {
        &self.source
    }

    /// A component's own settings: the `[component.<name>]` table, if the file has one.
    pub fn component(&self, name: &str) -> Option<&toml::Table> {
        self.component_settings.get(name)
    }

    /// The configuration of model role `name` (brain, fast, local, …).
    pub fn role(&self, name: &str) -> Option<&RoleConfig> {
        self.models.roles.get(name)
    }
}
