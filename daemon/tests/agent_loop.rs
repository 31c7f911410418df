//! The agent loop with the fake model: limits, queueing (and refusing to queue), cancel, tool
//! ordering and sequential execution when a tier-2 tool is registered. The repair of a dangling
//! history is in `agent_repair.rs`.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;
use support::agent::{
    Act, Concurrency, DEADLINE, TestTool, all_results, catalog, result_text, texts, wait_for,
};
use taud::agent::{AgentBusy, Limits, StopReason, TauAgent, TurnEvent, TurnOptions};
use taud::message::{Message, Role, ToolResultStatus};
use taud::testing::{FakeModel, FakeReply};
use taud::tool::Tier;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn turn_limit_ends_with_a_stop_reason_and_the_next_turn_repairs() {
    let track = Arc::new(Concurrency::default());
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("step", json!({})),
        FakeReply::tool_call("step", json!({})),
        FakeReply::tool_call("step", json!({})),
        FakeReply::text("fine"),
    ]));
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog(vec![TestTool::shared(
            "step",
            Tier::Read,
            Act::Done,
            &track,
        )]))
        .limits(Limits {
            turns: Some(2),
            total_tokens: None,
        })
        .build();
    let end = agent.stream("loop").finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::LimitTurns);
    assert_eq!(end.model_calls, 2);
    assert_eq!(model.call_count(), 2);
    let notice = end.notice.clone().unwrap();
    assert_eq!(notice, "The turn stopped after 2 model calls (its limit).");
    // Both tool calls were answered; the history ends on the results (dangling).
    let history = agent.messages();
    assert_eq!(all_results(&history).len(), 2);
    assert_eq!(history.last().unwrap().role, Role::User);

    let reply = agent.ask("go on").await.unwrap();
    assert_eq!(reply, "fine");
    // The first call of the new turn read the notice, then the new prompt.
    let request = &model.requests()[2];
    let n = request.messages.len();
    assert_eq!(request.messages[n - 2].text(), format!("({notice})"));
    assert_eq!(request.messages[n - 2].role, Role::Assistant);
    assert_eq!(request.messages[n - 1].text(), "go on");
}

#[tokio::test]
async fn token_budget_ends_with_limit_total_tokens() {
    let track = Arc::new(Concurrency::default());
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("step", json!({})).with_usage(60, 50),
        FakeReply::text("never"),
    ]));
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog(vec![TestTool::shared(
            "step",
            Tier::Read,
            Act::Done,
            &track,
        )]))
        .limits(Limits {
            turns: None,
            total_tokens: Some(100),
        })
        .build();
    let end = agent.stream("spend").finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::LimitTotalTokens);
    assert_eq!(end.usage.total_tokens, 110);
    assert_eq!(model.call_count(), 1);
    assert_eq!(all_results(&agent.messages()).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_streams_on_one_agent_are_serialized() {
    let track = Arc::new(Concurrency::default());
    let release = Arc::new(Notify::new());
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("hold", json!({})),
        FakeReply::text("A done"),
        FakeReply::text("B done"),
    ]));
    let hold = Act::WaitFor {
        signal: Arc::clone(&release),
        within: DEADLINE,
    };
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog(vec![TestTool::shared(
            "hold",
            Tier::Read,
            hold,
            &track,
        )]))
        .build();
    let mut first = agent.stream("A");
    let started = wait_for(&mut first, |e| {
        matches!(e, TurnEvent::ToolUseStarted { .. })
    })
    .await;
    assert!(started.is_some());
    let second = agent.stream("B");
    // B is queued: A holds the agent while its tool runs, so B cannot have called the model.
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    assert!(agent.is_busy());
    assert_eq!(model.call_count(), 1);
    release.notify_one();
    let (a, b) = tokio::join!(first.finish(), second.finish());
    assert_eq!(a.unwrap().text, "A done");
    assert_eq!(b.unwrap().text, "B done");
    // B's model call read A's whole turn first.
    let request = model.last_request().unwrap();
    assert_eq!(
        texts(&request.messages),
        vec![
            (Role::User, "A".into()),
            (Role::Assistant, String::new()),
            (Role::User, String::new()),
            (Role::Assistant, "A done".into()),
            (Role::User, "B".into()),
        ]
    );
}

