//! The `SessionStore` contract, run against every built-in backend: each case in `cases` is a
//! generic function over an opened store, instantiated once per backend by `contract_suite!`.
//! (The crash test is a binary of its own, `store_crash.rs`, since it re-executes itself.)

// Test and benchmark code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use support::store::{Harness, assistant_message, tree, user_message};
use taud::message::Message;
use taud::store::{
    ContextMode, DEFAULT_AGENT_ID, IdKind, Session, SessionAgent, SessionError, SessionMeta,
    create_fresh_session, most_recent_session, now_utc, read_agent_for_mode, recent_sessions,
    session_by_index,
};
use taud::testing::StoreEventSink;

#[path = "contract_cases/events.rs"]
mod event_cases;
#[path = "contract_cases/image_records.rs"]
mod image_cases;
#[path = "contract_cases/paged_reads.rs"]
mod paged_cases;

mod cases {
    use super::*;

    pub use super::event_cases::*;
    pub use super::floor_cases::*;
    pub use super::image_cases::*;
    pub use super::paged_cases::*;

    pub fn sessions_are_created_once_and_read_back(h: &Harness) {
        let store = h.store.as_ref();
        let session = create_fresh_session(store).unwrap();
        assert_eq!(
            store.read_session(&session.session_id).unwrap(),
            Some(session.clone())
        );
        assert_eq!(store.read_session("20000101-000000-0000").unwrap(), None);
        let err = store.create_session(&session).unwrap_err();
        assert!(
            matches!(err, SessionError::SessionExists(ref id) if *id == session.session_id),
            "{err}"
        );
        assert_eq!(
            store.read_session(&session.session_id).unwrap(),
            Some(session)
        );
    }

