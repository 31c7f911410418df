//! The components of tau: every pluggable part (model providers, session backends, tools, context
//! sources, hub services), described as data so a client can list and check them without linking
//! the daemon that implements them.
//!
//! In Rust there are no entry points to discover: the components are the ones built into `taud`
//! ([`BUILTIN_COMPONENTS`]), and `[components]` in `tau.toml` switches some of them off. This module
//! computes what a configuration makes of them ([`component_states`]) and which names in
//! `[components]` nothing provides ([`unknown_names`]).
//!
//! Invariants:
//! - the table is the single description of what `taud` ships: its provider and backend names
//!   equal [`crate::config::BuiltinProvider::ALL`] + [`crate::config::PLANNED_PROVIDERS`] and
//!   [`crate::config::BUILTIN_SESSION_BACKENDS`] (tested
//!   here), and its tools equal taud's shipped tools with their tiers (tested in taud);
//! - `[components.tools] disabled` can only switch a tool off; nothing here switches anything on
//!   that the table does not have;
//! - the core hub services (the control API and gRPC) always run: `[components.hub] services`
//!   selects among optional services only, so naming a core service is accepted and changes
//!   nothing;
//! - every built-in component has the version of this build ([`crate::VERSION`]); the table alone
//!   never has a `load_error`: a hub service that failed to build or start is known only to the
//!   running hub, which reports it in `GET /status` ([`HubServiceReport`]); a client merges that in
//!   with [`merge_hub_report`].

mod hub_report;

pub use hub_report::{HubServiceReport, ServiceState, merge_hub_report, reports_from_status};

use serde::Serialize;

use crate::config::{ComponentsConfig, Config, TELEGRAM_COMPONENT, WEB_COMPONENT};

/// The distribution every built-in component ships in (`dist:taud` in `[components.tools]
/// disabled` names them all).
pub const BUILTIN_DISTRIBUTION: &str = "taud";

/// The groups of components, one per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ComponentKind {
    /// A model provider (`[models.roles.*] provider`).
    Provider,
    /// A session store backend (`[sessions] backend`).
    SessionBackend,
    /// A tool the model may call, with its tier.
    Tool,
    /// A context source that fills the dynamic part of the system prompt.
    ContextSource,
    /// A service the hub runs.
    HubService,
}

impl ComponentKind {
    /// Every kind, in the order they are listed.
    pub const ALL: [ComponentKind; 5] = [
        ComponentKind::Provider,
        ComponentKind::SessionBackend,
        ComponentKind::Tool,
        ComponentKind::ContextSource,
        ComponentKind::HubService,
    ];

    /// The kind's name (`provider`, `session_backend`, `tool`, `context_source`, `hub_service`).
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentKind::Provider => "provider",
            ComponentKind::SessionBackend => "session_backend",
            ComponentKind::Tool => "tool",
            ComponentKind::ContextSource => "context_source",
            ComponentKind::HubService => "hub_service",
        }
    }

    /// The group's name as a heading (`providers`, `sessions`, `tools`, `context`,
    /// `hub_services`).
    pub fn group(self) -> &'static str {
        match self {
            ComponentKind::Provider => "providers",
            ComponentKind::SessionBackend => "sessions",
            ComponentKind::Tool => "tools",
            ComponentKind::ContextSource => "context",
            ComponentKind::HubService => "hub_services",
        }
    }
}

/// Whether a component is in this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Built in and usable.
    Built,
    /// Planned: known by name, not in this build.
    Planned,
}

/// One component of the built-in table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinComponent {
    /// Its kind (group).
    pub kind: ComponentKind,
    /// Its name, as `tau.toml` writes it.
    pub name: &'static str,
    /// Built or planned.
    pub availability: Availability,
    /// A tool's permission tier (0 READ, 1 DIGITAL_WRITE, 2 PHYSICAL); `None` for other kinds.
    pub tier: Option<u8>,
    /// What it is, in a few words.
    pub summary: &'static str,
}

const fn built(kind: ComponentKind, name: &'static str, summary: &'static str) -> BuiltinComponent {
    BuiltinComponent {
        kind,
        name,
        availability: Availability::Built,
        tier: None,
        summary,
    }
}

