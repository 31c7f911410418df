//! [`BuiltinTools`]: the tools built into the hub (the shipped ones, and `schedule_routine` when
//! routines are on), made once per hub and shared by every open session's catalog. A tool's spec,
//! with its JSON schema, is a few KiB that each open session would otherwise hold a copy of.
//!
//! Invariant: a session's catalog is what `crate::mcp::hub_catalog` makes, plus the node tools
//! lent now and `schedule_routine`, in the same order (shipped tools, the MCP tools offered
//! now, node tools, `schedule_routine`) with the same tools disabled; `ListTools` shows that
//! catalog ([`tool_summaries`]); only the built-in tool objects are shared.

use std::sync::Arc;

use tracing::{error, warn};

use crate::clock::SystemClock;
use crate::mcp::McpManager;
use crate::tool::builtin::{RoutineProposer, ScheduleRoutine, shipped};
use crate::tool::{CatalogError, Lenders, Tool, ToolCatalog};

/// The hub's built-in tools, shared by every session (cheap to clone).
#[derive(Clone)]
pub(crate) struct BuiltinTools {
    shipped: Arc<[Arc<dyn Tool>]>,
    schedule_routine: Option<Arc<dyn Tool>>,
    lenders: Lenders,
}

impl BuiltinTools {
    /// The shipped tools on the system clock, and `schedule_routine` when there is a `proposer`.
    pub(crate) fn new(proposer: Option<&Arc<dyn RoutineProposer>>) -> Self {
        Self {
            shipped: shipped(Arc::new(SystemClock)).into(),
            schedule_routine: proposer
                .map(|p| Arc::new(ScheduleRoutine::new(Arc::clone(p))) as Arc<dyn Tool>),
            lenders: Lenders::default(),
        }
    }

    /// These tools, with what `lenders` lend (node tools) after the MCP tools in each catalog.
    pub(crate) fn lent(mut self, lenders: Lenders) -> Self {
        self.lenders = lenders;
        self
    }

    /// Whether a session's catalog can change between turns apart from MCP servers (nodes).
    pub(crate) fn lends(&self) -> bool {
        self.lenders.is_some()
    }

    /// A session's catalog: the shipped tools, the MCP tools `mcp` offers now and
    /// `schedule_routine`, less those `disabled` names. Fails only when a shipped tool is refused.
    pub(crate) fn catalog(
        &self,
        disabled: &[String],
        mcp: &McpManager,
    ) -> Result<ToolCatalog, CatalogError> {
        let mut catalog = ToolCatalog::new();
        for tool in self.shipped.iter() {
            catalog.add(Arc::clone(tool))?;
        }
        for tool in mcp.tools() {
            let name = tool.spec().name.clone();
            if let Err(e) = catalog.add(tool) {
                error!(tool = %name, "mcp tool left out: {e}");
            }
        }
        for tool in self.lenders.tools() {
            let name = tool.spec().name.clone();
            if let Err(e) = catalog.add(tool) {
                error!(tool = %name, "node tool left out: {e}");
            }
        }
        catalog.disable(disabled);
        if let Some(tool) = &self.schedule_routine {
            if let Err(err) = catalog.add(Arc::clone(tool)) {
                warn!("schedule_routine left out: {err}");
            }
            catalog.disable(disabled);
        }
        Ok(catalog)
    }
}

/// The tools an agent may call, as `ListTools` shows them: the catalog a session would get now
/// (a node tool `offline` while its node is not live), then the MCP and node tools not offered
/// and why (less those `disabled`).
pub(crate) fn tool_summaries(
    builtin: &BuiltinTools,
    disabled: &[String],
    mcp: &McpManager,
) -> Vec<crate::tool::ToolSummary> {
    let catalog = match builtin.catalog(disabled, mcp) {
        Ok(catalog) => catalog,
        Err(error) => {
            warn!("cannot list the tools: {error}");
            return Vec::new();
        }
    };
    let live = builtin.lenders.live();
    let mut tools: Vec<crate::tool::ToolSummary> = catalog
        .entries()
        .iter()
        .map(|entry| {
            let node = entry
                .distribution()
                .strip_prefix("node:")
                .map(str::to_owned);
            let offline = node.as_ref().is_some_and(|n| !live.contains(n));
            crate::tool::ToolSummary {
                name: entry.name().to_owned(),
                tier: Some(entry.tier()),
                description: entry.spec().description.clone(),
                effect: entry.spec().effect().to_owned(),
                server: entry.distribution().strip_prefix("mcp:").map(str::to_owned),
                node,
                state: if offline { "offline" } else { "ready" }.to_owned(),
            }
        })
        .collect();
    tools.extend(crate::mcp::not_offered(mcp));
    let shown = |tool: &crate::tool::ToolSummary| {
        !disabled
            .iter()
            .any(|item| match item.strip_prefix("dist:") {
                // A node's tools are of distribution `node:<node>` (`crate::node`).
                Some(dist) => tool
                    .node
                    .as_deref()
                    .is_some_and(|node| dist.strip_prefix("node:") == Some(node)),
                None => *item == tool.name,
            })
    };
    tools.extend(builtin.lenders.not_offered().into_iter().filter(shown));
    tools
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_share_the_tool_objects_and_get_the_hub_catalog() {
        let mcp = McpManager::new(Vec::new());
        let builtin = BuiltinTools::new(None);
        let disabled = vec!["demo_physical_action".to_owned()];
        let a = builtin.catalog(&disabled, &mcp).unwrap();
        let b = builtin.catalog(&disabled, &mcp).unwrap();
        let made = crate::mcp::hub_catalog(Arc::new(SystemClock), &disabled, &mcp).unwrap();
        assert_eq!(a.names(), made.names());
        assert_eq!(a.names(), ["current_time"]);
        let (Some(x), Some(y)) = (a.get("current_time"), b.get("current_time")) else {
            panic!("current_time is in both catalogs");
        };
        assert!(
            Arc::ptr_eq(x.tool(), y.tool()),
            "one tool object for every session"
        );
        assert_eq!(
            builtin.catalog(&[], &mcp).unwrap().names(),
            ["current_time", "demo_physical_action"]
        );
    }
}