    pub fn invalid_ids_are_refused_before_any_io(h: &Harness) {
        let store = h.store.as_ref();
        let good = h.session_with_agent();
        let before = tree(h.dir.path());
        let agent = SessionAgent::new("tau", ContextMode::Sliding, now_utc());
        let long = "x".repeat(300);
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            "a\nb",
            "a\0b",
            long.as_str(),
        ] {
            let is_invalid = |result: Result<(), SessionError>| {
                matches!(result, Err(SessionError::InvalidId { .. }))
            };
            assert!(
                is_invalid(store.create_session(&Session::new(bad, now_utc()))),
                "{bad:?}"
            );
            assert!(is_invalid(store.read_session(bad).map(drop)));
            assert!(is_invalid(store.create_agent(bad, &agent)));
            assert!(is_invalid(store.read_agent(bad, "tau").map(drop)));
            assert!(is_invalid(store.read_agent(&good, bad).map(drop)));
            assert!(is_invalid(store.update_agent(bad, &agent)));
            assert!(is_invalid(store.create_message(
                bad,
                "tau",
                &user_message(0, "x")
            )));
            assert!(is_invalid(store.create_message(
                &good,
                bad,
                &user_message(0, "x")
            )));
            assert!(is_invalid(store.read_message(bad, "tau", 0).map(drop)));
            assert!(is_invalid(store.update_message(
                bad,
                "tau",
                &user_message(0, "x")
            )));
            assert!(is_invalid(
                store.list_messages(bad, "tau", None, 0).map(drop)
            ));
            assert!(is_invalid(
                store.list_messages(&good, bad, None, 0).map(drop)
            ));
            assert!(is_invalid(store.message_id_floor(bad, "tau").map(drop)));
            assert!(is_invalid(store.message_id_floor(&good, bad).map(drop)));
            assert!(is_invalid(store.append_event(bad, &json!({"type": "x"}))));
            assert!(is_invalid(store.read_events(bad).map(drop)));
            assert!(is_invalid(store.write_meta(bad, &SessionMeta::default())));
            assert!(is_invalid(store.read_meta(bad).map(drop)));
            let mut bad_agent = agent.clone();
            bad_agent.agent_id = bad.to_owned();
            assert!(is_invalid(store.create_agent(&good, &bad_agent)));
        }
        assert_eq!(tree(h.dir.path()), before, "an invalid id touched the disk");
        let err = store.read_session("a/b").unwrap_err();
        assert!(
            matches!(
                err,
                SessionError::InvalidId {
                    kind: IdKind::Session,
                    ..
                }
            ),
            "{err}"
        );
    }

    pub fn agents_are_created_read_and_updated(h: &Harness) {
        let store = h.store.as_ref();
        let agent = SessionAgent::new(DEFAULT_AGENT_ID, ContextMode::Sliding, now_utc());
        let err = store
            .create_agent("20000101-000000-0000", &agent)
            .unwrap_err();
        assert!(matches!(err, SessionError::SessionNotFound(_)), "{err}");
        let id = create_fresh_session(store).unwrap().session_id;
        assert_eq!(store.read_agent(&id, "tau").unwrap(), None);
        let err = store.update_agent(&id, &agent).unwrap_err();
        assert!(matches!(err, SessionError::AgentNotFound { .. }), "{err}");
        store.create_agent(&id, &agent).unwrap();
        assert_eq!(store.read_agent(&id, "tau").unwrap(), Some(agent.clone()));
        let err = store.create_agent(&id, &agent).unwrap_err();
        assert!(matches!(err, SessionError::AgentExists { .. }), "{err}");

        let mut changed = agent.clone();
        changed.state = json!({"mood": "fine"});
        changed.conversation_manager_state.removed_message_count = 4;
        changed.created_at = now_utc() + jiff::SignedDuration::from_hours(1);
        store.update_agent(&id, &changed).unwrap();
        let read = store.read_agent(&id, "tau").unwrap().unwrap();
        assert_eq!(read.state, json!({"mood": "fine"}));
        assert_eq!(read.conversation_manager_state.removed_message_count, 4);
        assert_eq!(read.created_at, agent.created_at, "created_at must be kept");
        assert!(read.updated_at >= agent.updated_at);
    }

    pub fn a_summary_message_is_stored_in_the_agent_record(h: &Harness) {
        let store = h.store.as_ref();
        let id = create_fresh_session(store).unwrap().session_id;
        let mut agent = SessionAgent::new("tau", ContextMode::Summarize, now_utc());
        store.create_agent(&id, &agent).unwrap();
        agent.conversation_manager_state.summary_message =
            Some(Message::user_text("Summary of the previous conversation"));
        agent.conversation_manager_state.removed_message_count = 10;
        store.update_agent(&id, &agent).unwrap();
        let read = h.reopen().read_agent(&id, "tau").unwrap().unwrap();
        assert_eq!(
            read.conversation_manager_state,
            agent.conversation_manager_state
        );
    }

    pub fn messages_are_listed_in_numeric_order_with_paging(h: &Harness) {
        let store = h.store.as_ref();
        let id = h.session_with_agent();
        for n in [2u64, 0, 10, 1, 1_000_000, 3] {
            store
                .create_message(&id, "tau", &user_message(n, &format!("m{n}")))
                .unwrap();
        }
        let ids = |messages: Vec<taud::store::SessionMessage>| -> Vec<u64> {
            messages.iter().map(|m| m.message_id).collect()
        };
        assert_eq!(
            ids(store.list_messages(&id, "tau", None, 0).unwrap()),
            [0, 1, 2, 3, 10, 1_000_000]
        );
        assert_eq!(
            ids(store.list_messages(&id, "tau", Some(2), 1).unwrap()),
            [1, 2]
        );
        assert_eq!(
            ids(store.list_messages(&id, "tau", None, 4).unwrap()),
            [10, 1_000_000]
        );
        assert_eq!(
            ids(store.list_messages(&id, "tau", Some(0), 0).unwrap()),
            Vec::<u64>::new()
        );
        assert_eq!(
            ids(store.list_messages(&id, "tau", Some(5), 9).unwrap()),
            Vec::<u64>::new()
        );
        let listed = store.list_messages(&id, "tau", None, 0).unwrap();
        assert_eq!(listed[4].message.text(), "m10");
        assert_eq!(
            store.read_message(&id, "tau", 10).unwrap(),
            Some(listed[4].clone())
        );
        assert_eq!(store.read_message(&id, "tau", 7).unwrap(), None);
        assert_eq!(store.read_message(&id, "other", 0).unwrap(), None);
        assert_eq!(
            store
                .read_message("20000101-000000-0000", "tau", 0)
                .unwrap(),
            None
        );
    }

    pub fn messages_are_never_overwritten(h: &Harness) {
        let store = h.store.as_ref();
        let id = h.session_with_agent();
        store
            .create_message(&id, "tau", &user_message(0, "original"))
            .unwrap();
        let err = store
            .create_message(&id, "tau", &user_message(0, "replacement"))
            .unwrap_err();
        assert!(
            matches!(err, SessionError::MessageExists { message_id: 0, .. }),
            "{err}"
        );
        let read = store.read_message(&id, "tau", 0).unwrap().unwrap();
        assert_eq!(read.message.text(), "original");
    }

    pub fn messages_need_their_session_and_agent(h: &Harness) {
        let store = h.store.as_ref();
        let err = store
            .create_message("20000101-000000-0000", "tau", &user_message(0, "x"))
            .unwrap_err();
        assert!(matches!(err, SessionError::SessionNotFound(_)), "{err}");
        let id = create_fresh_session(store).unwrap().session_id;
        let err = store
            .create_message(&id, "tau", &user_message(0, "x"))
            .unwrap_err();
        assert!(matches!(err, SessionError::AgentNotFound { .. }), "{err}");
        let err = store.list_messages(&id, "tau", None, 0).unwrap_err();
        assert!(matches!(err, SessionError::AgentNotFound { .. }), "{err}");
        let err = store
            .list_messages("20000101-000000-0000", "tau", None, 0)
            .unwrap_err();
        assert!(matches!(err, SessionError::SessionNotFound(_)), "{err}");
    }

    pub fn update_message_only_records_a_redaction(h: &Harness) {
        let store = h.store.as_ref();
        let id = h.session_with_agent();
        let original = user_message(0, "my password is hunter2");
        store.create_message(&id, "tau", &original).unwrap();
        store
            .create_message(&id, "tau", &assistant_message(1, "ok"))
            .unwrap();

        let err = store
            .update_message(&id, "tau", &user_message(0, "rewritten"))
            .unwrap_err();
        assert!(matches!(err, SessionError::NotARedaction { .. }), "{err}");

        let mut redacted = user_message(0, "an attempt to replace the original");
        redacted.redact_message = Some(Message::user_text("[redacted]"));
        store.update_message(&id, "tau", &redacted).unwrap();
        let read = store.read_message(&id, "tau", 0).unwrap().unwrap();
        assert_eq!(
            read.message, original.message,
            "the original stays on record"
        );
        assert_eq!(read.to_message().text(), "[redacted]");
        assert_eq!(read.created_at, original.created_at);
        let listed = store.list_messages(&id, "tau", None, 0).unwrap();
        assert_eq!(listed[0].to_message().text(), "[redacted]");

        let mut missing = user_message(5, "x");
        missing.redact_message = Some(Message::user_text("y"));
        let err = store.update_message(&id, "tau", &missing).unwrap_err();
        assert!(
            matches!(err, SessionError::MessageNotFound { message_id: 5, .. }),
            "{err}"
        );
    }

    pub fn appends_move_updated_at_and_order_the_listing(h: &Harness) {
        let store = h.store.as_ref();
        let first = h.session_with_agent();
        let second = h.session_with_agent();
        let third = create_fresh_session(store).unwrap().session_id;
        let created = store.read_session(&first).unwrap().unwrap();
        store
            .create_message(&first, "tau", &user_message(0, "hello"))
            .unwrap();
        store
            .create_message(&first, "tau", &assistant_message(1, "hi"))
            .unwrap();
        let updated = store.read_session(&first).unwrap().unwrap();
        assert!(updated.updated_at > created.updated_at);
        assert_eq!(updated.created_at, created.created_at);

        let listed = store.list_sessions().unwrap();
        let order: Vec<&str> = listed.iter().map(|s| s.session_id.as_str()).collect();
        assert_eq!(
            order[0], first,
            "the session with the latest message comes first"
        );
        assert_eq!(listed.len(), 3);
        assert!(order.contains(&second.as_str()) && order.contains(&third.as_str()));
        assert!(
            listed
                .windows(2)
                .all(|w| w[0].updated_at >= w[1].updated_at)
        );
        assert_eq!(listed[0].message_count, 2);
        assert_eq!(listed[0].updated_at, updated.updated_at);
        assert!(listed[1..].iter().all(|s| s.message_count == 0));

        store
            .create_message(&second, "tau", &user_message(0, "later"))
            .unwrap();
        assert_eq!(store.list_sessions().unwrap()[0].session_id, second);
    }

    pub fn metadata_is_replaced_and_read_back(h: &Harness) {
        let store = h.store.as_ref();
        let id = create_fresh_session(store).unwrap().session_id;
        assert_eq!(store.read_meta(&id).unwrap(), None);
        let mut meta = SessionMeta {
            channel: Some("terminal".into()),
            profile: Some("home".into()),
            role: Some("brain".into()),
            context: Some(ContextMode::Sliding),
            ..SessionMeta::default()
        };
        meta.set_title_if_missing(&format!("{}!", "ş".repeat(70)));
        store.write_meta(&id, &meta).unwrap();
        assert_eq!(store.read_meta(&id).unwrap(), Some(meta.clone()));
        meta.compacted_to = Some("20260929-153012-3f9a".into());
        meta.role = Some("fast".into());
        store.write_meta(&id, &meta).unwrap();
        let read = h.reopen().read_meta(&id).unwrap().unwrap();
        assert_eq!(read, meta);
        assert_eq!(read.title.unwrap().chars().count(), 60);
        let err = store.write_meta("20000101-000000-0000", &meta).unwrap_err();
        assert!(matches!(err, SessionError::SessionNotFound(_)), "{err}");
        let err = store.read_meta("20000101-000000-0000").unwrap_err();
        assert!(matches!(err, SessionError::SessionNotFound(_)), "{err}");
    }

    pub fn everything_survives_a_reopen(h: &Harness) {
        let id = h.session_with_agent();
        let store = h.store.as_ref();
        let messages: Vec<_> = (0..5)
            .map(|n| user_message(n, &format!("text {n}")))
            .collect();
        for message in &messages {
            store.create_message(&id, "tau", message).unwrap();
        }
        store.append_event(&id, &json!({"type": "turn"})).unwrap();
        store
            .write_meta(
                &id,
                &SessionMeta {
                    channel: Some("x".into()),
                    ..SessionMeta::default()
                },
            )
            .unwrap();
        let session = store.read_session(&id).unwrap();
        let agent = store.read_agent(&id, "tau").unwrap();

        let reopened = h.reopen();
        assert_eq!(reopened.read_session(&id).unwrap(), session);
        assert_eq!(reopened.read_agent(&id, "tau").unwrap(), agent);
        assert_eq!(
            reopened.list_messages(&id, "tau", None, 0).unwrap(),
            messages
        );
        assert_eq!(reopened.read_events(&id).unwrap().len(), 1);
        assert_eq!(
            reopened.read_meta(&id).unwrap().unwrap().channel.as_deref(),
            Some("x")
        );
        assert_eq!(reopened.list_sessions().unwrap()[0].message_count, 5);
    }

    pub fn a_session_opens_only_under_its_recorded_context(h: &Harness) {
        let store = h.store.as_ref();
        let id = h.session_with_agent();
        assert!(
            read_agent_for_mode(store, &id, "tau", ContextMode::Sliding)
                .unwrap()
                .is_some()
        );
        let err = read_agent_for_mode(store, &id, "tau", ContextMode::Summarize).unwrap_err();
        assert!(matches!(err, SessionError::ContextMismatch(_)), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "Session {id} was recorded with a different [agent] context setting; set it back to sliding or start a new session"
            )
        );
        let fresh = create_fresh_session(store).unwrap().session_id;
        assert!(
            read_agent_for_mode(store, &fresh, "tau", ContextMode::Summarize)
                .unwrap()
                .is_none()
        );
    }

    pub fn resume_lists_recent_sessions_with_messages(h: &Harness) {
        let store = h.store.as_ref();
        let empty = create_fresh_session(store).unwrap().session_id;
        let mut with_messages = Vec::new();
        for n in 0..12u64 {
            let id = h.session_with_agent();
            for m in 0..=n % 3 {
                store
                    .create_message(&id, "tau", &user_message(m, "q"))
                    .unwrap();
            }
            let mut meta = SessionMeta {
                channel: Some("terminal".into()),
                ..SessionMeta::default()
            };
            meta.set_title_if_missing(&format!("question {n}"));
            store.write_meta(&id, &meta).unwrap();
            with_messages.push((id, n % 3 + 1));
        }
        let current = with_messages[11].0.clone();
        let listing = recent_sessions(store, 10, Some(&current)).unwrap();
        assert_eq!(listing.len(), 10);
        assert!(
            listing
                .iter()
                .all(|l| l.session_id != empty && l.session_id != current)
        );
        let expected: Vec<&str> = with_messages[1..11]
            .iter()
            .rev()
            .map(|(id, _)| id.as_str())
            .collect();
        let got: Vec<&str> = listing.iter().map(|l| l.session_id.as_str()).collect();
        assert_eq!(got, expected);
        assert_eq!(listing[0].index, 1);
        assert_eq!(listing[0].title.as_deref(), Some("question 10"));
        assert_eq!(listing[0].channel.as_deref(), Some("terminal"));
        assert_eq!(listing[0].message_count, with_messages[10].1);
        assert_eq!(
            session_by_index(&listing, 2).unwrap().session_id,
            with_messages[9].0
        );
        assert!(session_by_index(&listing, 0).is_none());
        assert!(session_by_index(&listing, 11).is_none());

        let recent = most_recent_session(store, Some(&current)).unwrap().unwrap();
        assert_eq!(recent.session_id, with_messages[10].0);
        let recent = most_recent_session(store, None).unwrap().unwrap();
        assert_eq!(recent.session_id, current);
    }

    pub fn stores_are_shared_between_threads(h: &Harness) {
        let ids: Vec<String> = (0..4).map(|_| h.session_with_agent()).collect();
        std::thread::scope(|scope| {
            for id in &ids {
                let store = h.store.clone();
                scope.spawn(move || {
                    for n in 0..5 {
                        store
                            .create_message(id, "tau", &user_message(n, "x"))
                            .unwrap();
                        store.append_event(id, &json!({"n": n})).unwrap();
                    }
                });
            }
        });
        for id in &ids {
            assert_eq!(h.store.list_messages(id, "tau", None, 0).unwrap().len(), 5);
            assert_eq!(h.store.read_events(id).unwrap().len(), 5);
        }
        assert!(
            h.store
                .list_sessions()
                .unwrap()
                .iter()
                .all(|s| s.message_count == 5)
        );
    }
}

