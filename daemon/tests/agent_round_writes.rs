//! How a turn's messages reach the history observer (the session store): the prompt is held and
//! stored in the turn's next write, or on its own once it has waited `HOLD_PROMPT_AT_MOST`; a
//! round whose calls only read is held with its results and stored in the turn's next write (the
//! reply, the next round that may change something, or the turn's end), while the model already
//! sees it; a round with any call that may change something (tier 1 or 2, or an unknown tool) is
//! stored before its first tool starts.

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use tokio::sync::Notify;

use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Value, json};
use support::agent::{Act, Concurrency, DEADLINE, Recorder, TestTool, lock};
use taud::agent::{CANCELLED_PLACEHOLDER, HOLD_PROMPT_AT_MOST, StopReason, TauAgent};
use taud::message::Message;
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

/// What one turn left behind: the writes the store saw, how many messages it held when each tool
/// ran, the turn's stop reason and the messages each model call was given.
struct Outcome {
    writes: Vec<Vec<usize>>,
    seen: Vec<usize>,
    stop_reason: StopReason,
    model_saw: Vec<Vec<Message>>,
    stored: usize,
}

/// Runs one turn of `replies` with probe tools named and tiered as `tools`.
async fn turn(tools: &[(&str, Tier)], replies: Vec<FakeReply>) -> Outcome {
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
    let model = Arc::new(FakeModel::scripted(replies));
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog)
        .history_observer(recorder.clone())
        .build();
    let end = agent.stream("go").finish().await.unwrap();
    let stored = lock(&recorder.appended).len();
    assert_eq!(
        stored,
        agent.messages().len(),
        "every message in memory is stored"
    );
    Outcome {
        writes: lock(&recorder.writes).clone(),
        seen: lock(&stored_when_run).clone(),
        stop_reason: end.stop_reason,
        model_saw: model
            .requests()
            .into_iter()
            .map(|r| r.messages.iter().map(|m| Message::clone(m)).collect())
            .collect(),
        stored,
    }
}

/// A model reply calling every tool of `calls` in one round.
fn round(calls: &[&str]) -> FakeReply {
    let mut round = FakeReply::tool_call(calls[0], json!({}));
    for name in &calls[1..] {
        round = round.and_tool_call(*name, json!({}));
    }
    round
}

/// Runs one turn whose model calls `calls` in one round, then answers.
async fn one_round(tools: &[(&str, Tier)], calls: &[&str]) -> Outcome {
    let outcome = turn(tools, vec![round(calls), FakeReply::text("done")]).await;
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.stored, 4, "prompt, calls, results, reply");
    outcome
}

fn roles(messages: &[Message]) -> Vec<Role> {
    messages.iter().map(|m| m.role).collect()
}

#[tokio::test]
async fn a_read_only_round_is_stored_with_the_reply_in_one_write() {
    let outcome = one_round(
        &[("look", Tier::Read), ("peek", Tier::Read)],
        &["look", "peek"],
    )
    .await;
    assert_eq!(outcome.writes, [vec![0, 1, 2, 3]]);
    assert_eq!(outcome.seen, [0, 0], "the tools ran with nothing stored");
    assert_eq!(
        roles(&outcome.model_saw[1]),
        [Role::User, Role::Assistant, Role::User],
        "the second model call saw the held round"
    );
}

#[tokio::test]
async fn a_round_that_may_write_is_stored_before_its_tools_run() {
    let tools = [("look", Tier::Read), ("note", Tier::DigitalWrite)];
    let outcome = one_round(&tools, &["look", "note"]).await;
    assert_eq!(outcome.writes, [vec![0, 1], vec![2], vec![3]]);
    assert_eq!(
        outcome.seen,
        [2, 2],
        "the calls were stored before either tool ran"
    );
}

#[tokio::test]
async fn a_round_naming_an_unknown_tool_is_stored_before_its_tools_run() {
    let outcome = one_round(&[("look", Tier::Read)], &["look", "missing"]).await;
    assert_eq!(outcome.writes, [vec![0, 1], vec![2], vec![3]]);
    assert_eq!(outcome.seen, [2]);
}

