//! When a turn's prompt reaches the session store, through the hub core on both stores: with the
//! reply when the model answers at once (one write; `agent_round_writes.rs` counts the writes),
//! or on its own once it has waited `HOLD_PROMPT_AT_MOST` while the model keeps thinking, so a
//! crash then still leaves it (`GetSession` reads what the store holds).

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use support::hub::*;
use taud::agent::{CANCELLED_PLACEHOLDER, HOLD_PROMPT_AT_MOST};
use taud::hub::{EventKind, HubCore};
use taud::message::Role;
use taud::testing::FakeReply;

/// The session's stored messages, oldest first: id, role and text.
async fn stored(core: &HubCore, session_id: &str) -> Vec<(u64, Role, String)> {
    let detail = core.get_session(session_id, true).await.unwrap();
    detail
        .messages
        .into_iter()
        .map(|(id, message, _)| (id, message.role, message.text()))
        .collect()
}

fn user(id: u64, text: &str) -> (u64, Role, String) {
    (id, Role::User, text.to_owned())
}

fn assistant(id: u64, text: &str) -> (u64, Role, String) {
    (id, Role::Assistant, text.to_owned())
}

#[tokio::test]
async fn a_prompt_answered_at_once_is_stored_with_its_reply() {
    for backend in BACKENDS {
        let f = fixture(backend, vec![FakeReply::text("hi")]).await;
        let id = f.new_session().await;
        let events = drain(&mut f.turn(&id, "hello", "terminal").await).await;
        assert_eq!(ended_text(&events), "hi", "{backend}");
        assert_eq!(
            stored(&f.core, &id).await,
            [user(0, "hello"), assistant(1, "hi")],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn a_prompt_the_model_keeps_waiting_is_stored_while_it_thinks() {
    for backend in BACKENDS {
        let f = fixture(backend, vec![FakeReply::text("thinking").then_hang()]).await;
        let id = f.new_session().await;
        let started = Instant::now();
        let mut turn = f.turn(&id, "hello", "terminal").await;
        let prompt = vec![user(0, "hello")];
        while stored(&f.core, &id).await != prompt {
            assert!(
                started.elapsed() < DEADLINE,
                "{backend}: the prompt was never stored"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(started.elapsed() >= HOLD_PROMPT_AT_MOST, "{backend}");
        let detail = f.core.get_session(&id, false).await.unwrap();
        assert!(detail.busy, "{backend}: stored while the turn still runs");

        f.core.cancel_turn(&id, None).await.unwrap();
        let events = drain(&mut turn).await;
        let cancelled = events.iter().any(|e| {
            matches!(&e.kind, EventKind::TurnEnded(end) if end.stop_reason.as_str() == "cancelled")
        });
        assert!(cancelled, "{backend}: {:?}", names(&events));
        assert_eq!(
            stored(&f.core, &id).await,
            [user(0, "hello"), assistant(1, CANCELLED_PLACEHOLDER)],
            "{backend}"
        );
    }
}
