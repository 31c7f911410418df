//! The hub core in-process, on both session backends, with a scripted fake model: the repair
//! notice a session keeps until a message follows (across a role switch, an idle drop and a hub
//! restart), session changes refused during a turn, and the bound on sessions in memory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use support::hub::*;
use taud::hub::{CoreError, EventKind, OpenTarget, StartTurn};
use taud::store::{DEFAULT_AGENT_ID, Durability, FileSessionStore, SessionStore};
use taud::testing::{FakeModel, FakeReply};

const FAILED_NOTICE: &str = "(The model call failed: the model request failed: boom)";

fn turn_notice(events: &[Arc<taud::hub::SessionEvent>]) -> Option<String> {
    match &events.last().unwrap().kind {
        EventKind::TurnEnded(end) => end.notice.clone(),
        other => panic!("the last event is {other:?}"),
    }
}

/// The message the model saw in front of the new prompt.
fn repair_message(model: &FakeModel) -> String {
    let messages = model.last_request().unwrap().messages;
    let n = messages.len();
    assert_eq!(messages[n - 1].text(), "second");
    messages[n - 2].text()
}

#[tokio::test]
async fn a_role_switch_takes_over_the_pending_repair_notice() {
    for backend in BACKENDS {
        let f = fixture(
            backend,
            vec![FakeReply::error("boom"), FakeReply::text("ok")],
        )
        .await;
        let id = f.new_session().await;
        let events = drain(&mut f.turn(&id, "first", "terminal").await).await;
        assert_eq!(
            turn_notice(&events).as_deref(),
            Some(&FAILED_NOTICE[1..FAILED_NOTICE.len() - 1])
        );
        f.core.switch_role(&id, "fast").await.unwrap();
        drain(&mut f.turn(&id, "second", "terminal").await).await;
        assert_eq!(repair_message(&f.model), FAILED_NOTICE, "{backend}");
    }
}

#[tokio::test]
async fn an_idle_session_comes_back_with_its_pending_repair_notice() {
    for backend in BACKENDS {
        let mut options = options();
        options.idle_after = Duration::ZERO;
        let f = fixture_with(
            backend,
            vec![FakeReply::error("boom"), FakeReply::text("ok")],
            options,
        )
        .await;
        let id = f.new_session().await;
        drain(&mut f.turn(&id, "first", "terminal").await).await;
        f.core.drop_idle().await;
        assert_eq!(f.core.open_sessions(), 0);
        drain(&mut f.turn(&id, "second", "terminal").await).await;
        assert_eq!(repair_message(&f.model), FAILED_NOTICE, "{backend}");
    }
}

