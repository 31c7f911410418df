//! More of the agent loop: streaming, the system prompt before every call, the history observer,
//! odd model output (unknown tool, broken input, max_tokens), throttling, a caller that goes away,
//! and the fake model's offline demo with the shipped tools.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use support::agent::{Act, Concurrency, DEADLINE, Recorder, TestTool, all_results, result_text};
use taud::agent::{
    Limits, StaticSystemPrompt, StopReason, SystemPromptSource, TauAgent, TurnEvent,
};
use taud::gate::ApprovalOutcome;
use taud::message::{ContentBlock, Role, SystemContentBlock, ToolResultStatus};
use taud::testing::{FakeModel, FakeReply, MemorySink, ScriptedApprover};
use taud::tool::builtin::{FixedClock, shipped_catalog};
use taud::tool::{Tier, ToolCatalog};

#[tokio::test]
async fn streams_text_in_deltas_and_reports_every_message() {
    let recorder = Arc::new(Recorder::default());
    let model = Arc::new(FakeModel::scripted([
        FakeReply::deltas(["Hel", "lo", "!"]).and_reasoning("thinking")
    ]));
    let agent = TauAgent::builder(model)
        .history_observer(recorder.clone())
        .system_prompt(Arc::new(StaticSystemPrompt::new("Be brief.")))
        .build();
    let events = agent.stream("hi").collect_events().await;
    let deltas: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, vec!["Hel", "lo", "!"]);
    assert!(events.contains(&TurnEvent::ReasoningDelta("thinking".into())));
    let Some(TurnEvent::TurnEnd(end)) = events.last() else {
        panic!("no TurnEnd");
    };
    assert_eq!(end.stop_reason, StopReason::EndTurn);
    assert_eq!(end.text, "Hello!");
    assert!(end.usage.total_tokens > 0);
    let appended = recorder.appended.lock().unwrap().clone();
    assert_eq!(appended.len(), 2);
    assert_eq!((appended[0].0, appended[0].1.text()), (0, "hi".to_owned()));
    assert_eq!(
        (appended[1].0, appended[1].1.text()),
        (1, "Hello!".to_owned())
    );
    // Usage is stored with the message, never sent to the model.
    assert!(appended[1].1.metadata.as_ref().unwrap().usage.is_some());
}

struct CountingPrompt(AtomicUsize);

impl SystemPromptSource for CountingPrompt {
    fn system_content(&self) -> Vec<SystemContentBlock> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        vec![SystemContentBlock::Text(format!("build {n}"))]
    }
}

#[tokio::test]
async fn the_system_prompt_is_rebuilt_before_every_model_call() {
    let track = Arc::new(Concurrency::default());
    let mut catalog = ToolCatalog::new();
    catalog
        .add(TestTool::shared("step", Tier::Read, Act::Done, &track))
        .unwrap();
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("step", json!({})),
        FakeReply::text("done"),
    ]));
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog)
        .system_prompt(Arc::new(CountingPrompt(AtomicUsize::new(0))))
        .build();
    agent.ask("go").await.unwrap();
    let systems: Vec<_> = model
        .requests()
        .iter()
        .map(|r| SystemContentBlock::join(&r.system))
        .collect();
    assert_eq!(systems, vec!["build 1", "build 2"]);
    // Metadata never reaches the model.
    assert!(
        model.requests()[1]
            .messages
            .iter()
            .all(|m| m.metadata.is_none())
    );
    assert_eq!(model.requests()[0].tools[0].name, "step");
}

#[tokio::test]
async fn a_store_that_refuses_a_message_ends_the_turn_with_error() {
    let recorder = Arc::new(Recorder::default());
    recorder.fail.store(true, Ordering::SeqCst);
    let model = Arc::new(FakeModel::scripted([FakeReply::text("unsaved")]));
    let agent = TauAgent::builder(model.clone())
        .history_observer(recorder)
        .build();
    let end = agent.stream("hi").finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::Error);
    assert!(
        agent.messages().is_empty(),
        "nothing unstored enters memory"
    );
    // The prompt was held for the reply's write (the model answered at once), so the refusal
    // came after the one model call, and the turn went no further.
    assert_eq!(model.call_count(), 1);
}

