//! The [`Tool`] trait and what a call gives and returns: [`ToolContext`], [`ToolOutput`], [`ToolError`].
//!
//! Invariants: a tool is only ever called through a gate `Permit` (see `gate`), never directly by the
//! loop; a tool's error becomes an error `toolResult` the model reads, it never stops the turn; the
//! cancellation token in the context is the turn's, and a tool that can take long should watch it.

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::progress::ProgressReporter;
use super::spec::ToolSpec;
use crate::message::{ToolResult, ToolResultContent, ToolResultStatus};

/// The distribution name of the tools that ship inside taud.
pub const BUILTIN_DISTRIBUTION: &str = "taud";

/// What a tool call knows besides its input.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The model's id for this call (the `toolUseId`).
    pub tool_use_id: String,
    pub session_id: String,
    pub channel: String,
    /// Cancelled when the turn is cancelled; long-running tools should stop early.
    pub cancel: CancellationToken,
    /// Where a long-running tool reports what it is doing (clients show the latest report).
    pub progress: ProgressReporter,
}

/// What a tool returns on success: the content blocks of its `toolResult`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<ToolResultContent>,
}

impl ToolOutput {
    /// One text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ToolResultContent::Text(text.into())],
        }
    }

    /// One JSON block.
    pub fn json(value: Value) -> Self {
        Self {
            content: vec![ToolResultContent::Json(value)],
        }
    }

    /// The output as a success `toolResult` for `tool_use_id`.
    pub fn into_result(self, tool_use_id: impl Into<String>) -> ToolResult {
        ToolResult {
            tool_use_id: tool_use_id.into(),
            status: ToolResultStatus::Success,
            content: self.content,
        }
    }
}

/// Why a tool call failed. The model reads `Error: <display>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The input does not match what the tool needs.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// The turn was cancelled while the tool ran.
    #[error("Tool execution cancelled")]
    Cancelled,
    /// The tool panicked; the panic was contained.
    #[error("the tool crashed: {0}")]
    Panicked(String),
}

impl ToolError {
    /// The text the model reads for this error.
    pub fn model_text(&self) -> String {
        match self {
            Self::Cancelled => self.to_string(),
            other => format!("Error: {other}"),
        }
    }
}

/// A tool tau can call. Implementations must be cheap to share (`Arc<dyn Tool>`).
#[async_trait]
pub trait Tool: Send + Sync {
    /// The declaration: name, description, input schema and `annotations.tau = {tier, effect}`.
    fn spec(&self) -> &ToolSpec;

    /// The distribution (component) this tool comes from; `[components.tools] disabled` can name it
    /// as `dist:<name>`.
    fn distribution(&self) -> &str {
        BUILTIN_DISTRIBUTION
    }

    /// The tool's own name where it comes from (an MCP server's name for it); a built-in's is
    /// its name. With the distribution and the effect it says which tool an approval covered.
    fn source_name(&self) -> &str {
        &self.spec().name
    }

    /// What the tool's source claimed it is, as a digest, when that source is another party
    /// whose tool may change under the same name (a node's: its name, description and schema).
    /// An approval that binds a tool binds this too, so it never covers a changed claim.
    fn claim(&self) -> Option<&str> {
        None
    }

    /// Runs the tool with the model's (untrusted) input.
    async fn call(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_texts_for_the_model() {
        assert_eq!(
            ToolError::Failed("disk full".into()).model_text(),
            "Error: disk full"
        );
        assert_eq!(
            ToolError::Cancelled.model_text(),
            "Tool execution cancelled"
        );
        assert_eq!(
            ToolError::InvalidInput("missing action".into()).model_text(),
            "Error: invalid input: missing action"
        );
    }

    #[test]
    fn output_becomes_a_success_result() {
        let result = ToolOutput::text("ok").into_result("t1");
        assert_eq!(result.status, ToolResultStatus::Success);
        assert_eq!(result.tool_use_id, "t1");
        assert_eq!(result.content, vec![ToolResultContent::Text("ok".into())]);
    }
}
