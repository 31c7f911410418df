//! [`McpTool`]: one tiered MCP tool as a tau [`Tool`], so the tier gate runs it exactly like a
//! built-in one.
//!
//! Invariants: the tier and effect come from the owner's configuration, never from the server; the
//! arguments sent are exactly the model's (a JSON object, else the call is refused before anything
//! is sent); a call that times out or loses its connection is reported as "outcome unknown" and is
//! never retried here.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::result::to_output;
use super::server_spec::ToolTier;
use super::session::{CallError, CallHandle, CallLimits, ListedTool};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// Longest description the model sees of an MCP tool (it is the server's, untrusted).
pub const MAX_DESCRIPTION: usize = 1024;

/// The current connection of a server, shared by its tools.
#[derive(Default)]
pub struct HandleSlot {
    handle: Mutex<Option<CallHandle>>,
}

impl HandleSlot {
    pub(super) fn set(&self, handle: Option<CallHandle>) {
        *self.handle.lock().unwrap_or_else(PoisonError::into_inner) = handle;
    }

    fn get(&self) -> Option<CallHandle> {
        self.handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The distribution name of a server's tools: `mcp:<server>` (`dist:mcp:<server>` disables them all).
pub fn distribution(server: &str) -> String {
    format!("mcp:{server}")
}

/// One MCP tool behind the gate.
pub struct McpTool {
    spec: ToolSpec,
    server: String,
    raw: String,
    distribution: String,
    limits: CallLimits,
    slot: Arc<HandleSlot>,
}

impl McpTool {
    /// The adapter of `listed` under `model_name`, with the owner's `tier`.
    pub fn new(
        server: &str,
        model_name: String,
        listed: &ListedTool,
        tier: &ToolTier,
        limits: CallLimits,
        slot: Arc<HandleSlot>,
    ) -> Self {
        let description: String = listed.description.chars().take(MAX_DESCRIPTION).collect();
        let description = if description.trim().is_empty() {
            format!("{} (MCP server {server})", listed.name)
        } else {
            description
        };
        let mut schema = listed.input_schema.clone();
        if let Some(object) = schema.as_object_mut() {
            object.insert("type".to_owned(), json!("object"));
        } else {
            schema = json!({"type": "object"});
        }
        let mut builder = ToolSpec::builder(model_name, description).input_schema(schema);
        if let Some(effect) = &tier.effect {
            builder = builder.effect(effect.clone());
        }
        Self {
            spec: builder.tier(tier.tier).build(),
            server: server.to_owned(),
            raw: listed.name.clone(),
            distribution: distribution(server),
            limits,
            slot,
        }
    }

    /// The server key.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The server's own name of the tool.
    pub fn raw_name(&self) -> &str {
        &self.raw
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn distribution(&self) -> &str {
        &self.distribution
    }

    fn source_name(&self) -> &str {
        &self.raw
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let Value::Object(arguments) = input else {
            return Err(ToolError::InvalidInput(
                "the arguments must be a JSON object".to_owned(),
            ));
        };
        let Some(handle) = self.slot.get().filter(|h| !h.is_closed()) else {
            return Err(ToolError::Failed(format!(
                "the MCP server '{}' is not running; the tool did not run",
                self.server
            )));
        };
        let call = handle.call(&self.raw, arguments, self.limits, &ctx.progress);
        let outcome = tokio::select! {
            outcome = call => outcome,
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        match outcome {
            Ok(result) => to_output(&result),
            Err(CallError::Protocol(message)) => Err(ToolError::Failed(message)),
            Err(e @ (CallError::Timeout(_) | CallError::CapReached(_) | CallError::Closed)) => {
                tracing::warn!(server = %self.server, tool = %self.raw, "mcp call outcome unknown: {e}");
                Err(ToolError::Failed(format!(
                    "outcome unknown: the MCP server '{}' {}; the action may or may not have happened, and it was not retried",
                    self.server,
                    match e {
                        CallError::Timeout(after) => format!(
                            "neither answered nor reported progress for {} s",
                            after.as_secs_f64()
                        ),
                        CallError::CapReached(cap) => format!(
                            "was still working when the {} s limit of a call passed",
                            cap.as_secs_f64()
                        ),
                        _ => "stopped during the call".to_owned(),
                    }
                )))
            }
        }
    }
}
