//! From `tau.toml` text to validated sections: TOML syntax, then each known table through a strict
//! [`Section`] reader.
//!
//! Invariants: unknown top-level *tables* are ignored with exactly one warning per table name,
//! returned as data and never logged here (each binary logs `Config::warnings` once); every other
//! unknown key, at any depth, is an error. Provider and backend names are checked against
//! [`KnownNames`] only; nothing is built.

use std::collections::BTreeMap;
use std::path::Path;

use toml::{Table, Value};

use super::error::{ConfigError, key_segment, one_of_quoted, render_value};
use super::known::{KnownNames, PLANNED_PROVIDERS};
use super::mcp::{McpConfig, mcp};
use super::model::{
    AgentConfig, CacheConfig, CacheStrategy, CacheTtl, ComponentsConfig, ContextMode,
    DEFAULT_MAX_TOKENS, FallbackConfig, HubComponents, HubConfig, MAX_IDLE_SESSION_CLOSE_SECONDS,
    ModelsConfig, RoleConfig, RoutinesConfig, SessionsConfig, ToolComponents, UiConfig,
};
use super::reader::Section;
use super::spend::{RolePrice, SpendConfig, budgets, price_of};
use crate::lang::Lang;

/// The top-level tables tau reads.
pub(crate) const KNOWN_TABLES: &[&str] = &[
    "models",
    "agent",
    "ui",
    "sessions",
    "hub",
    "routines",
    "components",
    "component",
    "mcp",
    "budget",
    "nodes",
    "node",
    "web",
];

const ROLE_KEYS: &[&str] = &[
    "provider",
    "model_id",
    "max_tokens",
    "cache",
    "fallback",
    "num_ctx",
    "keep_alive",
    "temperature",
    "price",
];
const CACHE_KEYS: &[&str] = &["strategy", "ttl", "system_prompt_ttl", "tools_ttl"];
const FALLBACK_KEYS: &[&str] = &["provider", "model_id", "max_tokens"];
const AGENT_KEYS: &[&str] = &[
    "max_turns",
    "context",
    "window_size",
    "max_total_tokens",
    "approval_timeout_seconds",
];

/// Why `context = "auto"` / `"agentic"` is refused.
const SDK_PRESET_WHY: &str = "\"auto\" and \"agentic\" are SDK presets that register untiered tools, which the tier gate would refuse";

/// The validated content of one `tau.toml`, before environment overrides.
pub(crate) struct Parsed {
    pub(crate) models: ModelsConfig,
    pub(crate) agent: AgentConfig,
    pub(crate) ui: UiConfig,
    pub(crate) sessions: SessionsConfig,
    pub(crate) hub: HubConfig,
    pub(crate) routines: RoutinesConfig,
    pub(crate) components: ComponentsConfig,
    pub(crate) component_settings: BTreeMap<String, Table>,
    pub(crate) mcp: McpConfig,
    pub(crate) nodes: super::nodes::NodesConfig,
    pub(crate) node: super::nodes::NodeConfig,
    pub(crate) spend: SpendConfig,
    pub(crate) web: super::web_table::WebConfig,
    pub(crate) warnings: Vec<String>,
}

