//! How loudly the gate logs a recorded call: DEBUG for tier 0, INFO for tiers 1 and 2 (with the
//! arguments and the approval), WARN for an unknown tool (which also emits an `error` event).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Level;

use super::*;
use crate::testing::{LogLine, MemorySink, ScriptedApprover, logs_during};
use crate::tool::{ToolCatalog, ToolContext, ToolError, ToolOutput, ToolSpec};

struct Echo(ToolSpec);

#[async_trait]
impl crate::tool::Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, input: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::json(input))
    }
}

fn gate(sink: Arc<MemorySink>) -> TierGate {
    let mut catalog = ToolCatalog::new();
    for (name, tier) in [
        ("clock", Tier::Read),
        ("note", Tier::DigitalWrite),
        ("lamp", Tier::Physical),
    ] {
        let spec = ToolSpec::builder(name, format!("The {name} tool."))
            .effect(format!("Uses the {name}."))
            .tier(tier)
            .build();
        assert_eq!(catalog.add(Arc::new(Echo(spec))), Ok(()));
    }
    TierGate::builder(Arc::new(catalog))
        .approver(Arc::new(ScriptedApprover::decisions([
            ApprovalOutcome::Approved,
        ])))
        .sink(sink)
        .build()
}

/// Checks, runs and records one call of `tool`; returns what the gate logged about it.
fn logged(gate: &TierGate, tool: &str) -> Vec<LogLine> {
    let ctx = CallContext {
        session_id: "s1".into(),
        channel: "terminal".into(),
        cancel: CancellationToken::new(),
    };
    let call = GateCall {
        tool_use_id: format!("use-{tool}"),
        tool: tool.into(),
        arguments: json!({"level": 3}),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ((), lines) = logs_during(|| {
        runtime.block_on(async {
            let record = match gate.check(call, &ctx).await {
                Verdict::Allowed(permit) => permit.run(ctx.clone()).await,
                Verdict::Refused(refusal) => refusal.into_record(),
            };
            gate.record(&record, &ctx);
        });
    });
    lines
}

fn levels_of<'a>(lines: &'a [LogLine], message: &str) -> Vec<&'a Level> {
    lines
        .iter()
        .filter(|line| line.message.contains(message))
        .map(|line| &line.level)
        .collect()
}

#[test]
fn tier_zero_calls_are_logged_at_debug() {
    let gate = gate(Arc::new(MemorySink::new()));
    let lines = logged(&gate, "clock");
    assert_eq!(levels_of(&lines, "tool call"), [&Level::DEBUG], "{lines:?}");
    assert!(lines.iter().all(|l| l.level > Level::INFO), "{lines:?}");
}

#[test]
fn tier_one_and_two_calls_are_logged_at_info() {
    let gate = gate(Arc::new(MemorySink::new()));
    for tool in ["note", "lamp"] {
        let lines = logged(&gate, tool);
        assert_eq!(
            levels_of(&lines, "tool call"),
            [&Level::INFO],
            "{tool}: {lines:?}"
        );
        assert!(
            lines.iter().all(|l| l.level != Level::WARN),
            "{tool}: {lines:?}"
        );
    }
}

#[test]
fn an_unknown_tool_is_a_warning_and_an_error_event() {
    let sink = Arc::new(MemorySink::new());
    let gate = gate(Arc::clone(&sink));
    let lines = logged(&gate, "ghost");
    let warnings: Vec<&LogLine> = lines.iter().filter(|l| l.level == Level::WARN).collect();
    assert_eq!(warnings.len(), 1, "{lines:?}");
    assert!(warnings[0].message.contains("ghost"), "{lines:?}");
    assert!(levels_of(&lines, "tool call").is_empty(), "{lines:?}");
    let errors = sink.errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].tool.as_deref(), Some("ghost"));
}