#[tokio::test]
async fn held_rounds_are_stored_before_a_round_that_may_write_runs() {
    let tools = [("look", Tier::Read), ("note", Tier::DigitalWrite)];
    let replies = vec![
        round(&["look"]),
        round(&["look"]),
        round(&["note"]),
        FakeReply::text("done"),
    ];
    let outcome = turn(&tools, replies).await;
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.writes, [vec![0, 1, 2, 3, 4, 5], vec![6], vec![7]]);
    assert_eq!(
        outcome.seen,
        [0, 0, 6],
        "the writing tool ran after every call was stored"
    );
    assert_eq!(
        outcome.model_saw[2].len(),
        5,
        "the third call saw both held rounds"
    );
}

#[tokio::test]
async fn a_held_round_is_stored_when_the_turn_ends_without_a_reply() {
    let replies = vec![round(&["look"]), FakeReply::error("the provider went away")];
    let outcome = turn(&[("look", Tier::Read)], replies).await;
    assert_eq!(outcome.stop_reason, StopReason::Error);
    assert_eq!(outcome.writes, [vec![0, 1, 2]]);
}

#[tokio::test]
async fn a_text_turn_answered_at_once_is_one_write() {
    let outcome = turn(&[], vec![FakeReply::text("hi")]).await;
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.writes, [vec![0, 1]], "prompt and reply together");
}

/// Waits for the turn's first write, which must be the prompt alone, made no sooner than
/// `HOLD_PROMPT_AT_MOST` after the turn began.
async fn prompt_stored_alone_when_due(recorder: &Recorder) {
    let started = Instant::now();
    while lock(&recorder.writes).is_empty() {
        assert!(started.elapsed() < DEADLINE, "the prompt was never stored");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(
        started.elapsed() >= HOLD_PROMPT_AT_MOST,
        "stored after {:?}, before it was due",
        started.elapsed()
    );
    assert_eq!(*lock(&recorder.writes), [vec![0]], "the prompt alone");
    assert_eq!(lock(&recorder.appended)[0], (0, Message::user_text("go")));
}

#[tokio::test]
async fn a_prompt_is_stored_on_its_own_once_the_model_keeps_it_waiting() {
    let recorder = Arc::new(Recorder::default());
    let model = Arc::new(FakeModel::scripted([
        FakeReply::text("thinking").then_hang()
    ]));
    let agent = TauAgent::builder(model)
        .history_observer(recorder.clone())
        .build();
    let turn = agent.stream("go");
    prompt_stored_alone_when_due(&recorder).await;
    turn.cancel();
    let end = turn.finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::Cancelled);
    assert_eq!(*lock(&recorder.writes), [vec![0], vec![1]]);
    assert_eq!(
        lock(&recorder.appended)[1],
        (1, Message::assistant_text(CANCELLED_PLACEHOLDER))
    );
}

#[tokio::test]
async fn a_prompt_is_stored_on_its_own_while_a_slow_read_runs() {
    let recorder = Arc::new(Recorder::default());
    let signal = Arc::new(Notify::new());
    let look = Act::WaitFor {
        signal: signal.clone(),
        within: DEADLINE,
    };
    let mut catalog = ToolCatalog::new();
    let track = Arc::new(Concurrency::default());
    catalog
        .add(TestTool::shared("look", Tier::Read, look, &track))
        .unwrap();
    let model = Arc::new(FakeModel::scripted([
        round(&["look"]),
        FakeReply::text("done"),
    ]));
    let agent = TauAgent::builder(model)
        .catalog(catalog)
        .history_observer(recorder.clone())
        .build();
    let turn = agent.stream("go");
    prompt_stored_alone_when_due(&recorder).await;
    assert!(lock(&track.finished).is_empty(), "while the read still ran");
    signal.notify_one();
    let end = turn.finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::EndTurn);
    assert_eq!(
        *lock(&recorder.writes),
        [vec![0], vec![1, 2, 3]],
        "the read's round waited for the reply"
    );
}