async fn turn_on(core: &taud::hub::HubCore, session_id: &str, text: &str) -> taud::hub::TurnStream {
    core.start_turn(StartTurn {
        session_id: session_id.to_owned(),
        text: text.to_owned(),
        channel: "terminal".into(),
        idempotency_key: String::new(),
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_restarted_hub_keeps_the_pending_repair_notice_until_a_message_follows() {
    for backend in BACKENDS {
        let dir = crate::support::temp::dir();
        let model = Arc::new(FakeModel::scripted(vec![
            FakeReply::error("boom"),
            FakeReply::text("ok"),
            FakeReply::error("boom"),
        ]));
        let core = setup(dir.path(), backend, &model, options())
            .start()
            .await
            .unwrap();
        let id = core
            .open_session(OpenTarget::New, None, "terminal", None)
            .await
            .unwrap()
            .session
            .session_id;
        drain(&mut turn_on(&core, &id, "first").await).await;
        core.shutdown().await;

        let restarted = setup(dir.path(), backend, &model, options())
            .start()
            .await
            .unwrap();
        drain(&mut turn_on(&restarted, &id, "second").await).await;
        assert_eq!(repair_message(&model), FAILED_NOTICE, "{backend}");
        // The next failure leaves a new notice; a stale one never comes back.
        drain(&mut turn_on(&restarted, &id, "third").await).await;
        restarted.shutdown().await;
        let again = setup(dir.path(), backend, &model, options())
            .start()
            .await
            .unwrap();
        model.push_replies([FakeReply::text("fine")]);
        drain(&mut turn_on(&again, &id, "fourth").await).await;
        let messages = model.last_request().unwrap().messages;
        let n = messages.len();
        assert_eq!(messages[n - 2].text(), FAILED_NOTICE, "{backend}");
        assert_eq!(
            messages
                .iter()
                .filter(|m| m.text() == FAILED_NOTICE)
                .count(),
            2,
            "{backend}"
        );
        again.shutdown().await;
    }
}

/// A journal the file store had to set aside (here one a newer tau left) still holds message
/// ids: a restarted hub's next turn takes ids past them, so no id is given twice.
#[tokio::test]
async fn a_restarted_hub_takes_no_id_a_set_aside_journal_holds() {
    let dir = crate::support::temp::dir();
    let model = Arc::new(FakeModel::scripted(vec![
        FakeReply::text("one"),
        FakeReply::text("two"),
    ]));
    let core = setup(dir.path(), "file", &model, options())
        .start()
        .await
        .unwrap();
    let id = core
        .open_session(OpenTarget::New, None, "terminal", None)
        .await
        .unwrap()
        .session
        .session_id;
    drain(&mut turn_on(&core, &id, "first").await).await;
    core.shutdown().await;
    let journal = dir.path().join("sessions").join(&id).join("journal.jsonl");
    std::fs::write(
        &journal,
        "{\"v\":3,\"agent_id\":\"tau\",\"messages\":[{\"message_id\":2},{\"message_id\":3}]}\n",
    )
    .unwrap();

    let restarted = setup(dir.path(), "file", &model, options())
        .start()
        .await
        .unwrap();
    let events = drain(&mut turn_on(&restarted, &id, "second").await).await;
    assert_eq!(turn_notice(&events), None);
    restarted.shutdown().await;
    let store = FileSessionStore::open(dir.path().join("sessions"), Durability::NoSync).unwrap();
    let stored: Vec<(u64, String)> = store
        .list_messages(&id, DEFAULT_AGENT_ID, None, 0)
        .unwrap()
        .iter()
        .map(|m| (m.message_id, m.message.text()))
        .collect();
    assert_eq!(
        stored,
        [
            (0, "first".to_owned()),
            (1, "one".to_owned()),
            (4, "second".to_owned()),
            (5, "two".to_owned())
        ]
    );
}

/// A role switch, a compaction or an open with another role pin asked while a turn waits on a
/// person is refused at once; it used to wait for the turn, which may never end.
#[tokio::test]
async fn session_changes_during_a_turn_are_refused_at_once() {
    for backend in BACKENDS {
        let f = fixture(backend, vec![FakeReply::text("hello"), lamp()]).await;
        let id = f.new_session().await;
        let mut first = f.turn(&id, "hi", "terminal").await;
        drain(&mut first).await;
        let mut stream = f.turn(&id, "turn on the lamp", "terminal").await;
        until_approval(&mut stream).await;
        let refused = |result: Result<(), CoreError>, what: &str| match result {
            Err(CoreError::FailedPrecondition(message)) => {
                assert!(
                    message.contains("a turn is running"),
                    "{backend} {what}: {message}"
                );
            }
            other => panic!("{backend} {what}: {other:?}"),
        };
        let switched = tokio::time::timeout(DEADLINE, f.core.switch_role(&id, "fast"))
            .await
            .expect("switch_role answers during a turn");
        refused(switched.map(|_| ()), "switch_role");
        let compacted = tokio::time::timeout(DEADLINE, f.core.compact_session(&id, "", "terminal"))
            .await
            .expect("compact_session answers during a turn");
        refused(compacted.map(|_| ()), "compact_session");
        let pinned = tokio::time::timeout(
            DEADLINE,
            f.core
                .open_session(OpenTarget::Id(id.clone()), Some("fast"), "terminal", None),
        )
        .await
        .expect("open_session with a role pin answers during a turn");
        refused(pinned.map(|_| ()), "open_session with a role pin");
        f.core.shutdown().await;
    }
}

/// A role switch sent as soon as a client reads `TurnEnded` finds the agent free.
#[tokio::test]
async fn a_role_switch_right_after_a_turn_ends_is_applied() {
    for backend in BACKENDS {
        let replies = (0..20)
            .map(|i| FakeReply::text(format!("reply {i}")))
            .collect();
        let f = fixture(backend, replies).await;
        let id = f.new_session().await;
        for round in 0..10 {
            let mut stream = f.turn(&id, "hi", "terminal").await;
            drain(&mut stream).await;
            let role = if round % 2 == 0 { "fast" } else { "brain" };
            let switched = f.core.switch_role(&id, role).await;
            assert!(switched.is_ok(), "{backend} round {round}: {switched:?}");
        }
        f.core.shutdown().await;
    }
}

/// However many sessions a client opens, at most `max_open_sessions` stay in memory: opening one
/// more drops the least recently used one nobody uses, and is refused while every one is in use
/// (a turn in a new session too, whose session a retry with the same key then finds).
#[tokio::test]
async fn open_sessions_in_memory_are_bounded() {
    for backend in BACKENDS {
        let mut options = options();
        options.max_open_sessions = 3;
        let f = fixture_with(backend, vec![FakeReply::text("made")], options).await;
        let mut ids = Vec::new();
        for _ in 0..6 {
            ids.push(f.new_session().await);
            assert!(f.core.open_sessions() <= 3, "{backend}");
        }
        assert_eq!(f.core.open_sessions(), 3, "{backend}");
        // A dropped session comes back from the store.
        let again = f
            .core
            .open_session(OpenTarget::Id(ids[0].clone()), None, "terminal", None)
            .await;
        assert!(again.is_ok(), "{backend}: {again:?}");
        // Three sessions watched by a client fill memory: a fourth is refused, not dropped in.
        let mut watched = Vec::new();
        for id in &ids[3..6] {
            watched.push(f.core.subscribe(id, None, "terminal").await.unwrap());
        }
        match f
            .core
            .open_session(OpenTarget::Id(ids[1].clone()), None, "terminal", None)
            .await
        {
            Err(CoreError::ResourceExhausted(message)) => {
                assert!(message.contains("at most 3"), "{backend}: {message}");
            }
            other => panic!("{backend}: {other:?}"),
        }
        // A turn in a new session is refused too, once its session is made: the same request
        // again, with room, runs in that session instead of making another.
        let keyed = || StartTurn {
            session_id: String::new(),
            text: "hello".into(),
            channel: "keyed".into(),
            idempotency_key: "k1".into(),
        };
        let refused = f.core.start_turn_in_new_session(keyed()).await;
        assert!(
            matches!(refused, Err(CoreError::ResourceExhausted(_))),
            "{backend}"
        );
        // The sessions made so far (the `file` store's directories; a listing shows only sessions
        // with messages).
        let made = || {
            std::fs::read_dir(f.dir.join("sessions"))
                .map(|dir| dir.flatten().filter(|e| e.path().is_dir()).count())
                .unwrap_or(0)
        };
        let before = made();
        if backend == "file" {
            assert_eq!(before, 7, "six sessions and the refused turn's");
        }
        drop(watched);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let events = drain(&mut f.core.start_turn_in_new_session(keyed()).await.unwrap()).await;
        assert_eq!(ended_text(&events), "made", "{backend}");
        assert_eq!(made(), before, "{backend}: no second session");
        let listed = f.core.list_sessions(0, "terminal", None).await.unwrap();
        let keyed_sessions: Vec<_> = listed.iter().filter(|s| s.channel == "keyed").collect();
        assert_eq!(keyed_sessions.len(), 1, "{backend}");
        assert_eq!(
            keyed_sessions[0].session_id, events[0].session_id,
            "{backend}"
        );
        let reopened = f
            .core
            .open_session(OpenTarget::Id(ids[1].clone()), None, "terminal", None)
            .await;
        assert!(reopened.is_ok(), "{backend}: {reopened:?}");
        assert_eq!(f.core.open_sessions(), 3, "{backend}");
        f.core.shutdown().await;
    }
}