const fn tool(name: &'static str, tier: u8, summary: &'static str) -> BuiltinComponent {
    BuiltinComponent {
        kind: ComponentKind::Tool,
        name,
        availability: Availability::Built,
        tier: Some(tier),
        summary,
    }
}

/// Every component `taud` ships, grouped by kind. There are no built-in context sources yet.
pub const BUILTIN_COMPONENTS: &[BuiltinComponent] = &[
    built(
        ComponentKind::Provider,
        "bedrock",
        "Amazon Bedrock (Converse API)",
    ),
    built(
        ComponentKind::Provider,
        "anthropic",
        "the Anthropic Messages API",
    ),
    built(
        ComponentKind::Provider,
        "fake",
        "an offline scripted model (no credentials)",
    ),
    built(
        ComponentKind::Provider,
        "ollama",
        "a local Ollama server (native /api/chat; no credentials)",
    ),
    built(
        ComponentKind::Provider,
        "openai",
        "any OpenAI-compatible Chat Completions endpoint",
    ),
    built(
        ComponentKind::SessionBackend,
        "file",
        "one directory per session (JSON files, events.jsonl)",
    ),
    built(
        ComponentKind::SessionBackend,
        "sqlite",
        "one SQLite database (WAL)",
    ),
    tool("current_time", 0, "the current date and time"),
    tool(
        "demo_physical_action",
        2,
        "a demonstration physical action (asks every time)",
    ),
    built(
        ComponentKind::HubService,
        "control-api",
        "the JSON control API (GET /health, GET /status)",
    ),
    built(
        ComponentKind::HubService,
        "grpc",
        "the gRPC API (Unix socket and loopback TCP)",
    ),
    built(
        ComponentKind::HubService,
        TELEGRAM_COMPONENT,
        "the Telegram channel: chat and approval buttons ([component.telegram])",
    ),
    built(
        ComponentKind::HubService,
        WEB_COMPONENT,
        "the web client: its page, JSON and Server-Sent Events ([web] listen)",
    ),
];

/// Hub services that always run, whatever `[components.hub] services` says.
pub const CORE_HUB_SERVICES: &[&str] = &["control-api", "grpc"];

/// The built-in components of one kind, in table order.
pub fn builtin_of(kind: ComponentKind) -> impl Iterator<Item = &'static BuiltinComponent> {
    BUILTIN_COMPONENTS.iter().filter(move |c| c.kind == kind)
}

/// A component as a configuration makes it: on or off, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentState {
    /// Its group heading (`providers`, `sessions`, …).
    pub group: &'static str,
    /// Its kind.
    pub kind: ComponentKind,
    /// Its name.
    pub name: String,
    /// The distribution it ships in.
    pub distribution: String,
    /// Its version.
    pub version: String,
    /// Whether it is on.
    pub enabled: bool,
    /// A tool's tier (0, 1 or 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier: Option<u8>,
    /// Why it is on or off, or how it is used, in a few words.
    pub note: Option<String>,
    /// Why it failed to load, build or start, if it did (only from a running hub's report).
    pub load_error: Option<String>,
}

/// Every built-in component with its state under `config`, grouped by kind in table order.
///
/// - providers: on when built (a planned one is off), noted with the roles that use them;
/// - session backends: both on; the one `[sessions] backend` selects is noted as in use;
/// - tools: on unless `[components.tools] disabled` names them (or `dist:taud`);
/// - context sources: on when `[components] context` is empty or names them;
/// - hub services: the core ones always on; others on when `[components.hub] services` is empty
///   or names them.
pub fn component_states(config: &Config) -> Vec<ComponentState> {
    ComponentKind::ALL
        .iter()
        .flat_map(|kind| builtin_of(*kind))
        .map(|c| state_of(c, config))
        .collect()
}

