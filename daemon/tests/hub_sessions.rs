//! The hub core in-process, on both session backends, with a scripted fake model: sessions
//! (resume, roles, compaction, titles), restart expiry, idle drop, shutdown and bad requests. The repair
//! notice and the bound on open sessions are in `hub_sessions_repair.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use support::hub::*;
use taud::hub::{
    ApprovalAnswer, ApprovalOutcome, CoreError, DecideOutcome, EventKind, OpenTarget,
    SharedModelFactory, StartTurn,
};
use taud::testing::{FakeModel, FakeReply};

#[tokio::test]
async fn bad_requests_are_refused_clearly() {
    let f = fixture("file", vec![]).await;
    let unknown = f.core.start_turn(StartTurn {
        session_id: "20990101-000000-dead".into(),
        text: "hi".into(),
        channel: String::new(),
        idempotency_key: String::new(),
    });
    assert!(matches!(unknown.await, Err(CoreError::NotFound(_))));
    let id = f.new_session().await;
    for (session, text, channel) in [
        ("../etc", "hi", "terminal"),
        ("", "hi", "terminal"),
        (id.as_str(), "   ", "terminal"),
        (id.as_str(), "hi", "bad channel!"),
    ] {
        let result = f
            .core
            .start_turn(StartTurn {
                session_id: session.into(),
                text: text.into(),
                channel: channel.into(),
                idempotency_key: String::new(),
            })
            .await;
        assert!(
            matches!(result, Err(CoreError::InvalidArgument(_))),
            "{session:?} {text:?} {channel:?}"
        );
    }
    assert!(matches!(
        f.core.subscribe("20990101-000000-dead", None, "x").await,
        Err(CoreError::NotFound(_))
    ));
    assert!(matches!(
        f.core.get_session("nope", false).await,
        Err(CoreError::NotFound(_))
    ));
    assert!(matches!(
        f.core
            .open_session(OpenTarget::New, Some("nonexistent"), "x", None)
            .await,
        Err(CoreError::NotFound(_))
    ));
    assert!(matches!(
        f.core
            .open_session(OpenTarget::Index(3), None, "x", None)
            .await,
        Err(CoreError::NotFound(_))
    ));
    assert!(
        matches!(
            f.core.compact_session(&id, "", "x").await,
            Err(CoreError::FailedPrecondition(_))
        ),
        "nothing to summarize"
    );
}

#[tokio::test]
async fn compaction_continues_in_a_new_session_and_keeps_the_old_one() {
    for backend in BACKENDS {
        let f = fixture(
            backend,
            vec![
                FakeReply::text("Hello."),
                FakeReply::error("the provider is down"),
                FakeReply::text("The user greeted tau."),
                FakeReply::text("Go on."),
            ],
        )
        .await;
        let id = f.new_session().await;
        drain(&mut f.turn(&id, "hi", "terminal").await).await;
        // A failed summary changes nothing.
        assert!(matches!(
            f.core.compact_session(&id, "", "terminal").await,
            Err(CoreError::Unavailable(_))
        ));
        assert_eq!(
            f.core
                .list_sessions(0, "terminal", None)
                .await
                .unwrap()
                .len(),
            1
        );
        let compacted = f
            .core
            .compact_session(&id, "greetings", "terminal")
            .await
            .unwrap();
        assert_eq!(compacted.previous_session_id, id);
        assert_eq!(compacted.summarized_messages, 2);
        assert_eq!(compacted.summary, "The user greeted tau.");
        assert_eq!(compacted.session.compacted_from, id, "{backend}");
        assert_eq!(compacted.session.message_count, 2);
        let old = f.core.get_session(&id, false).await.unwrap().summary;
        assert_eq!(old.compacted_to, compacted.session.session_id);
        assert_eq!(old.message_count, 2);
        // The new session goes on from the summary.
        let new = compacted.session.session_id;
        drain(&mut f.turn(&new, "and now?", "terminal").await).await;
        let sent = f.model.last_request().unwrap();
        assert_eq!(sent.messages.len(), 3);
        assert!(sent.messages[0].text().contains("The user greeted tau."));
    }
}

