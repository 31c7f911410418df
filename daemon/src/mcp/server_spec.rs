//! [`McpServerSpec`]: what the supervisor needs to start one server and offer its tools, resolved
//! from `[mcp.servers.<key>]` and tau's environment.
//!
//! Invariants: the environment a server gets is built here and only here: a small baseline (PATH,
//! HOME, USER, LANG, …) plus the names the owner listed in `env`; nothing else of tau's environment
//! (API keys) reaches a server. Tiers come only from the owner's configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use tau_api::config::McpServerConfig;
use tau_api::env::Env;

use crate::tool::Tier;

/// Variables every server gets from tau's environment when they are set.
pub const BASELINE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ", "SHELL",
];

/// The owner's tier for one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolTier {
    pub tier: Tier,
    /// The sentence a tier-2 prompt shows (required for tier 2 by the config loader).
    pub effect: Option<String>,
}

/// How restarts back off: `initial`, doubling up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The wait before restart number `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// When the supervisor gives up on a server that keeps dying: when it died `restarts` + 1 times
/// within `window`, it is not started again (until the hub restarts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartLimit {
    pub restarts: u32,
    pub window: Duration,
}

impl Default for RestartLimit {
    /// 5 restarts within 10 minutes: with the default backoff (1, 2, 4, 8, 16 s) a server that
    /// dies at once is given up on about half a minute after the hub starts.
    fn default() -> Self {
        Self {
            restarts: 5,
            window: Duration::from_secs(600),
        }
    }
}

/// One server, ready to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerSpec {
    /// The `[mcp.servers.<key>]` key.
    pub key: String,
    pub command: String,
    pub args: Vec<String>,
    /// The whole environment of the server process.
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    pub startup_timeout: Duration,
    /// A call's idle timeout: a progress notification from the server starts it over.
    pub call_timeout: Duration,
    /// A call's hard cap, however much progress the server reports.
    pub call_max: Duration,
    /// Grace between SIGTERM to the process group and SIGKILL.
    pub kill_grace: Duration,
    pub backoff: Backoff,
    pub restart_limit: RestartLimit,
    /// By the server's own tool name.
    pub tools: BTreeMap<String, ToolTier>,
}

impl McpServerSpec {
    /// A spec with defaults (30 s startup, calls idle 60 s at most and 10 min in all), no tools and the baseline environment of
    /// `env`.
    pub fn new(key: impl Into<String>, command: impl Into<String>, env: &Env) -> Self {
        Self {
            key: key.into(),
            command: command.into(),
            args: Vec::new(),
            env: baseline(env, &[]),
            cwd: None,
            startup_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            call_max: Duration::from_secs(600),
            kill_grace: Duration::from_secs(2),
            backoff: Backoff::default(),
            restart_limit: RestartLimit::default(),
            tools: BTreeMap::new(),
        }
    }

    /// The spec of `[mcp.servers.<key>]`, passing through the listed names from `env`.
    pub fn from_config(key: &str, config: &McpServerConfig, env: &Env) -> Self {
        let tools = config
            .tools
            .iter()
            .map(|(name, tool)| {
                let tier = Tier::from_number(u64::from(tool.tier)).unwrap_or(Tier::Physical);
                let tier = ToolTier {
                    tier,
                    effect: tool.effect.clone(),
                };
                (name.clone(), tier)
            })
            .collect();
        Self {
            args: config.args.clone(),
            env: baseline(env, &config.env),
            cwd: config.cwd.clone(),
            startup_timeout: Duration::from_secs(u64::from(config.startup_timeout_seconds)),
            call_timeout: Duration::from_secs(u64::from(config.call_timeout_seconds)),
            call_max: Duration::from_secs(u64::from(config.call_max_seconds)),
            tools,
            ..Self::new(key, config.command.clone(), env)
        }
    }

    /// Adds a tool tier (tests and benchmarks).
    pub fn tool(mut self, name: &str, tier: Tier, effect: Option<&str>) -> Self {
        self.tools.insert(
            name.to_owned(),
            ToolTier {
                tier,
                effect: effect.map(str::to_owned),
            },
        );
        self
    }
}

/// The specs of every `[mcp.servers.*]` of a config.
pub fn specs_from_config(config: &tau_api::config::McpConfig, env: &Env) -> Vec<McpServerSpec> {
    config
        .servers
        .iter()
        .map(|(key, server)| McpServerSpec::from_config(key, server, env))
        .collect()
}

fn baseline(env: &Env, passthrough: &[String]) -> BTreeMap<String, String> {
    BASELINE_ENV
        .iter()
        .copied()
        .chain(passthrough.iter().map(String::as_str))
        .filter_map(|name| env.get(name).map(|v| (name.to_owned(), v.to_owned())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_baseline_and_listed_names_reach_a_server() {
        let env: Env = [
            ("PATH", "/bin"),
            ("ANTHROPIC_API_KEY", "secret"),
            ("HOME_TOKEN", "t"),
        ]
        .into_iter()
        .collect();
        let config = McpServerConfig {
            command: "x".into(),
            args: vec![],
            env: vec!["HOME_TOKEN".into(), "ABSENT".into()],
            cwd: None,
            startup_timeout_seconds: 5,
            call_timeout_seconds: 6,
            call_max_seconds: 7,
            tools: BTreeMap::new(),
        };
        let spec = McpServerSpec::from_config("home", &config, &env);
        let names: Vec<&str> = spec.env.keys().map(String::as_str).collect();
        assert_eq!(names, vec!["HOME_TOKEN", "PATH"]);
        assert_eq!(spec.startup_timeout, Duration::from_secs(5));
        assert_eq!(spec.call_timeout, Duration::from_secs(6));
        assert_eq!(spec.call_max, Duration::from_secs(7));
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let b = Backoff::default();
        let secs: Vec<u64> = (1..=8).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 60, 60]);
    }
}
