//! What the hub shows about MCP servers: each server's phase, error, restarts and pid, and each tool
//! the server offers or the owner configured, with its tier and state.
//!
//! Invariant: this is a snapshot for display (`GET /status`, `GetStatus`, `ListTools`, `tau mcp`);
//! nothing reads a tier from here to decide a call.

use serde::Serialize;

use super::server_spec::ToolTier;
use super::session::ListedTool;

/// Where a server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Starting,
    Ready,
    /// Down, waiting for its next start (see `error`).
    Restarting,
    /// It died too often: it is not started again until the hub restarts (see `error`).
    GaveUp,
    Stopped,
}

/// A tool's state in the hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolState {
    /// Offered to the model under its tier.
    Offered,
    /// The server offers it but tau.toml gives it no tier: never offered.
    Untiered,
    /// tau.toml tiers it but the server does not offer it.
    Missing,
    /// Tiered, but not offered: its name belongs to another tool, or the server listed it twice
    /// (see `warning`).
    Refused,
}

/// One tool of a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolListing {
    /// The server's own name.
    pub tool: String,
    /// The model-visible name (`mcp__<server>__<tool>`, see `names`), also of a tool that is
    /// not offered.
    pub name: String,
    pub tier: Option<u8>,
    pub effect: Option<String>,
    pub state: ToolState,
    /// The server's description (untrusted).
    pub description: String,
    /// What the server claims (hints, never a tier): read-only, destructive.
    pub read_only_hint: bool,
    pub destructive_hint: bool,
    /// A tier that looks too low for what the server claims, or why the tool is refused.
    pub warning: Option<String>,
}

impl ToolListing {
    pub(super) fn new(
        tool: &ListedTool,
        name: String,
        tier: Option<&ToolTier>,
        state: ToolState,
    ) -> Self {
        Self {
            tool: tool.name.clone(),
            name,
            tier: tier.map(|t| t.tier.number()),
            effect: tier.and_then(|t| t.effect.clone()),
            state,
            description: tool.description.chars().take(300).collect(),
            read_only_hint: tool.claims_read_only(),
            destructive_hint: tool.claims_destructive(),
            warning: None,
        }
    }

    pub(super) fn missing(tool: &str, name: String, tier: &ToolTier) -> Self {
        Self {
            tool: tool.to_owned(),
            name,
            tier: Some(tier.tier.number()),
            effect: tier.effect.clone(),
            state: ToolState::Missing,
            description: String::new(),
            read_only_hint: false,
            destructive_hint: false,
            warning: None,
        }
    }
}

/// One server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerStatus {
    pub name: String,
    pub command: String,
    pub state: Phase,
    /// Why it is down (with the last lines of its stderr).
    pub error: Option<String>,
    pub restarts: u32,
    pub pid: Option<u32>,
    /// How many tool listings were applied.
    pub generation: u64,
    pub tools: Vec<ToolListing>,
    /// The last lines of its stderr.
    pub stderr_tail: Vec<String>,
}

impl ServerStatus {
    pub(super) fn new(name: &str, command: &str) -> Self {
        Self {
            name: name.to_owned(),
            command: command.to_owned(),
            state: Phase::Starting,
            error: None,
            restarts: 0,
            pid: None,
            generation: 0,
            tools: Vec::new(),
            stderr_tail: Vec::new(),
        }
    }
}