#[tokio::test]
async fn sessions_resume_by_index_and_most_recent_on_their_role() {
    let f = fixture(
        "sqlite",
        vec![
            FakeReply::text("a"),
            FakeReply::text("b"),
            FakeReply::text("c"),
        ],
    )
    .await;
    let first = f.new_session().await;
    drain(&mut f.turn(&first, "first", "terminal").await).await;
    let second = f
        .core
        .open_session(OpenTarget::New, Some("fast"), "terminal", None)
        .await
        .unwrap();
    assert_eq!(second.role, "fast");
    let second = second.session.session_id;
    drain(&mut f.turn(&second, "second", "terminal").await).await;
    let listing = f.core.list_sessions(0, "terminal", None).await.unwrap();
    assert_eq!(
        listing
            .iter()
            .map(|s| s.session_id.as_str())
            .collect::<Vec<_>>(),
        vec![second.as_str(), first.as_str()]
    );
    let by_index = f
        .core
        .open_session(OpenTarget::Index(2), None, "terminal", None)
        .await
        .unwrap();
    assert_eq!(
        (by_index.session.session_id.as_str(), by_index.resumed),
        (first.as_str(), true)
    );
    let recent = f
        .core
        .open_session(OpenTarget::MostRecent, None, "terminal", Some(&second))
        .await
        .unwrap();
    assert_eq!(recent.session.session_id, first);
    let resumed = f
        .core
        .open_session(OpenTarget::Id(second.clone()), None, "x", None)
        .await
        .unwrap();
    assert_eq!(resumed.role, "fast", "the stored role");
    let switched = f.core.switch_role(&second, "brain").await.unwrap();
    assert_eq!(
        (switched.previous_role.as_str(), switched.role.as_str()),
        ("fast", "brain")
    );
    assert_eq!(
        f.core
            .get_session(&second, false)
            .await
            .unwrap()
            .summary
            .role,
        "brain"
    );
    // The switched agent continues the stored history.
    drain(&mut f.turn(&second, "third", "terminal").await).await;
    let last = f.model.last_request().unwrap();
    assert_eq!(last.messages.len(), 3);
}