#[tokio::test]
async fn every_odd_tool_use_gets_exactly_one_result() {
    let track = Arc::new(Concurrency::default());
    let mut catalog = ToolCatalog::new();
    catalog
        .add(TestTool::shared("ok", Tier::Read, Act::Done, &track))
        .unwrap();
    catalog
        .add(TestTool::shared(
            "broken",
            Tier::DigitalWrite,
            Act::Fail,
            &track,
        ))
        .unwrap();
    let sink = Arc::new(MemorySink::new());
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("ok", json!({}))
            .and_tool_call("missing", json!({"a": 1}))
            .and_raw_tool_call("ok", "{not json")
            .and_tool_call("broken", json!({})),
        FakeReply::text("summary"),
    ]));
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog)
        .event_sink(sink.clone())
        .build();
    assert_eq!(agent.ask("all").await.unwrap(), "summary");
    let results = all_results(&model.last_request().unwrap().messages);
    let read: Vec<_> = results
        .iter()
        .map(|r| (r.tool_use_id.as_str(), r.status, result_text(r)))
        .collect();
    assert_eq!(
        read,
        vec![
            ("fake-1-0", ToolResultStatus::Success, "ok done".to_owned()),
            (
                "fake-1-1",
                ToolResultStatus::Error,
                "Tool 'missing' is not registered; it was not run.".to_owned()
            ),
            (
                "fake-1-2",
                ToolResultStatus::Error,
                "Error: the input for tool 'ok' was not valid JSON (key must be a string at line 1 column 2); it was not run."
                    .to_owned()
            ),
            ("fake-1-3", ToolResultStatus::Error, "Error: broken broke".to_owned()),
        ]
    );
    // The broken input never reached the tool: "ok" ran once.
    assert_eq!(*track.finished.lock().unwrap(), vec!["ok", "broken"]);
    let statuses: Vec<_> = sink
        .tool_calls()
        .iter()
        .map(|c| c.status.as_str())
        .collect();
    assert_eq!(statuses.len(), 4);
    assert!(statuses.contains(&"refused"));
}

#[tokio::test]
async fn max_tokens_ends_the_turn_without_running_the_cut_tool() {
    let track = Arc::new(Concurrency::default());
    let mut catalog = ToolCatalog::new();
    catalog
        .add(TestTool::shared("ok", Tier::Read, Act::Done, &track))
        .unwrap();
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("ok", json!({})).with_stop_reason(StopReason::MaxTokens)
    ]));
    let agent = TauAgent::builder(model).catalog(catalog).build();
    let end = agent.stream("long").finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::MaxTokens);
    assert!(track.finished.lock().unwrap().is_empty());
    let last = agent.messages().last().cloned().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert!(
        matches!(&last.content[0], ContentBlock::Text(t) if t.contains("incomplete due to maximum token limits"))
    );
}

#[tokio::test]
async fn throttling_is_announced_and_other_stop_reasons_pass_through() {
    let model = Arc::new(FakeModel::scripted([FakeReply::text("filtered")
        .throttled_first(Duration::from_secs(4))
        .with_stop_reason(StopReason::GuardrailIntervened)]));
    let agent = TauAgent::builder(model).build();
    let events = agent.stream("x").collect_events().await;
    assert_eq!(
        events[0],
        TurnEvent::Throttled {
            delay: Duration::from_secs(4)
        }
    );
    let Some(TurnEvent::TurnEnd(end)) = events.last() else {
        panic!("no TurnEnd");
    };
    assert_eq!(end.stop_reason, StopReason::GuardrailIntervened);
    assert!(end.notice.is_some());
}

