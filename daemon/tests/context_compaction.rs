//! `/compact` against both built-in backends: the new session starts with the seed and survives a
//! reopen, the old one keeps every message and points at the new one, and every failure leaves the
//! store exactly as it was.

// Test code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use support::store::{Harness, tree};
use taud::context::{
    CONTINUATION_PROMPT, CompactRequest, CompactionError, SummaryCall, compact_session,
    seed_messages,
};
use taud::message::{ContentBlock, Message, Role, ToolResult, ToolResultStatus, ToolUse};
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, SessionAgent, SessionInfo, SessionMessage, SessionMeta,
    SessionStore, create_fresh_session, now_utc, read_agent_for_mode, recent_sessions,
};
use taud::testing::{FakeModel, FakeReply};
use tokio_util::sync::CancellationToken;

/// What a caller can read of one session.
#[derive(Debug, PartialEq)]
struct SessionSnapshot {
    meta: Option<SessionMeta>,
    agent: Option<SessionAgent>,
    messages: Vec<SessionMessage>,
    events: Vec<Value>,
}

/// Everything a caller can read from a store, for "nothing changed" checks.
#[derive(Debug, PartialEq)]
struct Snapshot {
    sessions: Vec<SessionInfo>,
    details: Vec<SessionSnapshot>,
}

fn snapshot(store: &dyn SessionStore) -> Snapshot {
    let sessions = store.list_sessions().unwrap();
    let details = sessions
        .iter()
        .map(|info| {
            let id = &info.session_id;
            let agent = store.read_agent(id, DEFAULT_AGENT_ID).unwrap();
            let messages = if agent.is_some() {
                store.list_messages(id, DEFAULT_AGENT_ID, None, 0).unwrap()
            } else {
                Vec::new()
            };
            SessionSnapshot {
                meta: store.read_meta(id).unwrap(),
                agent,
                messages,
                events: store.read_events(id).unwrap(),
            }
        })
        .collect();
    Snapshot { sessions, details }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn tool_pair(id: &str) -> [Message; 2] {
    [
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse(ToolUse {
                tool_use_id: id.into(),
                name: "desk_lamp".into(),
                input: json!({"on": true}),
            })],
            metadata: None,
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResult::text(
                id,
                ToolResultStatus::Success,
                "the lamp is on",
            ))],
            metadata: None,
        },
    ]
}

/// A session with a conversation (a tool call included) and metadata; returns its id and messages.
fn conversation(h: &Harness, meta: Option<SessionMeta>) -> (String, Vec<Message>) {
    let store = h.store.as_ref();
    let id = h.session_with_agent();
    let mut messages = vec![Message::user_text("Merhaba! Masa lambasını aç.\nLütfen.")];
    messages.extend(tool_pair("t1"));
    messages.push(Message::assistant_text("Lamba açıldı."));
    messages.push(Message::user_text(
        "Teşekkürler, yarın bitkileri sulamayı hatırlat.",
    ));
    messages.push(Message::assistant_text("Tamam."));
    for (n, message) in (0u64..).zip(&messages) {
        store
            .create_message(
                &id,
                DEFAULT_AGENT_ID,
                &SessionMessage::new(n, message.clone(), now_utc()),
            )
            .unwrap();
    }
    if let Some(meta) = meta {
        store.write_meta(&id, &meta).unwrap();
    }
    // Closed, as the hub leaves a session: the tests compare trees with a second store's view,
    // and only one store may hold a session's journal.
    store.close_session(&id).unwrap();
    (id, messages)
}

fn old_meta() -> SessionMeta {
    SessionMeta {
        channel: Some("telegram".into()),
        profile: Some("home".into()),
        title: Some("Merhaba! Masa lambasını aç.".into()),
        role: Some("brain".into()),
        context: Some(ContextMode::Sliding),
        ..SessionMeta::default()
    }
}

mod cases {
    use super::*;

