//! [`Lent`]: what a node lends its hub: its built-in tools and the tools of the MCP servers in its
//! own tau.toml (run by the same MCP host code a hub uses, started and stopped with the node's
//! link service), limited by `[node] lend`, each named as the node names it locally
//! (`current_time`, `mcp__<server>__<tool>`).
//!
//! Invariants: a name is lent once (a built-in wins; `check_names` refuses such a clash at start
//! anyway); an MCP tool is lent only while its server is ready and the node's own tau.toml tiers
//! it (the MCP rule: an untiered tool is offered to nobody; on the hub only the hub owner's tier
//! counts); the claims are sorted by name, so two announcements of the same tools compare equal.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tau_api::config::NodeConfig;
use tau_api::proto::v1 as pb;
use tokio::sync::watch;

use crate::clock::SystemClock;
use crate::mcp::{McpManager, McpServerSpec};
use crate::node::ToolClaim;
use crate::tool::Tool;

/// How long the node's MCP servers get to stop.
const MCP_STOP_WAIT: Duration = Duration::from_secs(5);

/// The tools a node lends (share it as `Arc`).
pub struct Lent {
    builtins: Vec<Arc<dyn Tool>>,
    mcp: McpManager,
    lend: NodeConfig,
}

impl std::fmt::Debug for Lent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lent")
            .field("mcp", &self.mcp)
            .finish_non_exhaustive()
    }
}

impl Lent {
    /// The built-in tools and the MCP servers of `mcp` (not started), as `lend` allows.
    pub fn new(lend: &NodeConfig, mcp: Vec<McpServerSpec>) -> Self {
        Self {
            builtins: crate::tool::builtin::shipped(Arc::new(SystemClock)),
            mcp: McpManager::new(mcp),
            lend: lend.clone(),
        }
    }

    /// Starts the MCP servers (each in its own task; returns at once).
    pub fn start(&self) {
        self.mcp.start();
    }

    /// Stops the MCP servers, their process groups included.
    pub async fn stop(&self) {
        self.mcp.stop(MCP_STOP_WAIT).await;
    }

    /// The `mcp` key of the node's `GET /status` (each server's state and tools); empty when the
    /// node runs no MCP server.
    pub fn status(&self) -> serde_json::Map<String, serde_json::Value> {
        if self.mcp.is_empty() {
            return serde_json::Map::new();
        }
        crate::mcp::status_json(&self.mcp)
    }

    /// Changes whenever an MCP server's tools may have changed.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.mcp.watch_tools()
    }

    /// The tools lent now, by name.
    pub fn tools(&self) -> BTreeMap<String, Arc<dyn Tool>> {
        let mut out = BTreeMap::new();
        let mcp = self.mcp.tools();
        for tool in self.builtins.iter().cloned().chain(mcp) {
            let name = tool.spec().name.clone();
            if self.lend.lends(&name) {
                out.entry(name).or_insert(tool);
            }
        }
        out
    }

    /// The tool lent now as `name`.
    pub fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools().remove(name)
    }

    /// The claims of the tools lent now, as a hello carries them.
    pub fn claims(&self) -> Vec<pb::ToolClaim> {
        self.tools()
            .values()
            .map(|tool| {
                let claim = claim_of(tool.as_ref());
                pb::ToolClaim {
                    name: claim.name,
                    description: claim.description,
                    input_schema_json: claim.input_schema_json,
                }
            })
            .collect()
    }
}

/// `tool` as the node claims it.
pub fn claim_of(tool: &dyn Tool) -> ToolClaim {
    let spec = tool.spec();
    ToolClaim {
        name: spec.name.clone(),
        description: spec.description.clone(),
        input_schema_json: serde_json::to_string(&spec.input_schema.json).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lend_limits_the_claims_sorted_by_name() {
        let all = Lent::new(&NodeConfig::default(), Vec::new());
        let names: Vec<String> = all.claims().into_iter().map(|c| c.name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert!(names.iter().any(|n| n == "current_time"), "{names:?}");
        let one = NodeConfig {
            lend: Some(vec!["current_time".into()]),
        };
        let only = Lent::new(&one, Vec::new());
        assert_eq!(only.tools().keys().collect::<Vec<_>>(), ["current_time"]);
        assert!(only.find("demo_physical_action").is_none());
        let time = only.find("current_time").unwrap();
        assert_eq!(
            claim_of(time.as_ref()).digest(),
            claim_of(time.as_ref()).digest()
        );
    }
}
