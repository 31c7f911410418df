//! What the hub core needs from the configuration ([`CoreOptions`]) and the seam through which it
//! gets a model for a role ([`ModelFactory`]).
//!
//! Invariants: the core never reads the environment or `tau.toml` itself (tests pass options and a
//! factory explicitly); a factory never logs or returns a secret; the default factory serves every
//! role with the offline demo model, so a hub with no credentials still answers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tau_api::config::{ContextMode as ConfigContextMode, RoleConfig, SpendConfig};
use tau_api::env::Env;
use tau_api::installation::Installation;

use crate::agent::Limits;
use crate::model::Model;
use crate::persona::{PERSONA_FILE, PersonaError, PersonaLoader};
use crate::provider::fake::FakeModel;
use crate::provider::{ProviderError, ProviderOptions, build_fallback_with, build_model_with};
use crate::store::ContextMode;

/// The role a session runs on when nothing pins one and tau.toml has no `brain`.
pub const DEFAULT_ROLE: &str = "brain";

/// A model could not be built for a role.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ModelFactoryError {
    pub role: String,
    pub reason: String,
}

/// Builds the model serving a role. Providers plug in here.
pub trait ModelFactory: Send + Sync {
    /// The model for `role`, whose configuration is `config` (`None` for a role tau.toml does not
    /// define, which the core only asks for when tau.toml defines no roles at all).
    fn build(
        &self,
        role: &str,
        config: Option<&RoleConfig>,
    ) -> Result<Arc<dyn Model>, ModelFactoryError>;

    /// The role's fallback model alone, which serves the role while it is over its daily budget;
    /// `None` (the default) when it has none.
    fn build_fallback(
        &self,
        _role: &str,
        _config: Option<&RoleConfig>,
    ) -> Result<Option<Arc<dyn Model>>, ModelFactoryError> {
        Ok(None)
    }
}

/// Serves every role with the fake model's offline demo.
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoModelFactory;

impl ModelFactory for DemoModelFactory {
    fn build(
        &self,
        _role: &str,
        _config: Option<&RoleConfig>,
    ) -> Result<Arc<dyn Model>, ModelFactoryError> {
        Ok(Arc::new(FakeModel::demo()))
    }
}

/// Serves every role with one shared model (tests script it; benchmarks use it).
#[derive(Clone)]
pub struct SharedModelFactory(pub Arc<dyn Model>);

impl ModelFactory for SharedModelFactory {
    fn build(
        &self,
        _role: &str,
        _config: Option<&RoleConfig>,
    ) -> Result<Arc<dyn Model>, ModelFactoryError> {
        Ok(Arc::clone(&self.0))
    }
}

/// Serves each role with the provider tau.toml names for it (`crate::provider`), credentials from
/// the installation's environment; a role tau.toml does not define (it defines none) gets the
/// offline demo model.
pub struct ProviderModelFactory {
    env: Env,
    options: ProviderOptions,
}

impl ProviderModelFactory {
    pub fn new(env: Env, options: ProviderOptions) -> Self {
        Self { env, options }
    }

    /// The factory of a discovered installation (`[component.anthropic]`, `[component.bedrock]`
    /// settings; credentials from its environment and `.env`).
    pub fn from_installation(installation: &Installation) -> Result<Self, ProviderError> {
        let options =
            ProviderOptions::from_component_settings(&installation.config.component_settings)?;
        Ok(Self::new(installation.env.clone(), options))
    }
}

impl ModelFactory for ProviderModelFactory {
    fn build(
        &self,
        role: &str,
        config: Option<&RoleConfig>,
    ) -> Result<Arc<dyn Model>, ModelFactoryError> {
        let Some(config) = config else {
            return Ok(Arc::new(FakeModel::demo()));
        };
        build_model_with(role, config, &self.env, &self.options).map_err(|e| ModelFactoryError {
            role: role.to_owned(),
            reason: e.to_string(),
        })
    }

    fn build_fallback(
        &self,
        role: &str,
        config: Option<&RoleConfig>,
    ) -> Result<Option<Arc<dyn Model>>, ModelFactoryError> {
        let Some(config) = config else {
            return Ok(None);
        };
        build_fallback_with(role, config, &self.env, &self.options).map_err(|e| ModelFactoryError {
            role: role.to_owned(),
            reason: e.to_string(),
        })
    }
}

