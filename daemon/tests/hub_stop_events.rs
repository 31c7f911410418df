//! The hub core in-process, on both session backends: a turn that stops on a limit or a failed
//! model call leaves a `turn_stopped` event, and the next turn's repair a `turn_repaired` event,
//! in the session's stored events, read back after a hub restart; an events file written before
//! these kinds existed (or with a kind this hub does not know) still reads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::hub::*;
use taud::agent::{Limits, UNFINISHED_NOTICE};
use taud::hub::{CoreOptions, HubCore, OpenTarget, StartTurn};
use taud::message::Message;
use taud::store::{
    DEFAULT_AGENT_ID, SessionMessage, SessionStoreConfig, now_utc, open_session_store,
};
use taud::testing::{FakeModel, FakeReply};

async fn start(
    dir: &std::path::Path,
    backend: &str,
    model: &Arc<FakeModel>,
    o: CoreOptions,
) -> HubCore {
    setup(dir, backend, model, o).start().await.unwrap()
}

async fn run(core: &HubCore, session_id: &str, text: &str) {
    let mut stream = core
        .start_turn(StartTurn {
            session_id: session_id.to_owned(),
            text: text.to_owned(),
            channel: "terminal".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap();
    drain(&mut stream).await;
}

async fn new_session(core: &HubCore) -> String {
    core.open_session(OpenTarget::New, None, "terminal", None)
        .await
        .unwrap()
        .session
        .session_id
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// Runs `first` (which stops), restarts the hub, reads the events, runs a turn that repairs, and
/// returns the events after a second restart.
async fn stop_then_repair(
    backend: &'static str,
    replies: Vec<FakeReply>,
    options: impl Fn() -> CoreOptions,
) -> (Vec<Value>, Vec<Value>) {
    let dir = crate::support::temp::dir();
    let model = Arc::new(FakeModel::scripted(replies));
    let core = start(dir.path(), backend, &model, options()).await;
    let id = new_session(&core).await;
    run(&core, &id, "first").await;
    core.shutdown().await;

    let restarted = start(dir.path(), backend, &model, options()).await;
    let after_stop = restarted.read_events(&id).await.unwrap();
    model.push_replies([FakeReply::text("fine")]);
    run(&restarted, &id, "second").await;
    restarted.shutdown().await;

    let again = start(dir.path(), backend, &model, options()).await;
    let after_repair = again.read_events(&id).await.unwrap();
    again.shutdown().await;
    (after_stop, after_repair)
}

#[tokio::test]
async fn a_hit_turn_limit_is_stored_and_survives_a_restart() {
    for backend in BACKENDS {
        let limited = || {
            let mut o = options();
            o.limits = Limits {
                turns: Some(1),
                total_tokens: None,
            };
            o
        };
        let (after_stop, after_repair) = stop_then_repair(
            backend,
            vec![FakeReply::tool_call("current_time", json!({}))],
            limited,
        )
        .await;
        let stopped = of_type(&after_stop, "turn_stopped");
        assert_eq!(stopped.len(), 1, "{backend}: {after_stop:?}");
        let stopped = stopped[0];
        assert_eq!(stopped["stop_reason"], "limit_turns", "{backend}");
        assert_eq!(stopped["model_calls"], 1, "{backend}");
        assert_eq!(stopped["channel"], "terminal", "{backend}");
        assert_eq!(stopped["v"], 1, "{backend}");
        assert!(
            stopped["notice"].as_str().unwrap().contains("1 model call"),
            "{backend}: {stopped}"
        );
        // The stop comes after the turn's tool call.
        let kinds: Vec<&str> = after_stop
            .iter()
            .filter_map(|e| e["type"].as_str())
            .collect();
        assert_eq!(kinds, ["tool_call", "turn_stopped"], "{backend}");
        // It sits after the turn's three messages (prompt, tool call, tool result).
        assert_eq!(stopped["before_message"], 3, "{backend}");

        let repaired = of_type(&after_repair, "turn_repaired");
        assert_eq!(repaired.len(), 1, "{backend}: {after_repair:?}");
        assert_eq!(repaired[0]["notice"], stopped["notice"], "{backend}");
        assert_ne!(repaired[0]["turn_id"], stopped["turn_id"], "{backend}");
        // The repair sits before the repairing turn's first message.
        assert_eq!(repaired[0]["before_message"], 3, "{backend}");
        // The repairing turn ended normally: no second stop.
        assert_eq!(of_type(&after_repair, "turn_stopped").len(), 1, "{backend}");
    }
}

#[tokio::test]
async fn a_hit_token_budget_is_stored() {
    for backend in BACKENDS {
        let budget = || {
            let mut o = options();
            o.limits = Limits {
                turns: None,
                total_tokens: Some(1),
            };
            o
        };
        let (after_stop, _) = stop_then_repair(
            backend,
            vec![FakeReply::tool_call("current_time", json!({}))],
            budget,
        )
        .await;
        let stopped = of_type(&after_stop, "turn_stopped");
        assert_eq!(stopped.len(), 1, "{backend}: {after_stop:?}");
        assert_eq!(stopped[0]["stop_reason"], "limit_total_tokens", "{backend}");
    }
}

#[tokio::test]
async fn a_failed_model_call_is_stored_and_survives_a_restart() {
    for backend in BACKENDS {
        let (after_stop, after_repair) =
            stop_then_repair(backend, vec![FakeReply::error("boom")], options).await;
        let stopped = of_type(&after_stop, "turn_stopped");
        assert_eq!(stopped.len(), 1, "{backend}: {after_stop:?}");
        assert_eq!(stopped[0]["stop_reason"], "error", "{backend}");
        // Only the prompt was stored before the call failed.
        assert_eq!(stopped[0]["before_message"], 1, "{backend}");
        assert_eq!(
            stopped[0]["notice"], "The model call failed: the model request failed: boom",
            "{backend}"
        );
        let repaired = of_type(&after_repair, "turn_repaired");
        assert_eq!(repaired.len(), 1, "{backend}: {after_repair:?}");
        assert_eq!(repaired[0]["notice"], stopped[0]["notice"], "{backend}");
    }
}

#[tokio::test]
async fn a_turn_that_ends_normally_stores_no_stop() {
    for backend in BACKENDS {
        let f = fixture(backend, vec![FakeReply::text("hi")]).await;
        let id = f.new_session().await;
        run(&f.core, &id, "hello").await;
        assert_eq!(
            f.core.read_events(&id).await.unwrap(),
            Vec::<Value>::new(),
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_turn_after_a_crash_mid_turn_stores_its_repair() {
    for backend in BACKENDS {
        let dir = crate::support::temp::dir();
        let model = Arc::new(FakeModel::scripted(vec![
            FakeReply::text("hi"),
            FakeReply::text("back"),
        ]));
        let core = start(dir.path(), backend, &model, options()).await;
        let id = new_session(&core).await;
        run(&core, &id, "hello").await;
        core.shutdown().await;
        // The hub died right after storing a prompt: the history ends on it, with no notice.
        {
            let store = open_store(dir.path(), backend);
            let next = store
                .list_messages(&id, DEFAULT_AGENT_ID, None, 0)
                .unwrap()
                .len();
            let lost = SessionMessage::new(next as u64, Message::user_text("lost"), now_utc());
            store.create_message(&id, DEFAULT_AGENT_ID, &lost).unwrap();
        }
        let restarted = start(dir.path(), backend, &model, options()).await;
        run(&restarted, &id, "again").await;
        let events = restarted.read_events(&id).await.unwrap();
        let repaired = of_type(&events, "turn_repaired");
        assert_eq!(repaired.len(), 1, "{backend}: {events:?}");
        assert_eq!(repaired[0]["notice"], UNFINISHED_NOTICE, "{backend}");
        // After hello, hi and the lost prompt.
        assert_eq!(repaired[0]["before_message"], 3, "{backend}");
        restarted.shutdown().await;
    }
}

fn open_store(dir: &std::path::Path, backend: &str) -> Arc<dyn taud::store::SessionStore> {
    let config = SessionStoreConfig {
        sessions_dir: dir.join("sessions"),
        sqlite_path: dir.join("sessions.db"),
        durability: taud::store::Durability::NoSync,
    };
    open_session_store(&taud::store::SessionBackends::builtin(), backend, &config).unwrap()
}

#[tokio::test]
async fn an_events_file_without_the_turn_kinds_still_reads() {
    for backend in BACKENDS {
        let dir = crate::support::temp::dir();
        let model = Arc::new(FakeModel::scripted(vec![FakeReply::text("ok")]));
        let core = start(dir.path(), backend, &model, options()).await;
        let id = new_session(&core).await;
        core.shutdown().await;
        // Written as an older hub wrote them (no `v`), plus a kind a newer hub might add.
        let old = [
            json!({"type": "error", "where": "tier_gate", "message": "old", "session_id": id}),
            json!({"type": "some_future_kind", "detail": 1}),
        ];
        {
            let store = open_store(dir.path(), backend);
            for event in &old {
                store.append_event(&id, event).unwrap();
            }
        }
        let restarted = start(dir.path(), backend, &model, options()).await;
        run(&restarted, &id, "hello").await;
        let events = restarted.read_events(&id).await.unwrap();
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(kinds, ["error", "some_future_kind"], "{backend}");
        assert_eq!(events[0]["v"], 1, "{backend}");
        restarted.shutdown().await;
    }
}

#[tokio::test]
async fn a_cancelled_turn_is_stored() {
    for backend in BACKENDS {
        let f = fixture(backend, vec![lamp()]).await;
        let id = f.new_session().await;
        let mut turn = f.turn(&id, "turn on the lamp", "terminal").await;
        until_approval(&mut turn).await;
        assert!(f.core.cancel_turn(&id, None).await.unwrap().is_some());
        drain(&mut turn).await;
        let events = f.core.read_events(&id).await.unwrap();
        let stopped = of_type(&events, "turn_stopped");
        assert_eq!(stopped.len(), 1, "{backend}: {events:?}");
        assert_eq!(stopped[0]["stop_reason"], "cancelled", "{backend}");
        assert_eq!(
            stopped[0]["turn_id"].as_str(),
            Some(turn.accepted().turn_id.as_str()),
            "{backend}"
        );
    }
}
