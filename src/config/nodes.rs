//! `[nodes]` (on a hub: the node listener, call deadline, heartbeat, and the owner's tier for each
//! tool a node lends, `[nodes.<node>.tools.<tool>]`) and `[node]` (on a node: which of its tools it
//! lends, `lend`).
//!
//! Invariants: the node listener is off unless `listen` is set, and it is the only listener that
//! may bind a non-loopback address; a node name follows the MCP server-key rule, so the
//! model-visible `node__<node>__<tool>` names are injective (see [`crate::mcp_names`]); every tool
//! entry has a tier of 0, 1 or 2, a tier-2 entry has an effect sentence, and its offered name
//! fits the providers' 64 characters; durations are capped.
//! A tool a node announces without an entry here is never offered to the model. Nothing here is
//! started: this is configuration only.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use toml::Value;

use super::error::{ConfigError, key_segment, render_value};
use super::mcp::{
    McpToolConfig, SERVER_KEY_RULE, fold_server_key, is_valid_server_key, tool_config,
};
use super::reader::Section;

/// `call_timeout` default: how long a node call may go without a result or a progress report.
pub const DEFAULT_NODE_CALL_TIMEOUT_SECONDS: u64 = 30;
/// `heartbeat` default: each side of a node link says it is alive this often.
pub const DEFAULT_NODE_HEARTBEAT_SECONDS: u64 = 15;
/// The longest `call_timeout` or `heartbeat` accepted (one hour).
pub const MAX_NODE_SECONDS: u64 = 3600;

/// The settings of `[nodes]`; every other key of it is a node's table.
const SETTINGS: &[&str] = &["listen", "call_timeout", "heartbeat"];
const NODE_KEYS: &[&str] = &["tools"];
const TOOL_KEYS: &[&str] = &["tier", "effect"];

/// `[nodes]`: what a hub accepts from nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodesConfig {
    /// `listen = "ADDRESS:PORT"`: where nodes dial in (TLS 1.3, both sides authenticated); `None`
    /// (the default): no node listener.
    pub listen: Option<SocketAddr>,
    /// `call_timeout`: seconds a node call may go without a result or progress (default 30).
    pub call_timeout_seconds: u64,
    /// `heartbeat`: seconds between heartbeats on a link (default 15); a node is live when heard
    /// within two of them.
    pub heartbeat_seconds: u64,
    /// `[nodes.<node>]`, by node name: the owner's tiers for that node's tools.
    pub nodes: BTreeMap<String, NodeTools>,
}

impl Default for NodesConfig {
    fn default() -> Self {
        Self {
            listen: None,
            call_timeout_seconds: DEFAULT_NODE_CALL_TIMEOUT_SECONDS,
            heartbeat_seconds: DEFAULT_NODE_HEARTBEAT_SECONDS,
            nodes: BTreeMap::new(),
        }
    }
}

impl NodesConfig {
    /// The owner's tier for `tool` of `node`, if written.
    pub fn tier_of(&self, node: &str, tool: &str) -> Option<&McpToolConfig> {
        self.nodes.get(node).and_then(|n| n.tools.get(tool))
    }
}

/// `[nodes.<node>]`: the owner's tier for each tool the node lends, by the node's own tool name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeTools {
    /// `[nodes.<node>.tools.<tool>]`.
    pub tools: BTreeMap<String, McpToolConfig>,
}

/// `[node]`: what this machine lends when it runs as a node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeConfig {
    /// `lend = [...]`: the tools it offers its hub; `None` (the default): all of them.
    pub lend: Option<Vec<String>>,
}

impl NodeConfig {
    /// Whether this node lends `tool`.
    pub fn lends(&self, tool: &str) -> bool {
        self.lend
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == tool))
    }
}