/// The hub core's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreOptions {
    /// `[models.roles.*]` by name.
    pub roles: BTreeMap<String, RoleConfig>,
    /// The role used when none is pinned or stored.
    pub default_role: String,
    /// Per-turn limits (`[agent] max_turns`, `max_total_tokens`).
    pub limits: Limits,
    /// `[agent] context`.
    pub context: ContextMode,
    /// `[agent] window_size`: how many recent messages the model sees (see `hub::window`).
    pub window_size: usize,
    /// `[components.tools] disabled`.
    pub disabled_tools: Vec<String>,
    /// `<TAU_HOME>/persona` for an installation with a tau.toml (its persona.md is then required,
    /// see [`CoreOptions::check_persona`]) or one without a tau.toml that holds a persona.md;
    /// `None` (no tau.toml and no persona.md, the offline quick start): the shipped persona.
    pub persona_dir: Option<PathBuf>,
    /// Installation profile and host role (shown in the persona's `## Now`, stored with sessions).
    pub profile: String,
    pub host_role: String,
    /// How long a tier-2 question stays open; `None`: until decided or cancelled.
    pub approval_timeout: Option<Duration>,
    /// How long a question of a turn nobody attached started (a routine's) is held for the owner
    /// before it ends as timeout (`[routines] approval_timeout`).
    pub routine_approval_timeout: Duration,
    /// An open session nobody uses is dropped from memory after this long (`[hub]
    /// idle_session_close`).
    pub idle_after: Duration,
    /// The least time between two writes of a session's own record after turns (see
    /// `hub::runtime`); messages are durable as they are stored, whatever this is.
    pub session_record_interval: Duration,
    /// Turns that may wait behind a running one, per session.
    pub max_queued_turns: usize,
    /// Sessions held in memory at once; opening one more drops the least recently used one
    /// nobody uses, or is refused when all are in use.
    pub max_open_sessions: usize,
    /// Events kept per session for `after_seq` replays, and how far a subscriber may fall behind.
    pub replay_buffer: usize,
    pub subscriber_lag: usize,
    /// Where the start-up scan for approvals left pending records which sessions the next start
    /// must read (see `hub::scan_mark`); `None`: every start reads every session.
    pub approval_scan_mark: Option<PathBuf>,
    /// `[mcp.servers.*]`, resolved: the MCP servers the core starts, with their tools' tiers.
    pub mcp_servers: Vec<crate::mcp::McpServerSpec>,
    /// Role prices and daily budgets (`price`, `[budget.<role>]`).
    pub spend: SpendConfig,
    /// The spend ledger's file (`<data_dir>/spend.json`); `None`: spend is kept in memory only.
    pub spend_ledger: Option<PathBuf>,
    /// `<data_dir>/routines.json`: the routines the core fires (see `crate::routine`); `None`:
    /// no routines.
    pub routines_file: Option<PathBuf>,
}

/// The approval scan mark's file, next to the sessions in the data directory.
pub const APPROVAL_SCAN_MARK_FILE: &str = "approval-scan.json";
/// Default of [`CoreOptions::idle_after`] (`[hub] idle_session_close`).
pub const DEFAULT_IDLE_AFTER: Duration =
    Duration::from_secs(tau_api::config::DEFAULT_IDLE_SESSION_CLOSE_SECONDS);
/// Default of [`CoreOptions::session_record_interval`].
pub const DEFAULT_SESSION_RECORD_INTERVAL: Duration = Duration::from_secs(1);
/// Default of [`CoreOptions::max_queued_turns`].
pub const DEFAULT_MAX_QUEUED_TURNS: usize = 16;
/// Default of [`CoreOptions::max_open_sessions`].
pub const DEFAULT_MAX_OPEN_SESSIONS: usize = 256;

