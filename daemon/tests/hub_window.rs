//! The hub core's conversation windows, in-process on both session backends with a scripted fake
//! model: under `[agent] context = "summarize"` a summary call happens once the history passes the
//! window, the new state is stored in the agent record, and later requests (also after a restart)
//! start with the summary while the store keeps every message; under `sliding` the model sees only
//! the last `window_size` messages across many turns.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;

use support::hub::*;
use support::window::*;
use taud::context::{SEED_ACKNOWLEDGEMENT, WINDOW_SUMMARY_HEADER};
use taud::message::{Message, Role};
use taud::store::{ContextMode, DEFAULT_AGENT_ID};
use taud::testing::{FakeModel, FakeReply};

#[tokio::test]
async fn summarize_mode_summarizes_past_the_window_and_stores_the_state() {
    for backend in BACKENDS {
        let f = fixture_with(
            backend,
            vec![
                FakeReply::text("a0"),
                FakeReply::text("a1"),
                FakeReply::text("The user asked q0."),
                FakeReply::text("a2"),
                FakeReply::text("The user asked q0 and q1."),
                FakeReply::text("a3"),
            ],
            window_options(ContextMode::Summarize, 4),
        )
        .await;
        let id = f.new_session().await;
        assert_eq!(say(&f, &id, "q0").await, "a0");
        assert_eq!(say(&f, &id, "q1").await, "a1");
        // Within the window: no summary yet, nothing recorded.
        assert_eq!(f.model.call_count(), 2, "{backend}");
        assert_eq!(texts(&f.model.requests()[1]), ["q0", "a0", "q1"]);
        let store = open_store(&f);
        let record = store.read_agent(&id, DEFAULT_AGENT_ID).unwrap().unwrap();
        assert!(record.conversation_manager_state.summary_message.is_none());

        // The third prompt passes the window: one summary call over what left the window (the
        // newest 4 messages, cut at a user message, stay verbatim), then the turn's own call.
        assert_eq!(say(&f, &id, "q2").await, "a2");
        let requests = f.model.requests();
        assert_eq!(requests.len(), 4, "{backend}");
        let summary_call = &requests[2];
        assert!(is_summary_call(summary_call), "{summary_call:?}");
        assert!(summary_call.tools.is_empty());
        let seen = texts(summary_call).join(" ");
        assert!(seen.contains("q0") && seen.contains("a0"), "{seen}");
        assert!(!seen.contains("q1") && !seen.contains("q2"), "{seen}");
        let summary = format!("{WINDOW_SUMMARY_HEADER}\nThe user asked q0.");
        assert_eq!(
            texts(&requests[3]),
            [summary.as_str(), SEED_ACKNOWLEDGEMENT, "q1", "a1", "q2"]
        );
        assert!(!is_summary_call(&requests[3]));

        // The state is in the agent record; the store still has every message.
        let record = store.read_agent(&id, DEFAULT_AGENT_ID).unwrap().unwrap();
        let state = &record.conversation_manager_state;
        assert_eq!(state.removed_message_count, 2, "{backend}");
        assert_eq!(
            state.summary_message.as_ref().map(Message::text),
            Some(summary.clone())
        );
        assert_eq!(
            ContextMode::from_manager_name(&state.name),
            Some(ContextMode::Summarize)
        );
        let stored = store.list_messages(&id, DEFAULT_AGENT_ID, None, 0).unwrap();
        assert_eq!(stored.len(), 6);

        // The next turn moves the window again: the new summary folds in the recorded one and
        // the two messages that left the window, not the ones it already covers.
        assert_eq!(say(&f, &id, "q3").await, "a3");
        let requests = f.model.requests();
        assert_eq!(requests.len(), 6, "{backend}");
        assert!(is_summary_call(&requests[4]));
        let seen = texts(&requests[4]).join(" ");
        assert!(seen.contains(&summary), "{seen}");
        assert!(
            seen.contains("a1") && !seen.contains("a0") && !seen.contains("q2"),
            "{seen}"
        );
        let second = format!("{WINDOW_SUMMARY_HEADER}\nThe user asked q0 and q1.");
        assert_eq!(
            texts(&requests[5]),
            [second.as_str(), SEED_ACKNOWLEDGEMENT, "q2", "a2", "q3"]
        );
        assert_eq!(requests[5].messages[0].role, Role::User);
        f.core.shutdown().await;

        // A restarted hub resumes the session with the recorded summary: the next summary call
        // (q4 moves the window past it) folds the recorded one in, not the messages it covers.
        let model = Arc::new(FakeModel::scripted([
            FakeReply::text("Summary three."),
            FakeReply::text("a4"),
        ]));
        let restarted = restart(&f, &model, window_options(ContextMode::Summarize, 4), &id).await;
        assert_eq!(say(&restarted, &id, "q4").await, "a4");
        let requests = model.requests();
        assert_eq!(requests.len(), 2, "{backend}");
        assert!(is_summary_call(&requests[0]));
        let seen = texts(&requests[0]).join(" ");
        assert!(seen.contains(&second), "{seen}");
        assert!(
            seen.contains("a2") && !seen.contains("a1") && !seen.contains("q3"),
            "{seen}"
        );
        let third = format!("{WINDOW_SUMMARY_HEADER}\nSummary three.");
        assert_eq!(
            texts(&requests[1]),
            [third.as_str(), SEED_ACKNOWLEDGEMENT, "q3", "a3", "q4"]
        );
        let record = store.read_agent(&id, DEFAULT_AGENT_ID).unwrap().unwrap();
        assert_eq!(record.conversation_manager_state.removed_message_count, 6);
        restarted.core.shutdown().await;
    }
}