/// Reads `[nodes]` from the document root.
pub(crate) fn nodes(doc: &Section<'_>) -> Result<NodesConfig, ConfigError> {
    let mut out = NodesConfig::default();
    let Some(table) = doc.raw_table(
        "nodes",
        "a table: listen, call_timeout, heartbeat and [nodes.<node>.tools.<tool>] tables",
    )?
    else {
        return Ok(out);
    };
    // Node tables are named by the owner, so the section allows every key and each is checked
    // here: a setting, or a valid node name holding a table.
    let keys: Vec<&str> = table.keys().map(String::as_str).collect();
    let section = doc.child(&["nodes"], table, &keys)?;
    if let Some(value) = section.get("listen") {
        let expected = "\"ADDRESS:PORT\", e.g. \"0.0.0.0:7878\" or \"127.0.0.1:0\"";
        out.listen = Some(
            value
                .as_str()
                .and_then(|s| s.trim().parse::<SocketAddr>().ok())
                .ok_or_else(|| section.invalid("listen", value, expected))?,
        );
    }
    out.call_timeout_seconds =
        seconds(&section, "call_timeout")?.unwrap_or(out.call_timeout_seconds);
    out.heartbeat_seconds = seconds(&section, "heartbeat")?.unwrap_or(out.heartbeat_seconds);
    for (name, value) in table {
        if SETTINGS.contains(&name.as_str()) {
            continue;
        }
        check_node_name(&section, name, &out)?;
        let Value::Table(node) = value else {
            return Err(section.invalid(
                name,
                value,
                "a setting (listen, call_timeout, heartbeat) or a node's table [nodes.<node>.tools.<tool>]",
            ));
        };
        let node_section = section.child(&[name], node, NODE_KEYS)?;
        out.nodes
            .insert(name.clone(), node_tools(&node_section, name)?);
    }
    Ok(out)
}

fn check_node_name(
    section: &Section<'_>,
    name: &str,
    seen: &NodesConfig,
) -> Result<(), ConfigError> {
    let bad = |expected: String| ConfigError::Invalid {
        file: section.file().to_path_buf(),
        key: "nodes".to_owned(),
        value: format!("[nodes.{}]", key_segment(name)),
        expected,
    };
    if !is_valid_server_key(name) {
        return Err(bad(format!("node names of {SERVER_KEY_RULE}")));
    }
    if let Some(other) = seen
        .nodes
        .keys()
        .find(|other| fold_server_key(other) == fold_server_key(name))
    {
        return Err(bad(format!(
            "a name that differs from [nodes.{other}] in more than '-' versus '_' (their tools' names would clash)"
        )));
    }
    Ok(())
}

fn node_tools(node: &Section<'_>, name: &str) -> Result<NodeTools, ConfigError> {
    let mut out = NodeTools::default();
    let example = format!("tables of tool tiers, e.g. [nodes.{name}.tools.current_time]");
    let Some(tools) = node.raw_table("tools", &example)? else {
        return Ok(out);
    };
    for (tool, value) in tools {
        let Value::Table(t) = value else {
            return Err(ConfigError::Invalid {
                file: node.file().to_path_buf(),
                key: node.key(&format!("tools.{}", key_segment(tool))),
                value: render_value(value),
                expected: "a table with tier (0, 1 or 2) and effect".to_owned(),
            });
        };
        if format!("node__{name}__{tool}").len() > crate::mcp_names::MAX_NAME_LEN {
            return Err(ConfigError::Invalid {
                file: node.file().to_path_buf(),
                key: node.key(&format!("tools.{}", key_segment(tool))),
                value: render_value(value),
                expected: format!(
                    "a tool whose offered name node__{name}__<tool> fits in {} characters",
                    crate::mcp_names::MAX_NAME_LEN
                ),
            });
        }
        let entry = node.child(&["tools", tool], t, TOOL_KEYS)?;
        out.tools.insert(tool.clone(), tool_config(&entry)?);
    }
    Ok(out)
}

/// A duration key: a whole number of seconds, or a number and a unit (s, m, h) such as "30s",
/// from 1 s to [`MAX_NODE_SECONDS`].
fn seconds(section: &Section<'_>, name: &str) -> Result<Option<u64>, ConfigError> {
    let Some(value) = section.get(name) else {
        return Ok(None);
    };
    let parsed = match value {
        Value::Integer(n) => u64::try_from(*n).ok(),
        Value::String(text) => duration(text),
        _ => None,
    };
    parsed
        .filter(|s| (1..=MAX_NODE_SECONDS).contains(s))
        .map(Some)
        .ok_or_else(|| {
            section.invalid(
                name,
                value,
                "a duration from 1s to 1h: a whole number of seconds, or a number and a unit (s, m, h) such as \"30s\"",
            )
        })
}