impl Default for CoreOptions {
    fn default() -> Self {
        Self {
            roles: BTreeMap::new(),
            default_role: DEFAULT_ROLE.to_owned(),
            limits: Limits::default(),
            context: ContextMode::Sliding,
            window_size: tau_api::config::DEFAULT_WINDOW_SIZE as usize,
            disabled_tools: Vec::new(),
            persona_dir: None,
            profile: "home".to_owned(),
            host_role: "hub".to_owned(),
            approval_timeout: None,
            routine_approval_timeout: Duration::from_secs(
                tau_api::config::DEFAULT_ROUTINE_APPROVAL_TIMEOUT_SECONDS,
            ),
            idle_after: DEFAULT_IDLE_AFTER,
            session_record_interval: DEFAULT_SESSION_RECORD_INTERVAL,
            max_queued_turns: DEFAULT_MAX_QUEUED_TURNS,
            max_open_sessions: DEFAULT_MAX_OPEN_SESSIONS,
            replay_buffer: super::events::DEFAULT_REPLAY_BUFFER,
            subscriber_lag: super::events::DEFAULT_SUBSCRIBER_LAG,
            approval_scan_mark: None,
            routines_file: None,
            mcp_servers: Vec::new(),
            spend: SpendConfig::default(),
            spend_ledger: None,
        }
    }
}

impl CoreOptions {
    /// The options of a discovered installation.
    pub fn from_installation(installation: &Installation) -> Self {
        let config = &installation.config;
        let roles = config.models.roles.clone();
        let persona_dir = &installation.paths.persona_dir;
        let persona_dir = (installation.paths.config_file.is_file()
            || persona_dir.join(PERSONA_FILE).is_file())
        .then(|| persona_dir.clone());
        Self {
            default_role: default_role(&roles),
            roles,
            limits: Limits {
                turns: Some(config.agent.max_turns),
                total_tokens: config.agent.max_total_tokens,
            },
            context: match config.agent.context {
                ConfigContextMode::Sliding => ContextMode::Sliding,
                ConfigContextMode::Summarize => ContextMode::Summarize,
            },
            window_size: config.agent.window_size as usize,
            disabled_tools: config.components.tools.disabled.clone(),
            persona_dir,
            profile: installation.settings.profile.as_str().to_owned(),
            host_role: installation.settings.role.as_str().to_owned(),
            approval_scan_mark: Some(installation.paths.data_dir.join(APPROVAL_SCAN_MARK_FILE)),
            routines_file: Some(crate::routine::routines_path(&installation.paths.data_dir)),
            approval_timeout: config
                .agent
                .approval_timeout_seconds
                .map(|s| Duration::from_secs(u64::from(s))),
            routine_approval_timeout: Duration::from_secs(config.routines.approval_timeout_seconds),
            idle_after: Duration::from_secs(config.hub.idle_session_close_seconds),
            mcp_servers: crate::mcp::specs_from_config(&config.mcp, &installation.env),
            spend: config.spend.clone(),
            spend_ledger: Some(installation.paths.data_dir.join(crate::spend::SPEND_FILE)),
            ..Self::default()
        }
    }

    /// Whether the configured persona can be used: a missing, empty or unreadable persona.md of
    /// an installation is a configuration error (`taud` refuses to start, naming the file).
    pub fn check_persona(&self) -> Result<(), PersonaError> {
        match &self.persona_dir {
            Some(dir) => PersonaLoader::check(dir),
            None => Ok(()),
        }
    }

    /// Whether every MCP tool the configuration tiers gets a name of its own (see
    /// `crate::mcp::check_names`): a clash is a configuration error (`taud` refuses to start,
    /// naming both servers and tools).
    pub fn check_mcp_names(&self) -> Result<(), crate::mcp::NameError> {
        crate::mcp::check_names(&self.mcp_servers)
    }

    /// Whether `role` may be asked for: a role of tau.toml, or the default when it defines none.
    pub fn knows_role(&self, role: &str) -> bool {
        self.roles.contains_key(role) || (self.roles.is_empty() && role == self.default_role)
    }
}