mod floor_cases {
    use super::*;

    /// A store that set nothing aside gives no floor: the next id is the one after the last
    /// message listed, for a session with messages, an empty agent or none at all.
    pub fn an_intact_store_keeps_no_message_id_floor(h: &Harness) {
        let store = h.store.as_ref();
        let id = h.session_with_agent();
        assert_eq!(store.message_id_floor(&id, DEFAULT_AGENT_ID).unwrap(), 0);
        store
            .create_message(&id, DEFAULT_AGENT_ID, &user_message(0, "one"))
            .unwrap();
        store
            .create_message(&id, DEFAULT_AGENT_ID, &assistant_message(1, "two"))
            .unwrap();
        assert_eq!(store.message_id_floor(&id, DEFAULT_AGENT_ID).unwrap(), 0);
        assert_eq!(store.message_id_floor(&id, "helper").unwrap(), 0);
        assert_eq!(
            store
                .message_id_floor("20000101-000000-0000", DEFAULT_AGENT_ID)
                .unwrap(),
            0
        );
        store.close_session(&id).unwrap();
        assert_eq!(
            h.reopen().message_id_floor(&id, DEFAULT_AGENT_ID).unwrap(),
            0
        );
    }
}

macro_rules! contract_suite {
    ($($case:ident),* $(,)?) => {
        mod file {
            $( #[test] fn $case() { super::cases::$case(&super::Harness::new("file")); } )*
        }
        mod sqlite {
            $( #[test] fn $case() { super::cases::$case(&super::Harness::new("sqlite")); } )*
        }
    };
}

contract_suite!(
    sessions_are_created_once_and_read_back,
    invalid_ids_are_refused_before_any_io,
    agents_are_created_read_and_updated,
    a_summary_message_is_stored_in_the_agent_record,
    messages_are_listed_in_numeric_order_with_paging,
    messages_are_never_overwritten,
    messages_need_their_session_and_agent,
    update_message_only_records_a_redaction,
    appends_move_updated_at_and_order_the_listing,
    events_are_appended_in_order_with_a_version,
    a_batch_stores_events_then_messages,
    the_event_sink_writes_into_its_session,
    the_gate_records_its_events_through_the_sink,
    a_complete_session_is_created_whole,
    a_failed_complete_session_is_never_visible,
    metadata_is_replaced_and_read_back,
    everything_survives_a_reopen,
    a_session_opens_only_under_its_recorded_context,
    resume_lists_recent_sessions_with_messages,
    stores_are_shared_between_threads,
    image_records_read_back_unchanged,
    pages_are_read_from_the_newest_end_with_a_cursor,
    a_page_needs_its_session_and_agent,
    session_info_counts_without_reading_messages,
    flushes_beside_appends_keep_every_count,
    an_intact_store_keeps_no_message_id_floor,
);