fn state_of(c: &BuiltinComponent, config: &Config) -> ComponentState {
    let (enabled, note) = match c.kind {
        ComponentKind::Provider => provider_state(c, config),
        ComponentKind::SessionBackend => {
            if config.sessions.backend == c.name {
                (
                    true,
                    Some("in use, selected by [sessions] backend".to_string()),
                )
            } else {
                (
                    true,
                    Some(format!(
                        "available; [sessions] backend = \"{}\" selects it",
                        c.name
                    )),
                )
            }
        }
        ComponentKind::Tool => match tool_disabled_by(c.name, &config.components) {
            Some(item) => (
                false,
                Some(format!(
                    "switched off by [components.tools] disabled ({item})"
                )),
            ),
            None => (true, None),
        },
        ComponentKind::ContextSource => {
            let list = &config.components.context;
            if list.is_empty() || list.iter().any(|n| n == c.name) {
                (true, None)
            } else {
                (false, Some("not in [components] context".to_string()))
            }
        }
        ComponentKind::HubService => {
            let list = &config.components.hub.services;
            if CORE_HUB_SERVICES.contains(&c.name) {
                (true, Some("core: always runs".to_string()))
            } else if c.name == TELEGRAM_COMPONENT && config.component(TELEGRAM_COMPONENT).is_none()
            {
                (
                    false,
                    Some("not configured: add [component.telegram]".to_string()),
                )
            } else if c.name == WEB_COMPONENT && config.web.listen.is_none() {
                (false, Some("not served: set [web] listen".to_string()))
            } else if list.is_empty() || list.iter().any(|n| n == c.name) {
                (true, None)
            } else {
                (false, Some("not in [components.hub] services".to_string()))
            }
        }
    };
    ComponentState {
        group: c.kind.group(),
        kind: c.kind,
        name: c.name.to_string(),
        distribution: BUILTIN_DISTRIBUTION.to_string(),
        version: crate::VERSION.to_string(),
        enabled,
        tier: c.tier,
        note,
        load_error: None,
    }
}

fn provider_state(c: &BuiltinComponent, config: &Config) -> (bool, Option<String>) {
    let mut users = Vec::new();
    for (role, rc) in &config.models.roles {
        if rc.provider == c.name {
            users.push(role.clone());
        }
        if rc.fallback.as_ref().is_some_and(|f| f.provider == c.name) {
            users.push(format!("{role} (fallback)"));
        }
    }
    let used = if users.is_empty() {
        None
    } else {
        Some(format!("used by {}", users.join(", ")))
    };
    match c.availability {
        Availability::Built => (true, used),
        Availability::Planned => {
            let mut note = "planned; not in this build".to_string();
            if let Some(used) = used {
                note.push_str("; ");
                note.push_str(&used);
            }
            (false, Some(note))
        }
    }
}

/// The item of `[components.tools] disabled` that switches tool `name` off, if any.
fn tool_disabled_by<'a>(name: &str, components: &'a ComponentsConfig) -> Option<&'a str> {
    components
        .tools
        .disabled
        .iter()
        .find(|item| match item.strip_prefix("dist:") {
            Some(dist) => dist == BUILTIN_DISTRIBUTION,
            None => item.as_str() == name,
        })
        .map(String::as_str)
}

/// A name in `[components]` that no component provides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnknownName {
    /// The dotted key that holds it (`components.context`, `components.tools.disabled`,
    /// `components.hub.services`).
    pub key: &'static str,
    /// The name as written.
    pub name: String,
}

/// Every name in `[components]` that nothing provides, in file order per key: context sources,
/// then disabled tools (a tool name, or `dist:<distribution>`), then hub services.
pub fn unknown_names(components: &ComponentsConfig) -> Vec<UnknownName> {
    let provided = |kind: ComponentKind, name: &str| builtin_of(kind).any(|c| c.name == name);
    let mut out = Vec::new();
    for name in &components.context {
        if !provided(ComponentKind::ContextSource, name) {
            out.push(UnknownName {
                key: "components.context",
                name: name.clone(),
            });
        }
    }
    for item in &components.tools.disabled {
        // MCP tools (`mcp__<server>__<tool>`, `dist:mcp:<server>`) come from servers, not from
        // this table: they are not checked here.
        let known = match item.strip_prefix("dist:") {
            Some(dist) => dist == BUILTIN_DISTRIBUTION || dist.starts_with("mcp:"),
            None => provided(ComponentKind::Tool, item) || item.starts_with("mcp__"),
        };
        if !known {
            out.push(UnknownName {
                key: "components.tools.disabled",
                name: item.clone(),
            });
        }
    }
    for name in &components.hub.services {
        if !provided(ComponentKind::HubService, name) {
            out.push(UnknownName {
                key: "components.hub.services",
                name: name.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests;