/// `brain` when tau.toml has it, else its first role, else `brain`.
pub fn default_role(roles: &BTreeMap<String, RoleConfig>) -> String {
    if roles.contains_key(DEFAULT_ROLE) {
        return DEFAULT_ROLE.to_owned();
    }
    roles
        .keys()
        .next()
        .cloned()
        .unwrap_or_else(|| DEFAULT_ROLE.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role() -> RoleConfig {
        RoleConfig {
            provider: "fake".into(),
            model_id: "m".into(),
            max_tokens: 10,
            cache: None,
            fallback: None,
            tuning: Default::default(),
        }
    }

    #[test]
    fn providers_serve_configured_roles_and_the_demo_the_rest() {
        let factory = ProviderModelFactory::new(Env::new(), ProviderOptions::default());
        assert_eq!(
            factory.build("brain", None).unwrap().name(),
            FakeModel::demo().name()
        );
        assert!(
            factory.build("fast", Some(&role())).is_ok(),
            "the fake provider needs nothing"
        );
        let mut anthropic = role();
        anthropic.provider = "anthropic".into();
        let err = factory.build("brain", Some(&anthropic)).err().unwrap();
        assert_eq!(err.role, "brain");
        assert!(err.reason.contains("ANTHROPIC"), "{err}");
    }

    #[test]
    fn the_default_role_prefers_brain() {
        let mut roles = BTreeMap::new();
        assert_eq!(default_role(&roles), "brain");
        roles.insert("fast".to_owned(), role());
        assert_eq!(default_role(&roles), "fast");
        roles.insert("brain".to_owned(), role());
        assert_eq!(default_role(&roles), "brain");
    }

    #[test]
    fn known_roles() {
        let mut options = CoreOptions::default();
        assert!(options.knows_role("brain"), "the default with no roles");
        assert!(!options.knows_role("fast"));
        options.roles.insert("fast".to_owned(), role());
        assert!(options.knows_role("fast"));
        assert!(!options.knows_role("brain"));
    }

    #[test]
    fn options_come_from_the_installation() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join("persona")).unwrap();
        std::fs::write(home.join("persona/persona.md"), "You are tau.").unwrap();
        std::fs::write(
            home.join("tau.toml"),
            "[models.roles.fast]\nprovider = \"fake\"\nmodel_id = \"m\"\n\n[agent]\nmax_turns = 3\nwindow_size = 8\napproval_timeout_seconds = 90\n\n[hub]\nidle_session_close = \"90s\"\n\n[components.tools]\ndisabled = [\"demo_physical_action\"]\n",
        )
        .unwrap();
        let env: tau_api::env::Env = [
            ("HOME", tmp.path().join("user").to_str().unwrap()),
            ("TAU_HOME", home.to_str().unwrap()),
            ("TAU_DATA_DIR", tmp.path().join("data").to_str().unwrap()),
        ]
        .into_iter()
        .collect();
        let installation = Installation::discover(env.clone(), tmp.path()).unwrap();
        let options = CoreOptions::from_installation(&installation);
        assert_eq!(options.default_role, "fast");
        assert_eq!(options.limits.turns, Some(3));
        assert_eq!(options.window_size, 8);
        assert_eq!(options.approval_timeout, Some(Duration::from_secs(90)));
        assert_eq!(options.idle_after, Duration::from_secs(90));
        assert_eq!(options.disabled_tools, vec!["demo_physical_action"]);
        assert_eq!(options.persona_dir, Some(home.join("persona")));
        options.check_persona().unwrap();

        // With a tau.toml, a missing or empty persona.md is a configuration error.
        std::fs::remove_file(home.join("persona/persona.md")).unwrap();
        let installation = Installation::discover(env.clone(), tmp.path()).unwrap();
        let options = CoreOptions::from_installation(&installation);
        assert_eq!(options.persona_dir, Some(home.join("persona")));
        let err = options.check_persona().unwrap_err();
        assert!(matches!(err, PersonaError::Missing { .. }), "{err}");
        std::fs::write(home.join("persona/persona.md"), "<!-- nothing -->\n").unwrap();
        let err = options.check_persona().unwrap_err();
        assert!(matches!(err, PersonaError::Empty { .. }), "{err}");

        // Without a tau.toml and a persona.md: the shipped persona.
        std::fs::remove_file(home.join("persona/persona.md")).unwrap();
        std::fs::remove_file(home.join("tau.toml")).unwrap();
        let installation = Installation::discover(env, tmp.path()).unwrap();
        let options = CoreOptions::from_installation(&installation);
        assert_eq!(options.persona_dir, None);
        assert_eq!(
            options.idle_after, DEFAULT_IDLE_AFTER,
            "ten minutes by default"
        );
        options.check_persona().unwrap();
    }
}