/// A caller with its own turn queue (the hub's worker) starts turns with `try_stream_with`: run at
/// once when the agent is free, refused (never queued) while a turn runs, also one queued with
/// `stream`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_must_not_queue_is_refused_while_another_runs() {
    let track = Arc::new(Concurrency::default());
    let release = Arc::new(Notify::new());
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("hold", json!({})),
        FakeReply::text("A done"),
        FakeReply::text("B done"),
        FakeReply::text("C done"),
    ]));
    let hold = Act::WaitFor {
        signal: Arc::clone(&release),
        within: DEADLINE,
    };
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog(vec![TestTool::shared(
            "hold",
            Tier::Read,
            hold,
            &track,
        )]))
        .build();
    let mut first = agent
        .try_stream_with("A", TurnOptions::default())
        .expect("the agent is free");
    let started = wait_for(&mut first, |e| {
        matches!(e, TurnEvent::ToolUseStarted { .. })
    })
    .await;
    assert!(started.is_some());
    assert_eq!(
        agent
            .try_stream_with("refused", TurnOptions::default())
            .err(),
        Some(AgentBusy)
    );
    let queued = agent.stream("B");
    release.notify_one();
    assert_eq!(first.finish().await.unwrap().text, "A done");
    assert_eq!(queued.finish().await.unwrap().text, "B done");
    let third = agent
        .try_stream_with("C", TurnOptions::default())
        .expect("free again once every turn ended");
    assert_eq!(third.finish().await.unwrap().text, "C done");
    let prompts: Vec<String> = agent
        .messages()
        .iter()
        .filter(|m| m.role == Role::User && !m.text().is_empty())
        .map(Message::text)
        .collect();
    assert_eq!(prompts, ["A", "B", "C"], "the refused turn left nothing");
}

#[tokio::test]
async fn a_turn_cancelled_while_queued_appends_nothing() {
    let model = Arc::new(FakeModel::scripted([FakeReply::text("hi")]));
    let agent = TauAgent::builder(model.clone()).build();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let end = agent
        .stream_with(
            "x",
            TurnOptions {
                channel: None,
                cancel: Some(cancel),
                turn_id: None,
            },
        )
        .finish()
        .await
        .unwrap();
    assert_eq!(end.stop_reason, StopReason::Cancelled);
    assert!(agent.messages().is_empty());
    assert_eq!(model.call_count(), 0);
}

#[tokio::test]
async fn cancel_while_streaming_stores_the_placeholder() {
    let model = Arc::new(FakeModel::scripted([
        FakeReply::text("partial").then_hang(),
        FakeReply::text("again"),
    ]));
    let agent = TauAgent::builder(model.clone()).build();
    let mut stream = agent.stream("talk");
    let delta = wait_for(&mut stream, |e| matches!(e, TurnEvent::TextDelta(_))).await;
    assert_eq!(delta, Some(TurnEvent::TextDelta("partial".into())));
    assert!(agent.cancel());
    let end = stream.finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::Cancelled);
    assert_eq!(end.text, "Cancelled by user");
    assert_eq!(
        texts(&agent.messages()),
        vec![
            (Role::User, "talk".into()),
            (Role::Assistant, "Cancelled by user".into())
        ]
    );
    // No repair is needed: the next request is the history plus the new prompt.
    assert_eq!(agent.ask("more").await.unwrap(), "again");
    assert_eq!(model.last_request().unwrap().messages.len(), 3);
}

async fn cancel_during_tools(with_physical: bool) -> anyhow::Result<()> {
    let track = Arc::new(Concurrency::default());
    let mut tools = vec![
        TestTool::shared("wait", Tier::Read, Act::UntilCancelled, &track),
        TestTool::shared("other", Tier::Read, Act::UntilCancelled, &track),
    ];
    if with_physical {
        tools.push(TestTool::shared("arm", Tier::Physical, Act::Done, &track));
    }
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_calls([
            ("wait", json!({})),
            ("other", json!({})),
            ("arm", json!({})),
        ]),
        FakeReply::text("after"),
    ]));
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog(tools))
        .build();
    let stream = agent.stream("work");
    // Wait until a tool runs, then cancel.
    tokio::time::timeout(DEADLINE, async {
        while track.running.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await?;
    stream.cancel();
    let events = stream.collect_events().await;
    let Some(TurnEvent::TurnEnd(end)) = events.last() else {
        panic!("no TurnEnd");
    };
    assert_eq!(end.stop_reason, StopReason::Cancelled);
    let history = agent.messages();
    let results = all_results(&history);
    let ids: Vec<_> = results.iter().map(|r| r.tool_use_id.as_str()).collect();
    assert_eq!(ids, vec!["fake-1-0", "fake-1-1", "fake-1-2"]);
    for result in &results {
        assert_eq!(result.status, ToolResultStatus::Error);
    }
    assert_eq!(result_text(&results[0]), "Tool execution cancelled");
    assert_eq!(result_text(&results[1]), "Tool execution cancelled");
    let tool_events = events
        .iter()
        .filter(|e| matches!(e, TurnEvent::ToolResult { .. }))
        .count();
    assert_eq!(tool_events, 3);
    // The next turn repairs with the cancel notice.
    assert_eq!(agent.ask("again").await?, "after");
    let request = model.last_request().context("no request")?;
    let n = request.messages.len();
    assert_eq!(
        request.messages[n - 2].text(),
        "(The user cancelled the previous turn.)"
    );
    Ok(())
}

#[tokio::test]
async fn cancel_during_concurrent_tools_answers_every_tool_use() {
    cancel_during_tools(false).await.unwrap();
}

#[tokio::test]
async fn cancel_during_sequential_tools_answers_every_tool_use() {
    cancel_during_tools(true).await.unwrap();
}

fn ordering_agent(with_physical: bool, track: &Arc<Concurrency>) -> (TauAgent, Arc<FakeModel>) {
    let signal = Arc::new(Notify::new());
    let mut tools = vec![
        TestTool::shared(
            "slow",
            Tier::Read,
            Act::WaitFor {
                signal: Arc::clone(&signal),
                within: Duration::from_secs(1),
            },
            track,
        ),
        TestTool::shared("fast", Tier::DigitalWrite, Act::Signal(signal), track),
    ];
    if with_physical {
        tools.push(TestTool::shared("arm", Tier::Physical, Act::Done, track));
    }
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_calls([("slow", json!({})), ("fast", json!({}))]),
        FakeReply::text("ok"),
    ]));
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog(tools))
        .build();
    (agent, model)
}

