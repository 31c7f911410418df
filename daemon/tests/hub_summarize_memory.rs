//! The hub's agents under `[agent] context = "summarize"` hold about twice their window in memory,
//! however long the session, on both session backends, while the model sees what it always saw
//! (the summary and the messages after it): what the summary covers leaves memory, a summary that
//! has to fold in messages no longer held reads them from the store, and a restarted hub restores
//! the agent from the newest messages only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;

use support::hub::*;
use support::window::*;
use taud::context::{SEED_ACKNOWLEDGEMENT, WINDOW_SUMMARY_HEADER};
use taud::hub::CoreOptions;
use taud::store::{ContextMode, DEFAULT_AGENT_ID};
use taud::testing::{FakeModel, FakeReply};

const WINDOW: usize = 4;

fn summarize_options() -> CoreOptions {
    window_options(ContextMode::Summarize, WINDOW)
}

async fn held(f: &Fixture, id: &str) -> u64 {
    f.core
        .get_session(id, false)
        .await
        .unwrap()
        .in_memory_messages
}

/// Turns 0 and 1 fit the window; from turn 2 on each turn moves it: a summary, then the reply.
fn script(turns: usize) -> Vec<FakeReply> {
    let mut replies = vec![FakeReply::text("a0"), FakeReply::text("a1")];
    for n in 2..turns {
        replies.push(FakeReply::text(format!("S{n}")));
        replies.push(FakeReply::text(format!("a{n}")));
    }
    replies
}

#[tokio::test]
async fn a_long_summarize_session_holds_twice_the_window_and_restores_from_the_tail() {
    const TURNS: usize = 30;
    for backend in BACKENDS {
        let f = fixture_with(backend, script(TURNS), summarize_options()).await;
        let id = f.new_session().await;
        let mut most_held = 0;
        for n in 0..TURNS {
            assert_eq!(say(&f, &id, &format!("q{n}")).await, format!("a{n}"));
            most_held = most_held.max(held(&f, &id).await);
        }
        assert!(
            most_held <= 2 * WINDOW as u64,
            "{backend}: held {most_held}"
        );
        // The model's view is the summary and the messages after it, as ever: the last summary
        // folded the one before and the two messages that left the window.
        let requests = f.model.requests();
        assert_eq!(requests.len(), 2 * TURNS - 2, "{backend}");
        let summary_call = &requests[requests.len() - 2];
        assert!(is_summary_call(summary_call));
        let seen = texts(summary_call).join(" ");
        assert!(seen.contains("S28") && seen.contains("q27") && seen.contains("a27"));
        assert!(!seen.contains("q26") && !seen.contains("q28"), "{seen}");
        let summary = |n: usize| format!("{WINDOW_SUMMARY_HEADER}\nS{n}");
        assert_eq!(
            texts(&requests[requests.len() - 1]),
            [&summary(29), SEED_ACKNOWLEDGEMENT, "q28", "a28", "q29"]
        );
        f.core.shutdown().await;

        // The store keeps every message, with the summary state counting stored messages.
        let store = open_store(&f);
        let stored = store.list_messages(&id, DEFAULT_AGENT_ID, None, 0).unwrap();
        assert_eq!(stored.len(), 2 * TURNS, "{backend}");
        let record = store.read_agent(&id, DEFAULT_AGENT_ID).unwrap().unwrap();
        assert_eq!(record.conversation_manager_state.removed_message_count, 56);
        drop(store);
        if backend == "file" {
            // Only the newest messages are read on restore: a damaged old one is never touched.
            let oldest = f.dir.join(format!(
                "sessions/{id}/agents/{DEFAULT_AGENT_ID}/messages/000000.json"
            ));
            std::fs::write(oldest, b"{\"v\":1,").unwrap();
        }

        let model = Arc::new(FakeModel::scripted([
            FakeReply::text("S30"),
            FakeReply::text("a30"),
        ]));
        let restarted = restart(&f, &model, summarize_options(), &id).await;
        let restored = held(&restarted, &id).await;
        assert!(
            restored <= 2 * WINDOW as u64,
            "{backend}: restored {restored}"
        );
        assert_eq!(say(&restarted, &id, "q30").await, "a30", "{backend}");
        let requests = model.requests();
        assert_eq!(requests.len(), 2, "{backend}");
        let seen = texts(&requests[0]).join(" ");
        assert!(seen.contains("S29") && seen.contains("q28") && seen.contains("a28"));
        assert!(!seen.contains("q27") && !seen.contains("q29"), "{seen}");
        assert_eq!(
            texts(&requests[1]),
            [&summary(30), SEED_ACKNOWLEDGEMENT, "q29", "a29", "q30"]
        );
        restarted.core.shutdown().await;
    }
}

