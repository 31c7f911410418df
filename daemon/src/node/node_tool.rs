//! [`NodeTool`]: a tool a node lends, as the hub's gate and agent see it: the model-visible name
//! `node__<node>__<tool>`, the owner's tier and effect from the hub's tau.toml (never the node's
//! claim), and a call that travels over the node's live link.
//!
//! Invariants: a call to a node that is not live fails at once with `node NAME is not connected`;
//! each call waits at most the call timeout without a result or progress (progress
//! starts the wait over); a cancelled turn cancels the call on the node; a link that drops
//! mid-call is "outcome unknown", and nothing is retried here.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tau_api::config::McpToolConfig;

use super::claims::ToolClaim;
use super::link_state::{CallEvent, LinkHandle};
use crate::tool::{Tier, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// Longest description the model sees of a node's tool (the node's claim, untrusted).
pub const MAX_DESCRIPTION: usize = 1024;

/// The name the model sees for `tool` of `node`.
pub fn node_tool_name(node: &str, tool: &str) -> String {
    format!("node__{node}__{tool}")
}

/// The distribution of a node's tools: `node:<node>` (`dist:node:<node>` disables them all).
pub fn node_distribution(node: &str) -> String {
    format!("node:{node}")
}

/// Where a node tool finds its node's live link (the registry).
pub trait NodeLinks: Send + Sync {
    /// The node's link when it is live; otherwise the line the model reads.
    fn live_link(&self, node: &str) -> Result<LinkHandle, String>;
    /// How long a call may go without a result or progress.
    fn call_timeout(&self) -> Duration;
    /// The digest of the node's claim of `tool` while it is offered (claimed on its live link
    /// and unchanged since pairing); `None` otherwise.
    fn offered_digest(&self, node: &str, tool: &str) -> Option<String>;
}

/// One node tool behind the gate.
pub struct NodeTool {
    spec: ToolSpec,
    links: Arc<dyn NodeLinks>,
    node: String,
    raw: String,
    distribution: String,
    digest: String,
}

impl NodeTool {
    /// The tool `claim` of `node`, with the owner's `tier`.
    pub fn new(
        links: Arc<dyn NodeLinks>,
        node: &str,
        claim: &ToolClaim,
        tier: &McpToolConfig,
    ) -> Self {
        let description: String = claim.description.chars().take(MAX_DESCRIPTION).collect();
        let description = if description.trim().is_empty() {
            format!("{} (node {node})", claim.name)
        } else {
            format!("{description} (runs on node {node})")
        };
        let mut schema: Value =
            serde_json::from_str(&claim.input_schema_json).unwrap_or_else(|_| json!({}));
        if let Some(object) = schema.as_object_mut() {
            object.insert("type".to_owned(), json!("object"));
        } else {
            schema = json!({"type": "object"});
        }
        let mut builder =
            ToolSpec::builder(node_tool_name(node, &claim.name), description).input_schema(schema);
        if let Some(effect) = &tier.effect {
            builder = builder.effect(effect.clone());
        }
        let tier = Tier::from_number(u64::from(tier.tier)).unwrap_or(Tier::Physical);
        Self {
            spec: builder.tier(tier).build(),
            links,
            node: node.to_owned(),
            raw: claim.name.clone(),
            distribution: node_distribution(node),
            digest: claim.digest(),
        }
    }
}

#[async_trait]
impl Tool for NodeTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn distribution(&self) -> &str {
        &self.distribution
    }

    fn source_name(&self) -> &str {
        &self.raw
    }

    fn claim(&self) -> Option<&str> {
        Some(&self.digest)
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        if !input.is_object() {
            return Err(ToolError::InvalidInput(
                "the arguments must be a JSON object".to_owned(),
            ));
        }
        let node = &self.node;
        let link = self.links.live_link(node).map_err(ToolError::Failed)?;
        // What was offered (and perhaps approved) is what runs: a claim that changed since, or
        // a tool the node no longer lends, is not called.
        if self.links.offered_digest(node, &self.raw).as_deref() != Some(self.digest.as_str()) {
            return Err(ToolError::Failed(format!(
                "node {node} no longer lends {} as it was offered (it changed or was withdrawn); it did not run",
                self.raw
            )));
        }
        let timeout = self.links.call_timeout();
        let timeout_ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        let call = link.call(&self.raw, input.to_string(), timeout_ms, &self.digest);
        let Some((call_id, mut answers)) = call.await else {
            return Err(ToolError::Failed(format!("node {node} is not connected")));
        };
        loop {
            tokio::select! {
                () = ctx.cancel.cancelled() => {
                    link.cancel(call_id);
                    return Err(ToolError::Cancelled);
                }
                answer = tokio::time::timeout(timeout, answers.recv()) => match answer {
                    Err(_) => {
                        link.cancel(call_id);
                        return Err(ToolError::Failed(format!(
                            "outcome unknown: node {node} did not answer within {} s; it was not retried",
                            timeout.as_secs()
                        )));
                    }
                    Ok(None) => {
                        return Err(ToolError::Failed(format!(
                            "outcome unknown: node {node} disconnected during the call; it was not retried"
                        )));
                    }
                    Ok(Some(CallEvent::Progress(progress))) => ctx.progress.report(progress),
                    Ok(Some(CallEvent::Done { ok: true, text })) => return Ok(ToolOutput::text(text)),
                    Ok(Some(CallEvent::Done { ok: false, text })) => {
                        return Err(ToolError::Failed(text));
                    }
                },
            }
        }
    }
}