#[tokio::test(start_paused = true)]
async fn concurrent_tool_results_keep_tool_use_order() {
    let track = Arc::new(Concurrency::default());
    let (agent, model) = ordering_agent(false, &track);
    assert_eq!(agent.ask("both").await.unwrap(), "ok");
    // "slow" finished last (it waited for "fast"), yet its result comes first.
    assert_eq!(*track.finished.lock().unwrap(), vec!["fast", "slow"]);
    assert_eq!(track.most.load(Ordering::SeqCst), 2);
    let results = all_results(&model.last_request().unwrap().messages);
    let read: Vec<_> = results
        .iter()
        .map(|r| (r.tool_use_id.clone(), result_text(r)))
        .collect();
    assert_eq!(
        read,
        vec![
            ("fake-1-0".into(), "slow saw the signal".into()),
            ("fake-1-1".into(), "fast done".into()),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_registered_tier_two_tool_makes_calls_sequential() {
    let track = Arc::new(Concurrency::default());
    let (agent, model) = ordering_agent(true, &track);
    assert_eq!(agent.ask("both").await.unwrap(), "ok");
    assert_eq!(track.most.load(Ordering::SeqCst), 1);
    assert_eq!(*track.finished.lock().unwrap(), vec!["slow", "fast"]);
    let results = all_results(&model.last_request().unwrap().messages);
    assert_eq!(result_text(&results[0]), "slow waited in vain");
    assert_eq!(result_text(&results[1]), "fast done");
}

/// Many turns started one after another while the agent is busy run in the order they were
/// started. The calls are made on the runtime's one worker thread, where the last spawned task
/// runs first (its LIFO slot), so turns that only queue once their task runs would come out of
/// order.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn queued_turns_run_in_call_order() {
    const QUEUED: usize = 24;
    let track = Arc::new(Concurrency::default());
    let release = Arc::new(Notify::new());
    let mut replies = vec![
        FakeReply::tool_call("hold", json!({})),
        FakeReply::text("0"),
    ];
    replies.extend((1..=QUEUED).map(|i| FakeReply::text(i.to_string())));
    let model = Arc::new(FakeModel::scripted(replies));
    let hold = Act::WaitFor {
        signal: Arc::clone(&release),
        within: DEADLINE,
    };
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog(vec![TestTool::shared(
            "hold",
            Tier::Read,
            hold,
            &track,
        )]))
        .build();
    let prompts = tokio::spawn(async move {
        let mut first = agent.stream("turn 0");
        let started = wait_for(&mut first, |e| {
            matches!(e, TurnEvent::ToolUseStarted { .. })
        })
        .await;
        assert!(started.is_some());
        let queued: Vec<_> = (1..=QUEUED)
            .map(|i| agent.stream(format!("turn {i}")))
            .collect();
        // Let every queued turn's task run up to the lock before turn 0 ends.
        for _ in 0..QUEUED * 2 {
            tokio::task::yield_now().await;
        }
        release.notify_one();
        first.finish().await.unwrap();
        for stream in queued {
            assert_eq!(
                stream.finish().await.unwrap().stop_reason,
                StopReason::EndTurn
            );
        }
        agent
            .messages()
            .iter()
            .filter(|m| m.role == Role::User && m.text().starts_with("turn "))
            .map(Message::text)
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let expected: Vec<String> = (0..=QUEUED).map(|i| format!("turn {i}")).collect();
    assert_eq!(prompts, expected);
}