/// Parses and validates `text`, read from `file` (used in messages only).
pub(crate) fn parse_document(
    file: &Path,
    text: &str,
    known: &KnownNames,
) -> Result<Parsed, ConfigError> {
    let root: Table = text.parse().map_err(|e: toml::de::Error| {
        ConfigError::syntax(file, text, e.span().map(|s| s.start), e.message())
    })?;

    let mut warnings = Vec::new();
    for (name, value) in &root {
        if KNOWN_TABLES.contains(&name.as_str()) {
            continue;
        }
        if !is_table_like(value) {
            return Err(ConfigError::UnknownKey {
                file: file.to_path_buf(),
                key: key_segment(name),
                value: render_value(value),
                expected: "a table; settings belong in one of [models], [agent], [ui], [sessions], [hub], [routines], [components], [component.<name>], [mcp], [budget.<role>], [nodes], [node] or [web]".to_string(),
            });
        }
        let warning = format!(
            "{}: unknown table [{}] ignored",
            file.display(),
            key_segment(name)
        );
        warnings.push(warning);
    }
    let present: Vec<&str> = root.keys().map(String::as_str).collect();
    let doc = Section::new(file, String::new(), &root, &present)?;

    let (models, prices) = models(&doc, known)?;
    let daily_usd = budgets(&doc, &models, &prices)?;
    Ok(Parsed {
        models,
        agent: agent(&doc)?,
        ui: ui(&doc)?,
        sessions: sessions(&doc, known)?,
        hub: hub(&doc)?,
        routines: routines(&doc)?,
        components: components(&doc)?,
        component_settings: component_settings(&doc)?,
        mcp: mcp(&doc)?,
        nodes: super::nodes::nodes(&doc)?,
        node: super::nodes::node(&doc)?,
        spend: SpendConfig { prices, daily_usd },
        web: super::web_table::web(&doc)?,
        warnings,
    })
}

/// A table, or an array of tables (`[[name]]`): what another tool may keep in `tau.toml`.
fn is_table_like(value: &Value) -> bool {
    match value {
        Value::Table(_) => true,
        Value::Array(items) => !items.is_empty() && items.iter().all(Value::is_table),
        _ => false,
    }
}

/// The model roles, and the price of each role that has one.
fn models(
    doc: &Section<'_>,
    known: &KnownNames,
) -> Result<(ModelsConfig, BTreeMap<String, RolePrice>), ConfigError> {
    let mut out = ModelsConfig::default();
    let mut prices = BTreeMap::new();
    let Some(models) = doc.table("models", &["roles"])? else {
        return Ok((out, prices));
    };
    let Some(roles) = models.raw_table("roles", "a table of roles, e.g. [models.roles.brain]")?
    else {
        return Ok((out, prices));
    };
    for (name, value) in roles {
        if !valid_role_name(name) {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key: "models.roles".to_string(),
                value: format!("[models.roles.{}]", key_segment(name)),
                expected: "role names of 1 to 64 letters, digits, '-' or '_'".to_string(),
            });
        }
        let Value::Table(table) = value else {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key: format!("models.roles.{}", key_segment(name)),
                value: render_value(value),
                expected: "a table with provider and model_id".to_string(),
            });
        };
        let role = models.child(&["roles", name], table, ROLE_KEYS)?;
        out.roles.insert(name.clone(), role_config(&role, known)?);
        if let Some(price) = price_of(&role)? {
            prices.insert(name.clone(), price);
        }
    }
    Ok((out, prices))
}

fn valid_role_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

fn role_config(role: &Section<'_>, known: &KnownNames) -> Result<RoleConfig, ConfigError> {
    let provider = provider_of(role, known)?;
    let model_id = model_id_of(role)?;
    let max_tokens = role
        .positive_u32("max_tokens")?
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let cache = match role.table("cache", CACHE_KEYS)? {
        None => None,
        Some(c) => Some(CacheConfig {
            strategy: c
                .choice("strategy", &CacheStrategy::ALL)?
                .unwrap_or_default(),
            ttl: c.choice("ttl", &CacheTtl::ALL)?,
            system_prompt_ttl: c.choice("system_prompt_ttl", &CacheTtl::ALL)?,
            tools_ttl: c.choice("tools_ttl", &CacheTtl::ALL)?,
        }),
    };
    let fallback = match role.table("fallback", FALLBACK_KEYS)? {
        None => None,
        Some(f) => Some(FallbackConfig {
            provider: provider_of(&f, known)?,
            model_id: model_id_of(&f)?,
            max_tokens: f.positive_u32("max_tokens")?,
        }),
    };
    Ok(RoleConfig {
        provider,
        model_id,
        max_tokens,
        cache,
        fallback,
        tuning: super::tuning::tuning_of(role)?,
    })
}