fn duration(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit = match unit.trim() {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// Reads `[node]` from the document root.
pub(crate) fn node(doc: &Section<'_>) -> Result<NodeConfig, ConfigError> {
    let Some(node) = doc.table("node", &["lend"])? else {
        return Ok(NodeConfig::default());
    };
    let lend = node.string_list(
        "lend",
        "a list of this node's tool names, e.g. [\"current_time\"] (leave it out to lend all)",
    )?;
    Ok(NodeConfig { lend })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError, KnownNames};
    use crate::env::Env;

    const FILE: &str = "/home/u/.tau/tau.toml";

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, Path::new(FILE), &Env::new(), &KnownNames::builtin())
    }

    fn err(text: &str) -> String {
        match load(text) {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn off_by_default_with_the_default_deadlines() {
        let c = load("").unwrap();
        assert_eq!(c.nodes.listen, None);
        assert_eq!(c.nodes.call_timeout_seconds, 30);
        assert_eq!(c.nodes.heartbeat_seconds, 15);
        assert!(c.nodes.nodes.is_empty());
        assert!(c.node.lends("anything"));
    }

    #[test]
    fn listener_deadlines_tiers_and_lending_are_read() {
        let c = load(
            r#"
[hub]
role = "node"

[nodes]
listen = "0.0.0.0:7878"
call_timeout = "45s"
heartbeat = 2

[nodes.pi.tools.current_time]
tier = 0

[nodes.pi.tools.demo_physical_action]
tier = 2
effect = "Moves the demo actuator."

[node]
lend = ["current_time"]
"#,
        )
        .unwrap();
        assert_eq!(c.hub.role, Some(crate::config::NodeRole::Node));
        assert_eq!(c.nodes.listen, Some("0.0.0.0:7878".parse().unwrap()));
        assert_eq!(c.nodes.call_timeout_seconds, 45);
        assert_eq!(c.nodes.heartbeat_seconds, 2);
        assert_eq!(c.nodes.tier_of("pi", "current_time").unwrap().tier, 0);
        let physical = c.nodes.tier_of("pi", "demo_physical_action").unwrap();
        assert_eq!(physical.tier, 2);
        assert_eq!(physical.effect.as_deref(), Some("Moves the demo actuator."));
        assert!(c.nodes.tier_of("pi", "other").is_none());
        assert!(c.node.lends("current_time") && !c.node.lends("demo_physical_action"));
    }

    #[test]
    fn each_mistake_is_one_line_naming_the_key() {
        let cases = [
            (
                "[nodes]\nlisten = \"somewhere\"\n",
                "nodes.listen = \"somewhere\": expected \"ADDRESS:PORT\"",
            ),
            (
                "[nodes]\ncall_timeout = 0\n",
                "nodes.call_timeout = 0: expected a duration",
            ),
            (
                "[nodes]\nheartbeat = \"2d\"\n",
                "nodes.heartbeat = \"2d\": expected a duration",
            ),
            (
                "[nodes.Pi.tools.x]\ntier = 0\n",
                "nodes = [nodes.Pi]: expected node names of",
            ),
            ("[nodes]\npi = 3\n", "nodes.pi = 3: expected a setting"),
            (
                "[nodes.pi.tools.x]\ntier = 5\n",
                "nodes.pi.tools.x.tier = 5: expected 0 (read)",
            ),
            (
                "[nodes.pi.tools.x]\ntier = 2\n",
                "nodes.pi.tools.x.effect is missing",
            ),
            (
                "[nodes.pi.tools.x]\ntier = 0\ncolour = 1\n",
                "nodes.pi.tools.x.colour = 1: unknown key",
            ),
            ("[nodes.pi]\nlend = 1\n", "nodes.pi.lend = 1: unknown key"),
            (
                "[nodes.pi.tools.mcp__a_long_server_name__a_tool_with_a_rather_long_name]\ntier = 0\n",
                "expected a tool whose offered name node__pi__<tool> fits in 64 characters",
            ),
            (
                "[nodes.my-pi.tools.x]\ntier = 0\n[nodes.my_pi.tools.x]\ntier = 0\n",
                "differs from [nodes.my-pi]",
            ),
            (
                "[node]\nlend = \"all\"\n",
                "node.lend = \"all\": expected a list",
            ),
            (
                "[hub]\nrole = \"satellite\"\n",
                "hub.role = \"satellite\": expected \"hub\" or \"node\"",
            ),
        ];
        for (text, wanted) in cases {
            let e = err(text);
            assert!(e.contains(wanted), "{text:?} gave {e:?}, wanted {wanted:?}");
            assert!(e.starts_with(FILE) && !e.contains('\n'), "{e}");
        }
    }
}
