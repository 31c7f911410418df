//! `schedule_routine` (tier 1): the model proposes a routine (a schedule and a prompt or one tool
//! call) and the hub registers it.
//!
//! Invariants: the tool itself stores nothing and approves nothing: it reads the proposal and hands
//! it to a [`RoutineProposer`] (the hub), which registers it through the gate as the model's, so
//! every routine it proposes, whatever its action's tier, is stored only after the owner's explicit
//! approval of the whole routine, asked in the session and on the channel the proposal came from.
//! The tool is in a catalog only where a proposer exists (the hub).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::tool::{Tier, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// A routine as the model proposed it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutineProposal {
    pub name: String,
    /// Exactly one of `cron`, `every` and `at` is expected (the proposer checks).
    pub cron: String,
    pub every: String,
    pub at: String,
    /// A prompt, or a tool with its arguments.
    pub prompt: Option<String>,
    pub tool: Option<(String, Value)>,
    /// Skip (rather than run once) a firing missed while the hub was down.
    pub skip_missed: bool,
}

/// Registers what the model proposes (the hub implements it). The answer is the text the model
/// reads; an error is a refusal or a bad proposal, said in one line.
#[async_trait]
pub trait RoutineProposer: Send + Sync {
    async fn propose(&self, proposal: RoutineProposal, ctx: &ToolContext)
    -> Result<String, String>;
}

/// The `schedule_routine` tool.
pub struct ScheduleRoutine {
    spec: ToolSpec,
    proposer: Arc<dyn RoutineProposer>,
}

impl ScheduleRoutine {
    pub const NAME: &'static str = "schedule_routine";
    pub const EFFECT: &'static str =
        "Proposes a routine; it is registered only after the owner approves the whole routine.";

    pub fn new(proposer: Arc<dyn RoutineProposer>) -> Self {
        let spec = ToolSpec::builder(
            Self::NAME,
            "Schedules a routine: a prompt or one tool call, run on a schedule in Europe/Istanbul \
             time (a cron expression, an interval such as 90m, or a one-off time such as \
             2026-12-24 18:00). Every routine you propose is registered only after the owner \
             approves it as shown; a tool routine's scheduled firings then run without asking \
             again.",
        )
        .input_schema(json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "1-64 characters of a-z, 0-9, - and _."},
                "cron": {"type": "string", "description": "Five-field cron, e.g. \"0 7 * * 1-5\"."},
                "every": {"type": "string", "description": "An interval, e.g. \"90m\", \"1d\"."},
                "at": {"type": "string", "description": "Once, \"YYYY-MM-DD HH:MM\"."},
                "prompt": {"type": "string", "description": "What to do, as a request to you."},
                "tool": {"type": "string", "description": "Or one tool to call."},
                "arguments": {"type": "object", "description": "The tool's arguments."},
                "skip_missed": {"type": "boolean", "description": "Skip a firing missed while the hub was down."}
            },
            "required": ["name"]
        }))
        .effect(Self::EFFECT)
        .tier(Tier::DigitalWrite)
        .build();
        Self { spec, proposer }
    }
}

fn text_field(input: &Value, key: &str) -> Result<String, ToolError> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.trim().to_owned()),
        Some(_) => Err(ToolError::InvalidInput(format!(
            "\"{key}\" must be a string"
        ))),
    }
}

fn proposal(input: &Value) -> Result<RoutineProposal, ToolError> {
    let prompt = text_field(input, "prompt")?;
    let tool = text_field(input, "tool")?;
    let arguments = input.get("arguments").cloned().unwrap_or_else(|| json!({}));
    let (prompt, tool) = match (prompt.is_empty(), tool.is_empty()) {
        (false, true) => (Some(prompt), None),
        (true, false) => (None, Some((tool, arguments))),
        _ => {
            return Err(ToolError::InvalidInput(
                "give exactly one action: \"prompt\" or \"tool\"".into(),
            ));
        }
    };
    Ok(RoutineProposal {
        name: text_field(input, "name")?,
        cron: text_field(input, "cron")?,
        every: text_field(input, "every")?,
        at: text_field(input, "at")?,
        prompt,
        tool,
        skip_missed: input
            .get("skip_missed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

#[async_trait]
impl Tool for ScheduleRoutine {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let proposal = proposal(&input)?;
        self.proposer
            .propose(proposal, &ctx)
            .await
            .map(ToolOutput::text)
            .map_err(ToolError::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use tokio_util::sync::CancellationToken;

    #[derive(Default)]
    struct Recording(Mutex<Vec<(RoutineProposal, String)>>);

    #[async_trait]
    impl RoutineProposer for Recording {
        async fn propose(
            &self,
            proposal: RoutineProposal,
            ctx: &ToolContext,
        ) -> Result<String, String> {
            self.0
                .lock()
                .unwrap()
                .push((proposal.clone(), ctx.channel.clone()));
            if proposal.name == "refused" {
                Err("routine \"refused\" was not registered: its approval ended as rejected".into())
            } else {
                Ok(format!("routine {} registered", proposal.name))
            }
        }
    }

    fn ctx() -> ToolContext {
        ToolContext {
            tool_use_id: "t1".into(),
            session_id: "s1".into(),
            channel: "terminal".into(),
            cancel: CancellationToken::new(),
            progress: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_proposal_goes_to_the_proposer_and_its_answer_to_the_model() {
        let proposer = Arc::new(Recording::default());
        let tool = ScheduleRoutine::new(Arc::clone(&proposer) as _);
        assert_eq!(tool.spec().tier(), Some(Tier::DigitalWrite));
        let out = tool
            .call(
                json!({"name": "lamp-off", "cron": "0 23 * * *", "tool": "demo_physical_action",
                       "arguments": {"action": "lamp off"}, "skip_missed": true}),
                ctx(),
            )
            .await
            .unwrap();
        assert_eq!(out, ToolOutput::text("routine lamp-off registered"));
        let seen = proposer.0.lock().unwrap().clone();
        assert_eq!(seen[0].1, "terminal");
        assert_eq!(
            seen[0].0.tool,
            Some(("demo_physical_action".into(), json!({"action": "lamp off"})))
        );
        assert!(seen[0].0.skip_missed);
        let err = tool
            .call(
                json!({"name": "refused", "every": "1h", "prompt": "hi"}),
                ctx(),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, ToolError::Failed(ref m) if m.contains("rejected")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn exactly_one_action_is_needed() {
        let tool = ScheduleRoutine::new(Arc::new(Recording::default()));
        for input in [
            json!({"name": "x", "every": "1h"}),
            json!({"name": "x", "every": "1h", "prompt": "a", "tool": "b"}),
            json!({"name": "x", "every": 5, "prompt": "a"}),
        ] {
            let err = tool.call(input, ctx()).await.unwrap_err();
            assert!(matches!(err, ToolError::InvalidInput(_)), "{err}");
        }
    }
}