/// The `provider` key of a role or fallback table: required, and a known name.
fn provider_of(section: &Section<'_>, known: &KnownNames) -> Result<String, ConfigError> {
    let expected = one_of_quoted(known.providers());
    let name = section.string("provider", &format!("a provider name: {expected}"))?;
    let name = section.require("provider", name, &format!("a provider name: {expected}"))?;
    if known.has_provider(name) {
        return Ok(name.to_string());
    }
    let planned = if PLANNED_PROVIDERS.contains(&name) {
        format!(
            "; {} is planned and not available yet",
            render_value(&Value::String(name.to_string()))
        )
    } else {
        String::new()
    };
    Err(ConfigError::UnknownProvider {
        file: section.file().to_path_buf(),
        key: section.key("provider"),
        value: render_value(&Value::String(name.to_string())),
        planned,
        expected,
    })
}

fn model_id_of(section: &Section<'_>) -> Result<String, ConfigError> {
    let expected = "the provider's model id (a non-empty string)";
    let id = section.string("model_id", expected)?;
    Ok(section.require("model_id", id, expected)?.to_string())
}

fn agent(doc: &Section<'_>) -> Result<AgentConfig, ConfigError> {
    let mut out = AgentConfig::default();
    let Some(agent) = doc.table("agent", AGENT_KEYS)? else {
        return Ok(out);
    };
    if let Some(n) = agent.positive_u32("max_turns")? {
        out.max_turns = n;
    }
    if let Some(v @ Value::String(s)) = agent.get("context")
        && (s == "auto" || s == "agentic")
    {
        let modes: Vec<&str> = ContextMode::ALL.iter().map(|(n, _)| *n).collect();
        return Err(agent.invalid(
            "context",
            v,
            format!("{} ({SDK_PRESET_WHY})", one_of_quoted(&modes)),
        ));
    }
    if let Some(mode) = agent.choice("context", &ContextMode::ALL)? {
        out.context = mode;
    }
    if let Some(n) = agent.positive_u32("window_size")? {
        out.window_size = n;
    }
    out.max_total_tokens = agent
        .int(
            "max_total_tokens",
            1,
            i64::MAX,
            "a whole number of tokens, at least 1",
        )?
        .and_then(|n| u64::try_from(n).ok());
    out.approval_timeout_seconds = agent.positive_u32("approval_timeout_seconds")?;
    Ok(out)
}

fn ui(doc: &Section<'_>) -> Result<UiConfig, ConfigError> {
    let mut out = UiConfig::default();
    if let Some(ui) = doc.table("ui", &["language"])? {
        let langs: Vec<(&str, Lang)> = Lang::ALL.iter().map(|l| (l.as_str(), *l)).collect();
        if let Some(lang) = ui.choice("language", &langs)? {
            out.language = lang;
        }
    }
    Ok(out)
}

fn sessions(doc: &Section<'_>, known: &KnownNames) -> Result<SessionsConfig, ConfigError> {
    let mut out = SessionsConfig::default();
    let Some(sessions) = doc.table("sessions", &["backend"])? else {
        return Ok(out);
    };
    let expected = one_of_quoted(known.session_backends());
    if let Some(name) = sessions.string("backend", &expected)? {
        if !known.has_session_backend(name) {
            let value = Value::String(name.to_string());
            return Err(sessions.invalid(
                "backend",
                &value,
                format!("{expected} (unknown session backend)"),
            ));
        }
        out.backend = name.to_string();
    }
    Ok(out)
}