#[tokio::test]
async fn a_turn_outlives_a_caller_that_went_away() {
    let model = Arc::new(FakeModel::scripted([FakeReply::deltas(["a", "b", "c"])]));
    let agent = TauAgent::builder(model).event_capacity(1).build();
    drop(agent.stream("fire and forget"));
    tokio::time::timeout(DEADLINE, async {
        while agent.messages().len() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    assert_eq!(agent.messages()[1].text(), "abc");
}

fn demo_agent(approver: ScriptedApprover) -> (TauAgent, Arc<FakeModel>, Arc<MemorySink>) {
    let instant =
        jiff::Timestamp::from_second(1_790_685_000).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let clock = Arc::new(FixedClock::from(instant));
    let model = Arc::new(FakeModel::demo_recording());
    let sink = Arc::new(MemorySink::new());
    let catalog = shipped_catalog(clock, &[]).unwrap_or_default();
    assert_eq!(catalog.len(), 2);
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog)
        .approver(Arc::new(approver))
        .event_sink(sink.clone())
        .limits(Limits::default())
        .build();
    (agent, model, sink)
}

#[tokio::test]
async fn demo_answers_plainly_in_several_deltas() {
    let (agent, _, sink) = demo_agent(ScriptedApprover::decisions([]));
    let events = agent.stream("hello there").collect_events().await;
    let deltas = events
        .iter()
        .filter(|e| matches!(e, TurnEvent::TextDelta(_)))
        .count();
    assert!(deltas > 1);
    let Some(TurnEvent::TurnEnd(end)) = events.last() else {
        panic!("no TurnEnd");
    };
    assert!(end.text.starts_with("Hello! I am tau's offline demo model"));
    assert!(end.text.ends_with("You said: \"hello there\""));
    assert!(sink.events().is_empty());
}

#[tokio::test]
async fn demo_tells_the_time_in_english_and_turkish() {
    let (agent, _, sink) = demo_agent(ScriptedApprover::decisions([]));
    assert_eq!(
        agent.ask("What time is it?").await.unwrap(),
        "It is 29.09.2026 15:30:00, Tuesday (Europe/Istanbul, UTC+03:00)."
    );
    assert_eq!(
        agent.ask("Saat kaç?").await.unwrap(),
        "Şu an 29.09.2026 15:30:00, Tuesday (Europe/Istanbul, UTC+03:00)."
    );
    let calls = sink.tool_calls();
    assert_eq!(calls.len(), 2);
    assert!(
        calls
            .iter()
            .all(|c| c.tool == "current_time" && c.approval.as_str() == "not_required")
    );
}

#[tokio::test]
async fn demo_switches_only_with_an_approval() {
    let approver =
        ScriptedApprover::decisions([ApprovalOutcome::Approved, ApprovalOutcome::Rejected]);
    let (agent, _, sink) = demo_agent(approver);
    assert_eq!(
        agent.ask("Please turn on the desk lamp").await.unwrap(),
        "Done. Simulated: Please turn on the desk lamp. This is a demo; no real device moved."
    );
    assert_eq!(
        agent.ask("lambayı kapat").await.unwrap(),
        "Anlaşıldı, yapmadım: işlem onaylanmadı."
    );
    let approvals: Vec<_> = sink
        .tool_calls()
        .iter()
        .map(|c| c.approval.as_str())
        .collect();
    assert_eq!(approvals, vec!["approved", "rejected"]);
}

#[tokio::test]
async fn demo_without_the_physical_tool_says_so() {
    let clock = Arc::new(FixedClock::from(
        "2026-09-29T12:30:00Z".parse::<jiff::Timestamp>().unwrap(),
    ));
    let catalog = shipped_catalog(clock, &["demo_physical_action".into()]).unwrap();
    let agent = TauAgent::builder(Arc::new(FakeModel::demo()))
        .catalog(catalog)
        .build();
    let reply = agent.ask("switch the fan on").await.unwrap();
    assert!(reply.starts_with("I cannot switch anything here"));
}

#[tokio::test]
async fn an_unknown_tool_is_refused_as_unknown_despite_broken_input_or_a_cancel() {
    let track = Arc::new(Concurrency::default());
    let mut catalog = ToolCatalog::new();
    catalog
        .add(TestTool::shared(
            "wait",
            Tier::Read,
            Act::UntilCancelled,
            &track,
        ))
        .unwrap();
    // A registered tier-2 tool makes the calls run one at a time.
    catalog
        .add(TestTool::shared("lamp", Tier::Physical, Act::Done, &track))
        .unwrap();
    let sink = Arc::new(MemorySink::new());
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("ghost", json!({}))
            .and_raw_tool_call("phantom", "{not json")
            .and_tool_call("wait", json!({}))
            .and_tool_call("spectre", json!({})),
        FakeReply::text("unused"),
    ]));
    let agent = TauAgent::builder(model.clone())
        .catalog(catalog)
        .event_sink(sink.clone())
        .build();
    let stream = agent.stream("go");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while track.running.load(Ordering::SeqCst) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "wait never ran");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    stream.cancel();
    let end = stream.finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::Cancelled);
    let results = all_results(&agent.messages());
    let read: Vec<_> = results
        .iter()
        .map(|r| (r.tool_use_id.as_str(), result_text(r)))
        .collect();
    assert_eq!(read.len(), 4, "{read:?}");
    assert_eq!(read[0].1, "Tool 'ghost' is not registered; it was not run.");
    assert_eq!(
        read[1].1,
        "Tool 'phantom' is not registered; it was not run."
    );
    assert_eq!(
        read[3].1,
        "Tool 'spectre' is not registered; it was not run."
    );
    let unknown: Vec<_> = sink
        .errors()
        .iter()
        .filter_map(|e| e.tool.clone())
        .collect();
    assert_eq!(unknown, vec!["ghost", "phantom", "spectre"]);
}

#[tokio::test]
async fn a_reply_that_stops_otherwise_leaves_no_tool_use_unanswered() {
    for reason in [
        StopReason::StopSequence,
        StopReason::ContentFiltered,
        StopReason::GuardrailIntervened,
    ] {
        let track = Arc::new(Concurrency::default());
        let mut catalog = ToolCatalog::new();
        catalog
            .add(TestTool::shared("ok", Tier::Read, Act::Done, &track))
            .unwrap();
        let model = Arc::new(FakeModel::scripted([
            FakeReply::tool_call("ok", json!({})).with_stop_reason(reason),
            FakeReply::text("next"),
        ]));
        let agent = TauAgent::builder(model.clone()).catalog(catalog).build();
        let end = agent.stream("go").finish().await.unwrap();
        assert_eq!(end.stop_reason, reason);
        assert!(track.finished.lock().unwrap().is_empty(), "{reason}");
        let history = agent.messages();
        assert!(
            history.iter().all(|m| m.tool_uses().next().is_none()),
            "{reason}: {history:?}"
        );
        assert_eq!(agent.ask("again").await.unwrap(), "next");
        let seen = model.last_request().unwrap().messages;
        assert!(all_results(&seen).is_empty(), "{reason}: {seen:?}");
    }
}