    pub fn compaction_round_trips(h: &Harness) {
        let (old_id, messages) = conversation(h, Some(old_meta()));
        let model = FakeModel::scripted([FakeReply::text(
            "The user writes Turkish. The desk lamp is on. Open task: remind about the plants.",
        )]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let request = CompactRequest {
            focus: Some("the plants".into()),
            meta: SessionMeta {
                channel: Some("terminal".into()),
                ..SessionMeta::default()
            },
            ..CompactRequest::new(old_id.clone(), ContextMode::Sliding)
        };
        let outcome = runtime()
            .block_on(compact_session(Arc::clone(&h.store), &call, request))
            .unwrap();

        assert_eq!(outcome.previous_session_id, old_id);
        assert_ne!(outcome.new_session_id, old_id);
        assert_eq!(outcome.summarized_count, messages.len());
        assert_eq!(
            outcome.summary,
            "The user writes Turkish. The desk lamp is on. Open task: remind about the plants."
        );
        assert_eq!(outcome.seed, seed_messages(&outcome.summary, &old_id));

        // The summary call: the continuation prompt with the focus, no tools.
        let sent = model.last_request().unwrap();
        assert!(sent.tools.is_empty());
        assert_eq!(
            taud::message::SystemContentBlock::join(&sent.system),
            format!("{CONTINUATION_PROMPT}\n\nFocus on: the plants")
        );
        assert!(sent.messages[0].text().starts_with("Merhaba!"));

        // Everything is on disk: read it back through a fresh store.
        let store = h.reopen();
        let new_id = outcome.new_session_id.as_str();
        let stored: Vec<Message> = store
            .list_messages(new_id, DEFAULT_AGENT_ID, None, 0)
            .unwrap()
            .into_iter()
            .map(|r| r.message)
            .collect();
        assert_eq!(stored, outcome.seed);
        assert_eq!(
            stored[0].text(),
            format!(
                "Summary of the previous conversation (session {old_id}):\n{}",
                outcome.summary
            )
        );
        assert_eq!(
            stored[1].text(),
            "Understood. I will continue from this summary."
        );
        // It resumes under the recorded manager.
        read_agent_for_mode(
            store.as_ref(),
            new_id,
            DEFAULT_AGENT_ID,
            ContextMode::Sliding,
        )
        .unwrap()
        .unwrap();

        let new_meta = store.read_meta(new_id).unwrap().unwrap();
        assert_eq!(new_meta.compacted_from.as_deref(), Some(old_id.as_str()));
        assert_eq!(new_meta.compacted_to, None);
        assert_eq!(new_meta.title, old_meta().title);
        assert_eq!(new_meta.channel.as_deref(), Some("terminal"));
        assert_eq!(new_meta.profile.as_deref(), Some("home"));
        assert_eq!(new_meta.role.as_deref(), Some("brain"));
        assert_eq!(new_meta.context, Some(ContextMode::Sliding));
        assert_eq!(new_meta, outcome.meta);

        // The old session keeps every message and points at the new one.
        let old: Vec<Message> = store
            .list_messages(&old_id, DEFAULT_AGENT_ID, None, 0)
            .unwrap()
            .into_iter()
            .map(|r| r.message)
            .collect();
        assert_eq!(old, messages);
        let old_stored_meta = store.read_meta(&old_id).unwrap().unwrap();
        assert_eq!(old_stored_meta.compacted_to.as_deref(), Some(new_id));
        assert_eq!(
            SessionMeta {
                compacted_to: None,
                ..old_stored_meta
            },
            old_meta()
        );

        // `/sessions` lists both, the new one first.
        let listing = recent_sessions(store.as_ref(), 10, None).unwrap();
        let ids: Vec<&str> = listing.iter().map(|l| l.session_id.as_str()).collect();
        assert_eq!(ids, vec![new_id, old_id.as_str()]);
        assert_eq!(listing[0].message_count, 2);
    }

    pub fn the_in_memory_window_is_what_is_summarized(h: &Harness) {
        let (old_id, messages) = conversation(h, None);
        let model = FakeModel::scripted([FakeReply::text("Lamp on; plants tomorrow.")]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let window = messages[4..].to_vec();
        let request = CompactRequest {
            messages: Some(window.clone()),
            ..CompactRequest::new(old_id.clone(), ContextMode::Summarize)
        };
        let outcome = runtime()
            .block_on(compact_session(Arc::clone(&h.store), &call, request))
            .unwrap();
        assert_eq!(outcome.summarized_count, window.len());
        let sent = model.last_request().unwrap();
        let seen: String = sent.messages.iter().map(|m| m.text()).collect();
        assert!(seen.contains("bitkileri") && !seen.contains("lambasını"));
        // No title recorded: the first line of the first stored user message.
        let meta = h.store.read_meta(&outcome.new_session_id).unwrap().unwrap();
        assert_eq!(meta.title.as_deref(), Some("Merhaba! Masa lambasını aç."));
        assert_eq!(meta.context, Some(ContextMode::Summarize));
        read_agent_for_mode(
            h.store.as_ref(),
            &outcome.new_session_id,
            DEFAULT_AGENT_ID,
            ContextMode::Summarize,
        )
        .unwrap()
        .unwrap();
        // The old session had no metadata; now it has the link and nothing else.
        let old = h.store.read_meta(&old_id).unwrap().unwrap();
        assert_eq!(
            old,
            SessionMeta {
                compacted_to: Some(outcome.new_session_id.clone()),
                ..SessionMeta::default()
            }
        );
    }

    /// Runs a compaction expected to fail and checks that the store did not change.
    fn fails_without_change(
        h: &Harness,
        request: CompactRequest,
        replies: Vec<FakeReply>,
        cancel: bool,
    ) -> (CompactionError, usize) {
        let before = snapshot(h.store.as_ref());
        let files = tree(h.dir.path());
        let model = FakeModel::scripted(replies);
        let call = SummaryCall::new(&model, CancellationToken::new())
            .with_timeout(Duration::from_secs(30));
        if cancel {
            call.cancel.cancel();
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let err = rt
            .block_on(compact_session(Arc::clone(&h.store), &call, request))
            .unwrap_err();
        assert_eq!(snapshot(h.store.as_ref()), before, "{err}");
        assert_eq!(snapshot(h.reopen().as_ref()), before, "{err}");
        assert_eq!(tree(h.dir.path()), files, "{err}");
        (err, model.call_count())
    }

    pub fn failures_change_nothing(h: &Harness) {
        let (id, _) = conversation(h, Some(old_meta()));
        let request = || CompactRequest::new(id.clone(), ContextMode::Sliding);

        let (err, _) = fails_without_change(h, request(), vec![FakeReply::error("down")], false);
        assert!(matches!(err, CompactionError::Model(_)), "{err}");
        let (err, _) = fails_without_change(
            h,
            request(),
            vec![FakeReply::text("half").then_fail("connection reset")],
            false,
        );
        assert!(matches!(err, CompactionError::Model(_)), "{err}");
        let (err, _) = fails_without_change(h, request(), vec![FakeReply::text(" \n ")], false);
        assert!(matches!(err, CompactionError::EmptyReply), "{err}");
        let (err, _) = fails_without_change(
            h,
            request(),
            vec![FakeReply::text("never ends").then_hang()],
            false,
        );
        assert!(matches!(err, CompactionError::TimedOut(_)), "{err}");
        let (err, calls) = fails_without_change(h, request(), vec![FakeReply::text("x")], true);
        assert!(matches!(err, CompactionError::Cancelled), "{err}");
        assert_eq!(calls, 0);
    }

    pub fn an_empty_history_changes_nothing(h: &Harness) {
        // A session with an agent but no messages, and one without an agent record.
        let with_agent = h.session_with_agent();
        let bare = create_fresh_session(h.store.as_ref()).unwrap().session_id;
        for id in [with_agent, bare] {
            let (err, calls) = fails_without_change(
                h,
                CompactRequest::new(id.clone(), ContextMode::Sliding),
                vec![FakeReply::text("x")],
                false,
            );
            assert!(matches!(err, CompactionError::EmptyHistory), "{err}");
            assert_eq!(calls, 0);
        }
        // An empty in-memory window of a session with messages is empty too.
        let (id, _) = conversation(h, None);
        let request = CompactRequest {
            messages: Some(Vec::new()),
            ..CompactRequest::new(id, ContextMode::Sliding)
        };
        let (err, calls) = fails_without_change(h, request, vec![FakeReply::text("x")], false);
        assert!(matches!(err, CompactionError::EmptyHistory), "{err}");
        assert_eq!(calls, 0);
    }

    pub fn an_unknown_or_invalid_session_changes_nothing(h: &Harness) {
        conversation(h, None);
        for id in ["20000101-000000-0000", "../x"] {
            let (err, calls) = fails_without_change(
                h,
                CompactRequest::new(id, ContextMode::Sliding),
                vec![FakeReply::text("x")],
                false,
            );
            assert!(matches!(err, CompactionError::Store(_)), "{err}");
            assert_eq!(calls, 0);
        }
    }
}

macro_rules! compaction_suite {
    ($($case:ident),* $(,)?) => {
        mod file {
            $( #[test] fn $case() { super::cases::$case(&super::Harness::new("file")); } )*
        }
        mod sqlite {
            $( #[test] fn $case() { super::cases::$case(&super::Harness::new("sqlite")); } )*
        }
    };
}

compaction_suite!(
    compaction_round_trips,
    the_in_memory_window_is_what_is_summarized,
    failures_change_nothing,
    an_empty_history_changes_nothing,
    an_unknown_or_invalid_session_changes_nothing,
);

/// The hub runs compactions on its own tasks: the future must be `Send`.
#[test]
fn compaction_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let h = Harness::new("file");
    let model = FakeModel::scripted([]);
    let call = SummaryCall::new(&model, CancellationToken::new());
    let future = compact_session(
        Arc::clone(&h.store),
        &call,
        CompactRequest::new("x", ContextMode::Sliding),
    );
    assert_send(&future);
    let state = taud::store::ConversationManagerState::new(ContextMode::Sliding);
    let window = taud::context::model_window(ContextMode::Sliding, &[], 0, &state, 4, &call);
    assert_send(&window);
}