#[tokio::test]
async fn a_failed_summary_falls_back_to_the_sliding_window() {
    for backend in BACKENDS {
        let f = fixture_with(
            backend,
            vec![
                FakeReply::text("a0"),
                FakeReply::text("a1"),
                FakeReply::error("the provider is down"),
                FakeReply::text("a2"),
            ],
            window_options(ContextMode::Summarize, 4),
        )
        .await;
        let id = f.new_session().await;
        say(&f, &id, "q0").await;
        say(&f, &id, "q1").await;
        assert_eq!(say(&f, &id, "q2").await, "a2", "{backend}");
        let requests = f.model.requests();
        assert_eq!(requests.len(), 4);
        assert!(is_summary_call(&requests[2]));
        assert_eq!(texts(&requests[3]), ["q1", "a1", "q2"], "{backend}");
        let record = open_store(&f)
            .read_agent(&id, DEFAULT_AGENT_ID)
            .unwrap()
            .unwrap();
        assert!(record.conversation_manager_state.summary_message.is_none());
        assert_eq!(record.conversation_manager_state.removed_message_count, 0);
    }
}

#[tokio::test]
async fn sliding_mode_shows_the_model_only_the_window_across_turns() {
    for backend in BACKENDS {
        let replies = (0..6).map(|n| FakeReply::text(format!("a{n}")));
        let f = fixture_with(
            backend,
            replies.collect(),
            window_options(ContextMode::Sliding, 4),
        )
        .await;
        let id = f.new_session().await;
        for n in 0..6 {
            assert_eq!(say(&f, &id, &format!("q{n}")).await, format!("a{n}"));
        }
        let requests = f.model.requests();
        assert_eq!(requests.len(), 6);
        assert!(requests.iter().all(|r| !is_summary_call(r)));
        assert_eq!(texts(&requests[5]), ["q4", "a4", "q5"], "{backend}");
        for request in &requests {
            assert!(request.messages.len() <= 4);
            assert_eq!(request.messages[0].role, Role::User);
        }
        let stored = open_store(&f)
            .list_messages(&id, DEFAULT_AGENT_ID, None, 0)
            .unwrap();
        assert_eq!(stored.len(), 12, "{backend}");
    }
}

#[tokio::test]
async fn sliding_mode_keeps_memory_bounded_while_the_store_keeps_everything() {
    for backend in BACKENDS {
        let turns = 40;
        let replies = (0..turns).map(|n| FakeReply::text(format!("a{n}")));
        let f = fixture_with(
            backend,
            replies.collect(),
            window_options(ContextMode::Sliding, 4),
        )
        .await;
        let id = f.new_session().await;
        let mut most_held = 0;
        for n in 0..turns {
            assert_eq!(say(&f, &id, &format!("q{n}")).await, format!("a{n}"));
            let detail = f.core.get_session(&id, false).await.unwrap();
            most_held = most_held.max(detail.in_memory_messages);
        }
        // Memory holds about twice the window, however long the session runs.
        assert!(most_held <= 8, "{backend}: held {most_held}");
        // The model still sees exactly the window, cut from the same messages.
        let last = f.model.requests().pop().unwrap();
        assert_eq!(texts(&last), ["q38", "a38", "q39"], "{backend}");
        // Every message is stored, with contiguous ids in order.
        let stored = open_store(&f)
            .list_messages(&id, DEFAULT_AGENT_ID, None, 0)
            .unwrap();
        assert_eq!(stored.len(), 2 * turns, "{backend}");
        for (n, message) in stored.iter().enumerate() {
            assert_eq!(message.message_id, n as u64, "{backend}");
        }
        assert_eq!(stored.last().unwrap().to_message().text(), "a39");
    }
}

#[tokio::test]
async fn a_stored_block_of_an_unknown_kind_is_kept_and_never_sent_to_the_model() {
    use taud::store::{SessionMessage, now_utc};
    for backend in BACKENDS {
        let mut options = window_options(ContextMode::Sliding, 10);
        options.idle_after = std::time::Duration::ZERO;
        let f = fixture_with(backend, vec![FakeReply::text("again, ok")], options).await;
        let id = f.new_session().await;
        f.core.drop_idle().await;
        // A newer writer stored a block this version does not know.
        let looked: Message = serde_json::from_value(serde_json::json!({
            "role": "user",
            "content": [{"text": "look"}, {"video": {"format": "mp4", "source": {"bytes": "AAAA"}}}],
        }))
        .unwrap();
        let store = open_store(&f);
        for (n, message) in [looked.clone(), Message::assistant_text("seen")]
            .into_iter()
            .enumerate()
        {
            store
                .create_message(
                    &id,
                    DEFAULT_AGENT_ID,
                    &SessionMessage::new(n as u64, message, now_utc()),
                )
                .unwrap();
        }
        drop(store);

        assert_eq!(say(&f, &id, "again").await, "again, ok", "{backend}");
        let request = f.model.last_request().unwrap();
        assert_eq!(texts(&request), ["look", "seen", "again"], "{backend}");
        assert_eq!(
            request.messages[0].content.len(),
            1,
            "only the text block is sent"
        );
        // The store still holds the block exactly as it was written.
        let stored = open_store(&f)
            .list_messages(&id, DEFAULT_AGENT_ID, None, 0)
            .unwrap();
        assert_eq!(stored.len(), 4, "{backend}");
        assert_eq!(stored[0].to_message(), &looked, "{backend}");
        let detail = f.core.get_session(&id, true).await.unwrap();
        assert_eq!(detail.messages.len(), 4, "{backend}");
    }
}
