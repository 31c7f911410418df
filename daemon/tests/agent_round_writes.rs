//! How a tool round reaches the history observer (the session store): a round whose calls only
//! read is stored with its results in one write after the tools ran; a round with any call that
//! may change something (tier 1 or 2, or an unknown tool) is stored before its first tool starts.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support {
    pub mod agent;
}

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use support::agent::{Recorder, lock};
use taud::agent::{StopReason, TauAgent};
use taud::message::Role;
use taud::testing::{FakeModel, FakeReply};
use taud::tool::{Tier, Tool, ToolCatalog, ToolContext, ToolError, ToolOutput, ToolSpec};

/// A tool that notes how many messages the store held when it ran.
struct Probe {
    spec: ToolSpec,
    recorder: Arc<Recorder>,
    stored_when_run: Arc<Mutex<Vec<usize>>>,
}

#[async_trait]
impl Tool for Probe {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _input: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let stored = lock(&self.recorder.appended).len();
        lock(&self.stored_when_run).push(stored);
        Ok(ToolOutput::text("probed"))
    }
}

/// Runs one turn whose model calls `tools` in one round, then answers; returns the writes the
/// store saw and how many messages it held when each tool ran.
async fn one_round(tools: &[(&str, Tier)], calls: &[&str]) -> (Vec<Vec<usize>>, Vec<usize>) {
    let recorder = Arc::new(Recorder::default());
    let stored_when_run = Arc::new(Mutex::new(Vec::new()));
    let mut catalog = ToolCatalog::new();
    for (name, tier) in tools {
        let probe = Probe {
            spec: ToolSpec::builder(*name, format!("Probe {name}."))
                .tier(*tier)
                .build(),
            recorder: recorder.clone(),
            stored_when_run: stored_when_run.clone(),
        };
        catalog.add(Arc::new(probe)).unwrap();
    }
    let mut round = FakeReply::tool_call(calls[0], json!({}));
    for name in &calls[1..] {
        round = round.and_tool_call(*name, json!({}));
    }
    let model = Arc::new(FakeModel::scripted([round, FakeReply::text("done")]));
    let agent = TauAgent::builder(model)
        .catalog(catalog)
        .history_observer(recorder.clone())
        .build();
    let end = agent.stream("go").finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::EndTurn);
    let roles: Vec<_> = agent.messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::User, Role::Assistant]
    );
    assert_eq!(lock(&recorder.appended).len(), 4, "every message stored");
    let writes = lock(&recorder.writes).clone();
    let seen = lock(&stored_when_run).clone();
    (writes, seen)
}

#[tokio::test]
async fn a_read_only_round_is_stored_with_its_results_in_one_write() {
    let (writes, seen) = one_round(
        &[("look", Tier::Read), ("peek", Tier::Read)],
        &["look", "peek"],
    )
    .await;
    assert_eq!(writes, [vec![0], vec![1, 2], vec![3]]);
    assert_eq!(seen, [1, 1], "the tools ran with only the prompt stored");
}

#[tokio::test]
async fn a_round_that_may_write_is_stored_before_its_tools_run() {
    let tools = [("look", Tier::Read), ("note", Tier::DigitalWrite)];
    let (writes, seen) = one_round(&tools, &["look", "note"]).await;
    assert_eq!(writes, [vec![0], vec![1], vec![2], vec![3]]);
    assert_eq!(seen, [2, 2], "the calls were stored before either tool ran");
}

#[tokio::test]
async fn a_round_naming_an_unknown_tool_is_stored_before_its_tools_run() {
    let (writes, seen) = one_round(&[("look", Tier::Read)], &["look", "missing"]).await;
    assert_eq!(writes, [vec![0], vec![1], vec![2], vec![3]]);
    assert_eq!(seen, [2]);
}