fn hub(doc: &Section<'_>) -> Result<HubConfig, ConfigError> {
    let mut out = HubConfig::default();
    let Some(hub) = doc.table(
        "hub",
        &[
            "heartbeat_seconds",
            "control_port",
            "idle_session_close",
            "role",
        ],
    )?
    else {
        return Ok(out);
    };
    if let Some(s) = hub.int(
        "heartbeat_seconds",
        1,
        86_400,
        "a whole number of seconds from 1 to 86400",
    )? {
        out.heartbeat_seconds = u64::try_from(s).unwrap_or(out.heartbeat_seconds);
    }
    if let Some(p) = hub.int(
        "control_port",
        0,
        65_535,
        "a port number from 0 to 65535 (0: any free port)",
    )? {
        out.control_port = u16::try_from(p).unwrap_or(out.control_port);
    }
    if let Some(value) = hub.get("idle_session_close") {
        let expected = "a duration from 1s to 7d: a whole number of seconds, or a number and a unit (s, m, h, d) such as \"10m\"";
        let seconds = match value {
            Value::Integer(n) => u64::try_from(*n).ok(),
            Value::String(text) => duration_seconds(text),
            _ => None,
        }
        .filter(|s| (1..=MAX_IDLE_SESSION_CLOSE_SECONDS).contains(s))
        .ok_or_else(|| hub.invalid("idle_session_close", value, expected.to_owned()))?;
        out.idle_session_close_seconds = seconds;
    }
    out.role = hub.choice(
        "role",
        &super::settings::NodeRole::ALL.map(|r| (r.as_str(), r)),
    )?;
    Ok(out)
}

fn routines(doc: &Section<'_>) -> Result<RoutinesConfig, ConfigError> {
    let mut out = RoutinesConfig::default();
    let Some(routines) = doc.table("routines", &["approval_timeout"])? else {
        return Ok(out);
    };
    let expected = "a duration from 10s to 1d: a whole number of seconds, or a number and a unit (s, m, h, d) such as \"10m\"";
    if let Some(value) = routines.get("approval_timeout") {
        let seconds = match value {
            Value::Integer(n) => u64::try_from(*n).ok(),
            Value::String(text) => duration_seconds(text),
            _ => None,
        }
        .filter(|s| (10..=86_400).contains(s))
        .ok_or_else(|| routines.invalid("approval_timeout", value, expected.to_owned()))?;
        out.approval_timeout_seconds = seconds;
    }
    Ok(out)
}

/// `90s`, `10m`, `2h`, `1d` as seconds (checked arithmetic; `None` for anything else).
fn duration_seconds(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit = match unit.trim() {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    number.checked_mul(unit)
}

fn components(doc: &Section<'_>) -> Result<ComponentsConfig, ConfigError> {
    let mut out = ComponentsConfig::default();
    let Some(c) = doc.table("components", &["context", "tools", "hub"])? else {
        return Ok(out);
    };
    let names = "a list of component names, e.g. [\"nodes\"]";
    out.context = c.string_list("context", names)?.unwrap_or_default();
    if let Some(tools) = c.table("tools", &["disabled"])? {
        out.tools = ToolComponents {
            disabled: tools
                .string_list(
                    "disabled",
                    "a list of tool names or \"dist:<package>\", e.g. [\"demo_physical_action\"]",
                )?
                .unwrap_or_default(),
        };
    }
    if let Some(hub) = c.table("hub", &["services"])? {
        out.hub = HubComponents {
            services: hub.string_list("services", names)?.unwrap_or_default(),
        };
    }
    Ok(out)
}

fn component_settings(doc: &Section<'_>) -> Result<BTreeMap<String, Table>, ConfigError> {
    let mut out = BTreeMap::new();
    let Some(tables) = doc.raw_table(
        "component",
        "tables of component settings, e.g. [component.telegram]",
    )?
    else {
        return Ok(out);
    };
    for (name, value) in tables {
        let Value::Table(t) = value else {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key: format!("component.{}", key_segment(name)),
                value: render_value(value),
                expected: format!(
                    "a table of the component's settings, e.g. [component.{}]",
                    key_segment(name)
                ),
            });
        };
        super::provider_tables::check(doc, name, t)?;
        super::telegram_table::check(doc, name, t)?;
        out.insert(name.clone(), t.clone());
    }
    Ok(out)
}