#[tokio::test]
async fn a_summary_that_fell_behind_reads_what_memory_let_go_from_the_store() {
    const FAILING: usize = 8;
    for backend in BACKENDS {
        // Turns 2 to 9 each try a summary that fails (the model sees the sliding window); turn
        // 10's summary works and has to fold in everything from message 0.
        let mut replies = vec![FakeReply::text("a0"), FakeReply::text("a1")];
        for n in 2..2 + FAILING {
            replies.push(FakeReply::error("the provider is down"));
            replies.push(FakeReply::text(format!("a{n}")));
        }
        replies.push(FakeReply::text("everything up to a8"));
        replies.push(FakeReply::text("a10"));
        let f = fixture_with(backend, replies, summarize_options()).await;
        let id = f.new_session().await;
        let mut most_held = 0;
        for n in 0..2 + FAILING {
            assert_eq!(say(&f, &id, &format!("q{n}")).await, format!("a{n}"));
            most_held = most_held.max(held(&f, &id).await);
        }
        assert!(
            most_held <= 2 * WINDOW as u64,
            "{backend}: held {most_held}"
        );
        assert_eq!(
            texts(&f.model.last_request().unwrap()),
            ["q8", "a8", "q9"],
            "{backend}: the sliding fallback"
        );

        assert_eq!(say(&f, &id, "q10").await, "a10", "{backend}");
        let requests = f.model.requests();
        let summary_call = &requests[requests.len() - 2];
        assert!(is_summary_call(summary_call));
        let seen = texts(summary_call).join(" ");
        let words: Vec<&str> = seen.split_whitespace().collect();
        for n in 0..9 {
            for word in [format!("q{n}"), format!("a{n}")] {
                assert!(
                    words.contains(&word.as_str()),
                    "{backend}: {word} in {seen}"
                );
            }
        }
        assert!(!words.contains(&"q9") && !words.contains(&"q10"), "{seen}");
        assert_eq!(
            texts(&requests[requests.len() - 1]),
            [
                &format!("{WINDOW_SUMMARY_HEADER}\neverything up to a8"),
                SEED_ACKNOWLEDGEMENT,
                "q9",
                "a9",
                "q10"
            ]
        );
        assert!(held(&f, &id).await <= 2 * WINDOW as u64);
        let record = open_store(&f)
            .read_agent(&id, DEFAULT_AGENT_ID)
            .unwrap()
            .unwrap();
        assert_eq!(record.conversation_manager_state.removed_message_count, 18);
        f.core.shutdown().await;
    }
}

#[tokio::test]
async fn a_pending_repair_notice_outlives_the_messages_memory_let_go() {
    const NOTICE: &str = "(The model call failed: the model request failed: boom)";
    for backend in BACKENDS {
        let mut options = summarize_options();
        options.idle_after = std::time::Duration::ZERO;
        let mut replies = script(6);
        replies.extend([
            FakeReply::text("S6"),
            FakeReply::error("boom"),
            FakeReply::text("S7"),
            FakeReply::text("ok"),
        ]);
        let f = fixture_with(backend, replies, options).await;
        let id = f.new_session().await;
        for n in 0..6 {
            assert_eq!(say(&f, &id, &format!("q{n}")).await, format!("a{n}"));
        }
        // The turn fails after its summary: memory lets go of what the summary covers, and the
        // notice is recorded against the whole history's length.
        say(&f, &id, "first").await;
        assert!(held(&f, &id).await < 13, "{backend}");
        f.core.drop_idle().await;
        assert_eq!(f.core.open_sessions(), 0);
        assert_eq!(say(&f, &id, "second").await, "ok", "{backend}");
        let last = f.model.last_request().unwrap();
        assert_eq!(
            texts(&last),
            [
                &format!("{WINDOW_SUMMARY_HEADER}\nS7"),
                SEED_ACKNOWLEDGEMENT,
                "first",
                NOTICE,
                "second"
            ],
            "{backend}"
        );
    }
}

#[tokio::test]
async fn compact_summarizes_what_the_model_sees() {
    for backend in BACKENDS {
        let mut replies = script(6);
        replies.push(FakeReply::text("the whole conversation"));
        let f = fixture_with(backend, replies, summarize_options()).await;
        let id = f.new_session().await;
        for n in 0..6 {
            assert_eq!(say(&f, &id, &format!("q{n}")).await, format!("a{n}"));
        }
        let compacted = f.core.compact_session(&id, "", "terminal").await.unwrap();
        assert_eq!(compacted.summary, "the whole conversation", "{backend}");
        // The window's summary stands for what memory let go; the messages after it follow.
        let seen = texts(&f.model.last_request().unwrap()).join(" ");
        let words: Vec<&str> = seen.split_whitespace().collect();
        assert!(seen.contains("S5"), "{backend}: {seen}");
        for word in ["q4", "a4", "q5", "a5"] {
            assert!(words.contains(&word), "{backend}: {word} in {seen}");
        }
        assert!(!words.contains(&"q3") && !words.contains(&"q0"), "{seen}");
    }
}