#[tokio::test]
async fn approvals_left_pending_by_a_dead_hub_expire_on_start() {
    for backend in BACKENDS {
        let dir = crate::support::temp::dir();
        let model = Arc::new(FakeModel::scripted(vec![
            lamp(),
            FakeReply::text("I will not."),
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
        let mut stream = core
            .start_turn(StartTurn {
                session_id: id.clone(),
                text: "turn on the lamp".into(),
                channel: "terminal".into(),
                idempotency_key: String::new(),
            })
            .await
            .unwrap();
        let approval = until_approval(&mut stream).await;
        // The hub dies here: nothing resolves the approval in the store.
        std::mem::forget(stream);
        std::mem::forget(core);

        let restarted = setup(dir.path(), backend, &model, options())
            .start()
            .await
            .unwrap();
        let events = restarted.read_events(&id).await.unwrap();
        let last = events.last().unwrap();
        assert_eq!(last["type"], "approval", "{backend}");
        assert_eq!(last["status"], "expired_by_restart");
        assert_eq!(last["approval_id"], approval.as_str());
        let watcher = restarted.subscribe(&id, None, "terminal").await.unwrap();
        assert_eq!(
            restarted
                .decide(
                    &approval,
                    ApprovalAnswer::Approve,
                    &watcher.snapshot().attachment_id
                )
                .await
                .unwrap(),
            DecideOutcome::Expired(ApprovalOutcome::ExpiredByRestart)
        );
        assert!(watcher.snapshot().pending.is_empty());
        // Its tool never runs: the next turn repairs the dangling call.
        model.push_replies([FakeReply::text("Sorry.")]);
        let mut next = restarted
            .start_turn(StartTurn {
                session_id: id.clone(),
                text: "well?".into(),
                channel: "terminal".into(),
                idempotency_key: String::new(),
            })
            .await
            .unwrap();
        let events = drain(&mut next).await;
        assert!(
            !events
                .iter()
                .any(|e| matches!(e.kind, EventKind::ToolCall(_)))
        );
        let sent = model.last_request().unwrap();
        let interrupted = sent
            .messages
            .iter()
            .flat_map(|m| m.tool_results())
            .any(|r| format!("{r:?}").contains("Tool was interrupted."));
        assert!(interrupted, "{backend}");
        assert_eq!(
            restarted
                .read_events(&id)
                .await
                .unwrap()
                .iter()
                .filter(|e| e["status"] == "expired_by_restart")
                .count(),
            1
        );
    }
}

#[tokio::test]
async fn idle_sessions_leave_memory_and_come_back_with_their_history() {
    let mut options = options();
    options.idle_after = Duration::ZERO;
    let f = fixture_with(
        "file",
        vec![FakeReply::text("one"), FakeReply::text("two")],
        options,
    )
    .await;
    let id = f.new_session().await;
    drain(&mut f.turn(&id, "first", "terminal").await).await;
    assert_eq!(f.core.open_sessions(), 1);
    f.core.drop_idle().await;
    assert_eq!(f.core.open_sessions(), 0);
    let events = drain(&mut f.turn(&id, "second", "terminal").await).await;
    assert_eq!(ended_text(&events), "two");
    assert_eq!(f.model.last_request().unwrap().messages.len(), 3);
    // The seq goes on across the reopening.
    assert!(events[0].seq > 4);
    assert_eq!(f.core.sessions_tracked(), 1, "one agent, nothing else");
    f.core.drop_idle().await;
    assert_eq!(
        (f.core.open_sessions(), f.core.sessions_tracked()),
        (0, 1),
        "the agent and its bus left memory, the last seq is remembered"
    );
    let _ = &f.dir;
}

#[tokio::test]
async fn an_idle_session_keeps_only_its_last_turn_and_then_little_to_replay() {
    let mut options = options();
    // The reaper stays away: the test trims by hand.
    options.idle_after = Duration::from_secs(3600);
    // 24 KiB of a turn's events: half its deltas, half its end's text.
    let chunk = "x".repeat(1024);
    let long = FakeReply::deltas(vec![chunk.clone(); 12]);
    let f = fixture_with("file", vec![long.clone(), long], options).await;
    let id = f.new_session().await;
    let _watching = f.core.subscribe(&id, None, "terminal").await.unwrap();
    let first = drain(&mut f.turn(&id, "one", "terminal").await).await;
    let second = drain(&mut f.turn(&id, "two", "terminal").await).await;
    let resume = |after: u64| f.core.subscribe(&id, Some(after), "terminal");
    assert!(
        resume(first[0].seq - 1).await.is_err(),
        "the earlier turn's events went when the last one ended"
    );
    assert!(
        resume(second[0].seq - 1).await.is_ok(),
        "the last turn stays whole"
    );
    f.core.trim_idle(Duration::from_secs(3600)).await;
    assert!(
        resume(second[0].seq - 1).await.is_ok(),
        "not idle long enough to be trimmed"
    );
    f.core.trim_idle(Duration::ZERO).await;
    assert!(
        resume(second[0].seq - 1).await.is_err(),
        "idle: no more than IDLE_REPLAY_BYTES of it stays"
    );
    let last = second.last().unwrap().seq;
    assert!(resume(last - 1).await.is_ok(), "the newest events stay");
    assert_eq!(ended_text(&second), chunk.repeat(12));
}

#[tokio::test]
async fn unknown_sessions_leave_nothing_in_memory() {
    let f = fixture("file", vec![]).await;
    for i in 0..200 {
        let id = format!("20990101-000000-{i:04x}");
        let turn = f
            .core
            .start_turn(StartTurn {
                session_id: id.clone(),
                text: "hi".into(),
                channel: String::new(),
                idempotency_key: String::new(),
            })
            .await;
        assert!(matches!(turn, Err(CoreError::NotFound(_))), "{id}");
        let subscribed = f.core.subscribe(&id, Some(0), "x").await;
        assert!(matches!(subscribed, Err(CoreError::NotFound(_))), "{id}");
    }
    assert_eq!(f.core.sessions_tracked(), 0);
    assert_eq!(f.core.open_sessions(), 0);
}

#[tokio::test]
async fn shutdown_cancels_turns_and_ends_subscriptions() {
    let f = fixture("file", vec![lamp(), FakeReply::text("stopped")]).await;
    let id = f.new_session().await;
    let mut watcher = f.core.subscribe(&id, None, "observer").await.unwrap();
    let mut stream = f.turn(&id, "turn on the lamp", "terminal").await;
    until_approval(&mut stream).await;
    let mut queued = f.turn(&id, "later", "terminal").await;
    f.core.shutdown().await;
    let rest = drain(&mut stream).await;
    assert!(matches!(rest.last().unwrap().kind, EventKind::TurnEnded(_)));
    let never_ran = drain(&mut queued).await;
    assert_eq!(names(&never_ran), vec!["turn_queued", "turn_ended"]);
    assert_eq!(
        f.model.call_count(),
        1,
        "the queued turn never reached the model"
    );
    loop {
        match tokio::time::timeout(DEADLINE, watcher.next())
            .await
            .unwrap()
        {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(lagged) => panic!("{lagged}"),
        }
    }
    assert!(matches!(
        f.core.open_session(OpenTarget::New, None, "x", None).await,
        Err(CoreError::Unavailable(_))
    ));
    assert_eq!(f.core.open_sessions(), 0, "every session left memory");
    let refused = f
        .core
        .start_turn(StartTurn {
            session_id: id.clone(),
            text: "after the stop".to_owned(),
            channel: String::new(),
            idempotency_key: String::new(),
        })
        .await;
    assert!(matches!(refused, Err(CoreError::Unavailable(_))));
}

#[tokio::test]
async fn get_session_tells_the_in_memory_count_and_whether_the_fallback_answers() {
    use taud::model::ModelError;
    use taud::provider::FallbackModel;
    use taud::provider::fallback::DEFAULT_COOLDOWN;

    let dir = crate::support::temp::dir();
    let primary = Arc::new(FakeModel::scripted(vec![
        FakeReply::text("from primary"),
        FakeReply::fail(ModelError::Unavailable("503 from the primary".into())),
    ]));
    let fallback = Arc::new(FakeModel::scripted(vec![FakeReply::text("from fallback")]));
    let model: Arc<dyn taud::model::Model> = Arc::new(FallbackModel::new(
        primary,
        fallback.clone(),
        DEFAULT_COOLDOWN,
    ));
    let mut setup = setup(
        dir.path(),
        "file",
        &Arc::new(FakeModel::scripted(vec![])),
        options(),
    );
    setup.factory = Arc::new(SharedModelFactory(model));
    let core = setup.start().await.unwrap();
    let id = core
        .open_session(OpenTarget::New, None, "terminal", None)
        .await
        .unwrap()
        .session
        .session_id;
    let before = core.get_session(&id, false).await.unwrap();
    assert!(before.open);
    assert_eq!(before.in_memory_messages, 0);
    assert!(!before.fallback_in_use);

    let start = |text: &str| StartTurn {
        session_id: id.clone(),
        text: text.to_owned(),
        channel: "terminal".to_owned(),
        idempotency_key: String::new(),
    };
    let events = drain(&mut core.start_turn(start("one")).await.unwrap()).await;
    assert_eq!(ended_text(&events), "from primary");
    let after_primary = core.get_session(&id, false).await.unwrap();
    assert_eq!(after_primary.in_memory_messages, 2);
    assert!(!after_primary.fallback_in_use);

    let events = drain(&mut core.start_turn(start("two")).await.unwrap()).await;
    assert_eq!(ended_text(&events), "from fallback");
    assert_eq!(fallback.call_count(), 1);
    let after_fallback = core.get_session(&id, false).await.unwrap();
    assert_eq!(after_fallback.in_memory_messages, 4);
    assert!(after_fallback.fallback_in_use);
}

#[tokio::test]
async fn the_idle_reaper_runs_a_timer_only_while_sessions_are_open() {
    let mut options = options();
    options.idle_after = Duration::ZERO;
    let f = fixture_with("file", vec![], options).await;
    tokio::time::pause();
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(f.core.reaper_passes(), 0, "no session open, no wake-ups");

    f.new_session().await;
    assert_eq!(f.core.open_sessions(), 1);
    for _ in 0..1000 {
        if f.core.open_sessions() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        f.core.open_sessions(),
        0,
        "the reaper dropped the idle session"
    );
    let passes = f.core.reaper_passes();
    assert!(passes >= 1);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(
        f.core.reaper_passes(),
        passes,
        "back to sleep without a timer"
    );
}

/// The title comes from the first user text that makes one; later texts never replace it.
#[tokio::test]
async fn the_first_text_that_makes_a_title_names_the_session() {
    let replies = ["one", "two", "three"].map(FakeReply::text).to_vec();
    let f = fixture("file", replies).await;
    let id = f.new_session().await;
    let title = |f: &Fixture| {
        let core = f.core.clone();
        let id = id.clone();
        async move { core.get_session(&id, false).await.unwrap().summary.title }
    };
    // Control characters only: a turn, but no title.
    drain(&mut f.turn(&id, "\u{7}\u{1b}", "terminal").await).await;
    assert_eq!(
        title(&f).await,
        "",
        "a text of control characters makes no title"
    );
    drain(&mut f.turn(&id, "lamp  status", "terminal").await).await;
    assert_eq!(title(&f).await, "lamp status");
    drain(&mut f.turn(&id, "something else", "terminal").await).await;
    assert_eq!(title(&f).await, "lamp status");
}

#[tokio::test]
async fn a_session_made_for_its_first_turn_opens_as_it_was_written() {
    // The hub opens the session it has just created from what it wrote, without reading it
    // back: the role, the title, the empty history and the next ids must be what a read finds.
    for backend in BACKENDS {
        let f = fixture(
            backend,
            vec![FakeReply::text("one"), FakeReply::text("two")],
        )
        .await;
        let mut first = f
            .core
            .start_turn_in_new_session(StartTurn {
                session_id: String::new(),
                text: "plan the garden".into(),
                channel: "terminal".into(),
                idempotency_key: String::new(),
            })
            .await
            .unwrap();
        let events = drain(&mut first).await;
        assert_eq!(ended_text(&events), "one", "{backend}");
        let id = events[0].session_id.clone();
        let detail = f.core.get_session(&id, false).await.unwrap();
        assert!(detail.open, "{backend}");
        assert_eq!(detail.summary.role, options().default_role, "{backend}");
        assert_eq!(detail.summary.title, "plan the garden", "{backend}");
        assert_eq!(detail.in_memory_messages, 2, "{backend}");
        let opened = f
            .core
            .open_session(OpenTarget::Id(id.clone()), None, "terminal", None)
            .await
            .unwrap();
        assert_eq!(
            opened.role,
            options().default_role,
            "the agent's role, {backend}"
        );
        drain(&mut f.turn(&id, "and the roses", "terminal").await).await;
        assert_eq!(
            f.model.last_request().unwrap().messages.len(),
            3,
            "{backend}"
        );
        let stored: Vec<u64> = f
            .core
            .get_session(&id, true)
            .await
            .unwrap()
            .messages
            .iter()
            .map(|(id, _, _)| *id)
            .collect();
        assert_eq!(stored, [0, 1, 2, 3], "{backend}");
    }
}
