//! The registry as the hub sees it from its tools: [`NodeLinks`] for each [`super::NodeTool`]
//! (a node's live link, the call timeout, the claim offered now) and [`NodeLender`], the hub core's
//! lender (the tools nodes lend, the live nodes, and the claims not offered: `lent_listing.rs`).
//!
//! Invariant: nothing here keeps state; every answer is the registry's at the moment it is asked.

use std::sync::Arc;
use std::time::Duration;

use super::link_state::LinkHandle;
use super::node_registry::NodeRegistry;
use super::node_tool::NodeLinks;
use crate::tool::Tool;

impl NodeLinks for NodeRegistry {
    fn live_link(&self, node: &str) -> Result<LinkHandle, String> {
        NodeRegistry::live_link(self, node)
    }

    fn call_timeout(&self) -> Duration {
        NodeRegistry::call_timeout(self)
    }

    fn offered_digest(&self, node: &str, tool: &str) -> Option<String> {
        NodeRegistry::offered_digest(self, node, tool)
    }
}

/// The registry as the hub core's lender: the tools nodes lend, and the live nodes.
pub struct NodeLender(pub Arc<NodeRegistry>);

impl crate::tool::ToolLender for NodeLender {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.0.tools()
    }

    fn live(&self) -> Vec<String> {
        self.0.live_names()
    }

    fn not_offered(&self) -> Vec<crate::tool::ToolSummary> {
        super::lent_listing::not_offered(&self.0)
    }
}
