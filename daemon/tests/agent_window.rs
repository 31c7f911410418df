//! The agent's conversation window: the model receives only the window, asked before every model
//! call, while the history observer (the store) receives every message; a failing window falls
//! back without breaking the turn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::json;
use support::agent::{Act, Concurrency, Recorder, TestTool, lock};
use taud::agent::{ConversationWindow, StopReason, TauAgent, WindowError};
use taud::context::sliding_window_start;
use taud::message::{Message, Role};
use taud::testing::{FakeModel, FakeReply};
use taud::tool::{Tier, ToolCatalog};
use tokio_util::sync::CancellationToken;

/// A sliding window of `size` messages that counts how often it was asked.
struct Sliding {
    size: usize,
    asked: AtomicUsize,
}

#[async_trait]
impl ConversationWindow for Sliding {
    async fn view(
        &self,
        history: &[Arc<Message>],
        _first: usize,
        _cancel: &CancellationToken,
    ) -> Result<Vec<Arc<Message>>, WindowError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(history[sliding_window_start(history, self.size)..].to_vec())
    }
}

/// A window whose view always fails; its fallback is the last message only.
struct Failing {
    asked: AtomicUsize,
}

#[async_trait]
impl ConversationWindow for Failing {
    async fn view(
        &self,
        _history: &[Arc<Message>],
        _first: usize,
        _cancel: &CancellationToken,
    ) -> Result<Vec<Arc<Message>>, WindowError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Err(WindowError("the summary call failed".into()))
    }

    fn fallback(&self, history: &[Arc<Message>]) -> Vec<Arc<Message>> {
        history[history.len() - 1..].to_vec()
    }
}

fn step_catalog() -> ToolCatalog {
    let track = Arc::new(Concurrency::default());
    let mut catalog = ToolCatalog::new();
    assert_eq!(
        catalog.add(TestTool::shared("step", Tier::Read, Act::Done, &track)),
        Ok(())
    );
    catalog
}

#[tokio::test]
async fn the_model_sees_the_window_and_the_observer_every_message() {
    let model = Arc::new(FakeModel::scripted([
        FakeReply::text("a0"),
        FakeReply::text("a1"),
        FakeReply::tool_call("step", json!({})),
        FakeReply::text("a2"),
        FakeReply::text("a3"),
        FakeReply::text("a4"),
    ]));
    let observer = Arc::new(Recorder::default());
    let window = Arc::new(Sliding {
        size: 4,
        asked: AtomicUsize::new(0),
    });
    let agent = TauAgent::builder(model.clone())
        .catalog(step_catalog())
        .history_observer(observer.clone())
        .conversation_window(window.clone())
        .build();
    for n in 0..5 {
        let end = agent.stream(format!("q{n}")).finish().await.unwrap();
        assert_eq!(end.stop_reason, StopReason::EndTurn, "turn {n}");
        assert_eq!(end.text, format!("a{n}"));
    }
    // Turn 2 made two model calls (a tool call, then the answer): the window was asked each time.
    assert_eq!(model.call_count(), 6);
    assert_eq!(window.asked.load(Ordering::SeqCst), 6);

    // The observer and the agent's own history hold every message, in order, with their indices:
    // the observer the whole message (a reply's usage included), memory the message as a model
    // receives it.
    let appended = lock(&observer.appended).clone();
    assert_eq!(appended.len(), 12);
    assert!(
        appended
            .iter()
            .enumerate()
            .all(|(i, (index, _))| *index == i)
    );
    assert!(appended[1].1.metadata.is_some());
    let history = agent.messages();
    assert_eq!(
        history,
        appended
            .iter()
            .map(|(_, m)| m.for_model())
            .collect::<Vec<_>>()
    );

    // Each request held exactly the window over the history as it was before that call.
    let requests = model.requests();
    let texts =
        |messages: &[Arc<Message>]| -> Vec<String> { messages.iter().map(|m| m.text()).collect() };
    assert_eq!(texts(&requests[0].messages), ["q0"]);
    assert_eq!(texts(&requests[1].messages), ["q0", "a0", "q1"]);
    // Turn 2, first call: 5 messages, so the window starts at the next clean user message.
    assert_eq!(texts(&requests[2].messages), ["q1", "a1", "q2"]);
    // Turn 2, second call: the tool pair stays whole and the window starts at its user message.
    let second = &requests[3].messages;
    assert_eq!(second[0].text(), "q2");
    assert_eq!(second.len(), 3);
    assert!(second[1].tool_uses().next().is_some());
    assert!(second[2].tool_results().next().is_some());
    // Later turns: never more than the window, always from a user message, while history grows.
    for (request, prompt) in requests[4..].iter().zip(["q3", "q4"]) {
        assert!(
            request.messages.len() <= 4,
            "{:?}",
            texts(&request.messages)
        );
        assert_eq!(request.messages[0].role, Role::User);
        assert!(request.messages[0].tool_results().next().is_none());
        assert_eq!(request.messages.last().unwrap().text(), prompt);
    }
    assert_eq!(texts(&requests[5].messages), ["q3", "a3", "q4"]);
}

#[tokio::test]
async fn a_failing_window_falls_back_and_the_turn_goes_on() {
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call("step", json!({})),
        FakeReply::text("done"),
        FakeReply::text("again"),
    ]));
    let observer = Arc::new(Recorder::default());
    let window = Arc::new(Failing {
        asked: AtomicUsize::new(0),
    });
    let agent = TauAgent::builder(model.clone())
        .catalog(step_catalog())
        .history_observer(observer.clone())
        .conversation_window(window.clone())
        .build();
    let end = agent.stream("do it").finish().await.unwrap();
    assert_eq!(end.stop_reason, StopReason::EndTurn);
    assert_eq!(end.text, "done");
    // Asked once in the turn; the second call went straight to the fallback.
    assert_eq!(window.asked.load(Ordering::SeqCst), 1);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].messages.len(), 1);
    assert_eq!(requests[0].messages[0].text(), "do it");
    assert_eq!(requests[1].messages.len(), 1);
    assert!(requests[1].messages[0].tool_results().next().is_some());
    // The next turn asks the window again.
    assert_eq!(agent.ask("more").await.unwrap(), "again");
    assert_eq!(window.asked.load(Ordering::SeqCst), 2);
    assert_eq!(lock(&observer.appended).len(), 6);
}
