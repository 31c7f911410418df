//! What nodes claim but the hub does not offer, as `ListTools` and `/tools` show it: each tool as
//! `node__<node>__<tool>` with the owner's tier and effect from the hub's tau.toml, and why it is
//! not offered (`untiered`, `changed` since pairing, or `offline`: tiered, but its node was not
//! heard since the hub started). The offered ones are the catalog's (`NodeRegistry::tools`).
//!
//! Invariant: a listing never offers anything; it reads the registry's views only.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::node_registry::NodeRegistry;
use super::node_tool::node_tool_name;
use crate::tool::{Tier, ToolSummary};

/// The tools paired nodes claim that are not among the tools offered now.
pub(super) fn not_offered(registry: &Arc<NodeRegistry>) -> Vec<ToolSummary> {
    let offered: BTreeSet<String> = registry
        .tools()
        .iter()
        .map(|tool| tool.spec().name.clone())
        .collect();
    let mut out = Vec::new();
    for node in registry.list() {
        for tool in node.tools {
            let name = node_tool_name(&node.name, &tool.name);
            if offered.contains(&name) {
                continue;
            }
            let owner = registry.config().tier_of(&node.name, &tool.name);
            let state = if tool.changed {
                "changed"
            } else if owner.is_none() {
                "untiered"
            } else {
                "offline"
            };
            out.push(ToolSummary {
                name,
                tier: owner.and_then(|t| Tier::from_number(u64::from(t.tier))),
                description: tool.description,
                effect: owner.and_then(|t| t.effect.clone()).unwrap_or_default(),
                server: None,
                node: Some(node.name.clone()),
                state: state.to_owned(),
            });
        }
    }
    out
}
