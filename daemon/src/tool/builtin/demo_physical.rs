//! `demo_physical_action` (tier 2): a demo that moves nothing and exists to show the approval flow.
//!
//! Invariants: it never touches a device, a file or the network; it only reports what it would have
//! done. Being tier 2, it runs only after an explicit approval or an exemption.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::tool::{Tier, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// Longest `action` the tool accepts, in characters.
const MAX_ACTION_CHARS: usize = 500;

/// The `demo_physical_action` tool.
pub struct DemoPhysicalAction {
    spec: ToolSpec,
}

impl DemoPhysicalAction {
    pub const NAME: &'static str = "demo_physical_action";
    pub const EFFECT: &'static str = "Demo: simulates a physical action; no real device moves.";

    pub fn new() -> Self {
        let spec = ToolSpec::builder(
            Self::NAME,
            "Simulates a physical action such as switching a device on or off. \
             It is a demo: nothing real moves.",
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "description": "The action, e.g. \"turn on the desk lamp\"."
                }
            },
            "required": ["action"]
        }))
        .effect(Self::EFFECT)
        .tier(Tier::Physical)
        .build();
        Self { spec }
    }
}

impl Default for DemoPhysicalAction {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for DemoPhysicalAction {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, input: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let action = input
            .get("action")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|action| !action.is_empty())
            .ok_or_else(|| {
                ToolError::InvalidInput("\"action\" must be a non-empty string".into())
            })?;
        if action.chars().count() > MAX_ACTION_CHARS {
            return Err(ToolError::InvalidInput(format!(
                "\"action\" is longer than {MAX_ACTION_CHARS} characters"
            )));
        }
        Ok(ToolOutput::text(format!(
            "Simulated: {action}. This is a demo; no real device moved."
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    fn ctx() -> ToolContext {
        ToolContext {
            tool_use_id: "t".into(),
            session_id: "s".into(),
            channel: "test".into(),
            cancel: CancellationToken::new(),
            progress: Default::default(),
        }
    }

    #[test]
    fn declares_tier_two_and_its_effect() {
        let tool = DemoPhysicalAction::new();
        assert_eq!(tool.spec().tier(), Some(Tier::Physical));
        assert_eq!(
            tool.spec().effect(),
            "Demo: simulates a physical action; no real device moves."
        );
        assert_eq!(tool.spec().input_schema.json["required"], json!(["action"]));
    }

    #[tokio::test]
    async fn reports_the_simulated_action() {
        let out = DemoPhysicalAction::new()
            .call(json!({"action": "turn on the desk lamp"}), ctx())
            .await
            .unwrap();
        assert_eq!(
            out,
            ToolOutput::text(
                "Simulated: turn on the desk lamp. This is a demo; no real device moved."
            )
        );
    }

    #[tokio::test]
    async fn refuses_bad_input() {
        let tool = DemoPhysicalAction::new();
        for input in [
            json!({}),
            json!({"action": 3}),
            json!({"action": "  "}),
            json!("x"),
        ] {
            let err = tool.call(input, ctx()).await.unwrap_err();
            assert!(matches!(err, ToolError::InvalidInput(_)));
        }
        let long = "x".repeat(MAX_ACTION_CHARS + 1);
        assert!(tool.call(json!({"action": long}), ctx()).await.is_err());
    }
}
