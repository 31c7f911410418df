//! The agent loop with the fake model: the repair of a dangling history (a user message without an
//! answer, a toolUse without its result, a failed model call) and the notice the model reads next
//! time, kept while a turn is busy and taken over by a rebuilt agent.

use crate::support;

use std::sync::Arc;

use serde_json::json;
use support::agent::{Act, Concurrency, DEADLINE, Recorder, TestTool, catalog, texts, wait_for};
use taud::agent::{StopReason, TauAgent, TurnEvent};
use taud::message::{ContentBlock, Message, Role, ToolResult, ToolResultStatus, ToolUse};
use taud::testing::{FakeModel, FakeReply};
use taud::tool::Tier;
use tokio::sync::Notify;

#[tokio::test]
async fn repairs_a_dangling_user_message() {
    let recorder = Arc::new(Recorder::default());
    let model = Arc::new(FakeModel::scripted([FakeReply::text("back")]));
    let agent = TauAgent::builder(model.clone())
        .history(vec![Message::user_text("hi")])
        .history_observer(recorder.clone())
        .build();
    assert_eq!(agent.ask("again").await.unwrap(), "back");
    let request = model.last_request().unwrap();
    assert_eq!(
        texts(&request.messages),
        vec![
            (Role::User, "hi".into()),
            (
                Role::Assistant,
                "(The previous turn did not finish.)".into()
            ),
            (Role::User, "again".into()),
        ]
    );
    // The repair went through the append path like every other message.
    let indices: Vec<usize> = recorder
        .appended
        .lock()
        .unwrap()
        .iter()
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(indices, vec![1, 2, 3]);
}

#[tokio::test]
async fn repairs_a_dangling_tool_use() {
    let model = Arc::new(FakeModel::scripted([FakeReply::text("sorry")]));
    let dangling = Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse(ToolUse {
            tool_use_id: "t9".into(),
            name: "demo_physical_action".into(),
            input: json!({"action": "open the door"}),
        })],
        metadata: None,
    };
    let agent = TauAgent::builder(model.clone())
        .history(vec![Message::user_text("open the door"), dangling.clone()])
        .build();
    assert_eq!(agent.ask("hello").await.unwrap(), "sorry");
    let messages = model.last_request().unwrap().messages;
    assert_eq!(messages.len(), 5);
    assert_eq!(*messages[1], dangling);
    assert_eq!(
        *messages[2],
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::text(
                "t9",
                ToolResultStatus::Error,
                "Tool was interrupted."
            ))],
            metadata: None,
        }
    );
    assert_eq!(messages[3].role, Role::Assistant);
    assert_eq!(messages[3].text(), "(The previous turn did not finish.)");
    assert_eq!(messages[4].text(), "hello");
    // Roles alternate.
    for pair in messages.windows(2) {
        assert_ne!(pair[0].role, pair[1].role);
    }
}

#[tokio::test]
async fn a_failed_model_call_ends_with_error_and_is_repaired_next() {
    let model = Arc::new(FakeModel::scripted([
        FakeReply::error("401 bad key sk-ant-api03-abcdefghijklmnop\nsecond line"),
        FakeReply::text("ok"),
    ]));
    let agent = TauAgent::builder(model.clone()).build();
    let end = agent.stream("first").finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::Error);
    let notice = "The model call failed: the model request failed: 401 bad key [redacted]";
    assert_eq!(end.notice.as_deref(), Some(notice));
    assert_eq!(agent.pending_notice().as_deref(), Some(notice));
    assert_eq!(agent.ask("second").await.unwrap(), "ok");
    assert_eq!(agent.pending_notice(), None);
    let messages = model.last_request().unwrap().messages;
    assert_eq!(
        texts(&messages),
        vec![
            (Role::User, "first".into()),
            (Role::Assistant, format!("({notice})")),
            (Role::User, "second".into()),
        ]
    );
}

#[tokio::test]
async fn ask_reports_the_model_error_notice() {
    let model = Arc::new(FakeModel::scripted([FakeReply::error("boom")]));
    let agent = TauAgent::builder(model).build();
    let err = agent.ask("first").await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "The model call failed: the model request failed: boom"
    );
}

/// A turn queued behind a busy agent and cancelled there appends nothing and leaves the notice
/// of the turn it waited for to the next turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_turn_keeps_the_pending_notice() {
    let track = Arc::new(Concurrency::default());
    let release = Arc::new(Notify::new());
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("hold", json!({})),
        FakeReply::error("boom"),
        FakeReply::text("ok"),
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
    let mut first = agent.stream("first");
    let started = wait_for(&mut first, |e| {
        matches!(e, TurnEvent::ToolUseStarted { .. })
    })
    .await;
    assert!(started.is_some());
    // The agent is busy: this turn waits in the queue until it is cancelled there.
    let busy = agent.stream("skipped");
    assert!(agent.is_busy());
    busy.cancel();
    let skipped = busy.finish().await.unwrap();
    assert_eq!(
        (skipped.stop_reason, skipped.model_calls),
        (StopReason::Cancelled, 0)
    );
    release.notify_one();
    let failed = first.finish().await.unwrap();
    assert_eq!(failed.stop_reason, StopReason::Error);
    let notice = failed.notice.unwrap();
    assert_eq!(agent.pending_notice().as_deref(), Some(notice.as_str()));
    assert_eq!(agent.ask("second").await.unwrap(), "ok");
    let messages = model.last_request().unwrap().messages;
    let n = messages.len();
    assert_eq!(messages[n - 2].text(), format!("({notice})"));
    assert_eq!(messages[n - 1].text(), "second");
    assert!(messages.iter().all(|m| m.text() != "skipped"));
    assert_eq!(model.call_count(), 3);
}

#[tokio::test]
async fn a_rebuilt_agent_takes_over_the_pending_notice() {
    let model = Arc::new(FakeModel::scripted([
        FakeReply::error("boom"),
        FakeReply::text("ok"),
    ]));
    let agent = TauAgent::builder(model.clone()).build();
    let end = agent.stream("first").finish().await.unwrap();
    let notice = end.notice.unwrap();
    let carried = agent.pending_notice();
    assert_eq!(carried.as_deref(), Some(notice.as_str()));
    let rebuilt = TauAgent::builder(model.clone())
        .history(agent.messages())
        .pending_notice(carried)
        .build();
    assert_eq!(rebuilt.pending_notice().as_deref(), Some(notice.as_str()));
    assert_eq!(rebuilt.ask("second").await.unwrap(), "ok");
    let messages = model.last_request().unwrap().messages;
    assert_eq!(messages[1].text(), format!("({notice})"));
    // Without it, a rebuilt agent only knows that the previous turn did not finish.
    let plain = TauAgent::builder(model.clone())
        .history(vec![Message::user_text("first")])
        .build();
    assert_eq!(plain.pending_notice(), None);
    // A notice for a history that ends cleanly is not pending.
    let clean = TauAgent::builder(model)
        .history(vec![Message::user_text("a"), Message::assistant_text("b")])
        .pending_notice(Some("stale".into()))
        .build();
    assert_eq!(clean.pending_notice(), None);
}
