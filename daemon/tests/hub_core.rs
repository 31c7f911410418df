//! The hub core in-process, on both session backends, with a scripted fake model: turns, queued
//! turns, approvals through attachments, dropped clients, subscriptions and resumption, idempotent
//! turns, restart expiry, role switches and bad requests.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tau_api::config::RoleConfig;
use taud::gate::Decision;
use taud::hubcore::{
    ApprovalAnswer, CoreError, CoreOptions, CoreSetup, DecideOutcome, EventKind, EventStream,
    HubCore, OpenTarget, Resolution, SessionEvent, SharedModelFactory, StartTurn, TurnStream,
};
use taud::session::{Durability, SessionBackends, SessionStoreConfig};
use taud::testing::{FakeModel, FakeReply};

const DEADLINE: Duration = Duration::from_secs(10);
const BACKENDS: [&str; 2] = ["file", "sqlite"];

struct Fixture {
    _dir: tempfile::TempDir,
    dir: std::path::PathBuf,
    model: Arc<FakeModel>,
    core: HubCore,
    backend: &'static str,
}

fn options() -> CoreOptions {
    let mut options = CoreOptions::default();
    for role in ["brain", "fast"] {
        options.roles.insert(
            role.to_owned(),
            RoleConfig {
                provider: "fake".into(),
                model_id: format!("{role}-model"),
                max_tokens: 100,
                cache: None,
                fallback: None,
            },
        );
    }
    options
}

fn setup(
    dir: &std::path::Path,
    backend: &str,
    model: &Arc<FakeModel>,
    options: CoreOptions,
) -> CoreSetup {
    CoreSetup {
        options,
        backend: backend.to_owned(),
        store: SessionStoreConfig {
            sessions_dir: dir.join("sessions"),
            sqlite_path: dir.join("sessions.db"),
            durability: Durability::NoSync,
        },
        backends: SessionBackends::builtin(),
        factory: Arc::new(SharedModelFactory(Arc::clone(model) as _)),
    }
}

async fn fixture_with(
    backend: &'static str,
    replies: Vec<FakeReply>,
    options: CoreOptions,
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let model = Arc::new(FakeModel::scripted(replies));
    let core = setup(dir.path(), backend, &model, options)
        .start()
        .await
        .unwrap();
    Fixture {
        dir: dir.path().to_path_buf(),
        _dir: dir,
        model,
        core,
        backend,
    }
}

async fn fixture(backend: &'static str, replies: Vec<FakeReply>) -> Fixture {
    fixture_with(backend, replies, options()).await
}

impl Fixture {
    async fn new_session(&self) -> String {
        self.core
            .open_session(OpenTarget::New, None, "terminal", None)
            .await
            .unwrap()
            .session
            .session_id
    }

    async fn turn(&self, session_id: &str, text: &str, channel: &str) -> TurnStream {
        self.core
            .start_turn(StartTurn {
                session_id: session_id.to_owned(),
                text: text.to_owned(),
                channel: channel.to_owned(),
                idempotency_key: String::new(),
            })
            .await
            .unwrap()
    }
}

async fn next_turn_event(stream: &mut TurnStream) -> Option<Arc<SessionEvent>> {
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("a turn event in time")
        .expect("not lagged")
}

async fn drain(stream: &mut TurnStream) -> Vec<Arc<SessionEvent>> {
    let mut events = Vec::new();
    while let Some(event) = next_turn_event(stream).await {
        events.push(event);
    }
    events
}

async fn next_event(stream: &mut EventStream) -> Arc<SessionEvent> {
    tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("an event in time")
        .expect("not lagged")
        .expect("the stream goes on")
}

fn names(events: &[Arc<SessionEvent>]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

fn ended_text(events: &[Arc<SessionEvent>]) -> String {
    match &events.last().unwrap().kind {
        EventKind::TurnEnded(end) => end.text.clone(),
        other => panic!("the last event is {other:?}"),
    }
}

/// Reads turn events up to the approval question and returns its id.
async fn until_approval(stream: &mut TurnStream) -> String {
    loop {
        let event = next_turn_event(stream)
            .await
            .expect("an approval before the end");
        if let EventKind::ApprovalRequested(info) = &event.kind {
            return info.approval_id.clone();
        }
    }
}

fn lamp() -> FakeReply {
    FakeReply::tool_call(
        "demo_physical_action",
        json!({"action": "turn on the lamp"}),
    )
}

#[tokio::test]
async fn a_text_turn_is_streamed_and_stored() {
    for backend in BACKENDS {
        let f = fixture(backend, vec![FakeReply::deltas(["Hel", "lo!"])]).await;
        let id = f.new_session().await;
        let mut stream = f.turn(&id, "hi there", "terminal").await;
        assert!(!stream.accepted().duplicate);
        let events = drain(&mut stream).await;
        assert_eq!(
            names(&events),
            vec![
                "turn_queued",
                "turn_started",
                "text_delta",
                "text_delta",
                "turn_ended"
            ],
            "{backend}"
        );
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert!(
            seqs.windows(2).all(|w| w[1] == w[0] + 1),
            "contiguous: {seqs:?}"
        );
        assert_eq!(ended_text(&events), "Hello!");
        let detail = f.core.get_session(&id, true).await.unwrap();
        assert_eq!(detail.summary.message_count, 2, "{backend}");
        assert_eq!(detail.summary.title, "hi there");
        assert_eq!(detail.summary.role, "brain");
        assert_eq!(detail.messages[1].1.text(), "Hello!");
        let listed = f.core.list_sessions(0, "terminal", None).await.unwrap();
        assert_eq!(listed[0].session_id, id);
        assert_eq!(f.core.backend_name(), f.backend);
    }
}

#[tokio::test]
async fn a_tool_turn_publishes_the_call_in_order() {
    for backend in BACKENDS {
        let f = fixture(
            backend,
            vec![
                FakeReply::tool_call("current_time", json!({})),
                FakeReply::text("It is late."),
            ],
        )
        .await;
        let id = f.new_session().await;
        let events = drain(&mut f.turn(&id, "what time is it", "terminal").await).await;
        assert_eq!(
            names(&events),
            vec![
                "turn_queued",
                "turn_started",
                "tool_use_started",
                "tool_call",
                "text_delta",
                "turn_ended"
            ]
        );
        match &events[3].kind {
            EventKind::ToolCall(call) => {
                assert_eq!(call.tool, "current_time");
                assert_eq!(call.arguments, json!({}));
            }
            other => panic!("{other:?}"),
        }
        let stored = f.core.read_events(&id).await.unwrap();
        assert_eq!(stored.len(), 1, "{backend}: {stored:?}");
        assert_eq!(stored[0]["type"], "tool_call");
        assert_eq!(f.model.call_count(), 2);
    }
}

#[tokio::test]
async fn an_attached_client_approves_and_rejects() {
    for (answer, ran) in [
        (ApprovalAnswer::Approve, true),
        (ApprovalAnswer::Reject, false),
    ] {
        let f = fixture("file", vec![lamp(), FakeReply::text("Done.")]).await;
        let id = f.new_session().await;
        let mut stream = f.turn(&id, "turn on the lamp", "terminal").await;
        let approval = until_approval(&mut stream).await;
        let pending = f.core.list_pending(Some(&id)).unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].channel, "terminal");
        assert_eq!(pending[0].arguments, r#"{"action": "turn on the lamp"}"#);
        let attachment = stream.attachment_id().to_owned();
        assert_eq!(
            f.core.decide(&approval, answer, &attachment).unwrap(),
            DecideOutcome::Applied(if ran {
                Resolution::Approved
            } else {
                Resolution::Rejected
            })
        );
        assert_eq!(
            f.core
                .decide(&approval, ApprovalAnswer::Approve, &attachment)
                .unwrap(),
            DecideOutcome::AlreadyDecided(if ran {
                Resolution::Approved
            } else {
                Resolution::Rejected
            })
        );
        let rest = drain(&mut stream).await;
        let call = rest
            .iter()
            .find_map(|e| match &e.kind {
                EventKind::ToolCall(call) => Some(call.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            call.status == taud::gate::ToolCallStatus::Success,
            ran,
            "{call:?}"
        );
        let stored = f.core.read_events(&id).await.unwrap();
        let approvals: Vec<_> = stored
            .iter()
            .filter(|e| e["type"] == "approval")
            .map(|e| e["status"].as_str().unwrap().to_owned())
            .collect();
        let decided = if ran {
            Decision::Approved
        } else {
            Decision::Rejected
        };
        assert_eq!(
            approvals,
            vec!["pending".to_owned(), decided.as_str().to_owned()]
        );
        assert!(f.core.list_pending(None).unwrap().is_empty());
    }
}

#[tokio::test]
async fn decisions_from_another_channel_or_no_attachment_do_not_count() {
    let f = fixture("sqlite", vec![lamp(), FakeReply::text("Not done.")]).await;
    let id = f.new_session().await;
    let mut stream = f.turn(&id, "turn on the lamp", "terminal").await;
    let approval = until_approval(&mut stream).await;
    let telegram = f.core.subscribe(&id, None, "telegram").await.unwrap();
    let wrong = f
        .core
        .decide(
            &approval,
            ApprovalAnswer::Approve,
            &telegram.snapshot().attachment_id,
        )
        .unwrap_err();
    assert!(matches!(wrong, CoreError::FailedPrecondition(_)), "{wrong}");
    assert!(matches!(
        f.core
            .decide(&approval, ApprovalAnswer::Approve, "att-forged"),
        Err(CoreError::FailedPrecondition(_))
    ));
    assert!(matches!(
        f.core.decide(&approval, ApprovalAnswer::Approve, ""),
        Err(CoreError::InvalidArgument(_))
    ));
    assert_eq!(
        f.core
            .decide(
                "apr-unknown",
                ApprovalAnswer::Approve,
                stream.attachment_id()
            )
            .unwrap(),
        DecideOutcome::NotFound
    );
    assert_eq!(f.core.list_pending(None).unwrap().len(), 1);
    drop(stream);
}

#[tokio::test]
async fn a_dropped_client_leaves_its_turn_running_and_its_approval_rejected() {
    for backend in BACKENDS {
        let f = fixture(backend, vec![lamp(), FakeReply::text("I did not do it.")]).await;
        let id = f.new_session().await;
        let mut watcher = f.core.subscribe(&id, None, "observer").await.unwrap();
        let mut stream = f.turn(&id, "turn on the lamp", "terminal").await;
        let approval = until_approval(&mut stream).await;
        drop(stream);
        // The turn goes on without its client: the approval is rejected and the turn ends.
        let mut resolution = None;
        loop {
            let event = next_event(&mut watcher).await;
            match &event.kind {
                EventKind::ApprovalResolved {
                    resolution: r,
                    approval_id,
                    ..
                } => {
                    assert_eq!(approval_id, &approval);
                    resolution = Some(*r);
                }
                EventKind::TurnEnded(end) => {
                    assert_eq!(end.text, "I did not do it.");
                    break;
                }
                _ => {}
            }
        }
        assert_eq!(resolution, Some(Resolution::ChannelClosed), "{backend}");
        let detail = f.core.get_session(&id, true).await.unwrap();
        assert_eq!(
            detail.summary.message_count, 4,
            "{backend}: the whole turn is stored"
        );
        let stored = f.core.read_events(&id).await.unwrap();
        let call = stored.iter().find(|e| e["type"] == "tool_call").unwrap();
        assert_eq!(call["status"], "refused");
        assert_eq!(call["approval"], "rejected");
    }
}

#[tokio::test]
async fn two_subscribers_see_the_same_events_and_a_late_one_resumes() {
    let f = fixture(
        "file",
        vec![
            FakeReply::deltas(["a", "b", "c"]),
            FakeReply::text("second"),
        ],
    )
    .await;
    let id = f.new_session().await;
    let mut one = f.core.subscribe(&id, None, "terminal").await.unwrap();
    let mut two = f.core.subscribe(&id, None, "tui").await.unwrap();
    assert_eq!(one.snapshot().last_seq, 0);
    assert!(one.snapshot().pending.is_empty());
    let mut stream = f.turn(&id, "first", "terminal").await;
    let turn = drain(&mut stream).await;
    let mut seen_one = Vec::new();
    let mut seen_two = Vec::new();
    for _ in 0..turn.len() {
        seen_one.push(next_event(&mut one).await);
        seen_two.push(next_event(&mut two).await);
    }
    assert_eq!(seen_one, seen_two);
    assert_eq!(seen_one, turn);
    // A client that saw up to seq 2 resumes after it.
    let mut late = f.core.subscribe(&id, Some(2), "terminal").await.unwrap();
    assert_eq!(late.snapshot().last_seq, turn.last().unwrap().seq);
    for expected in &turn[2..] {
        assert_eq!(&next_event(&mut late).await, expected);
    }
    drain(&mut f.turn(&id, "again", "terminal").await).await;
    let live = next_event(&mut late).await;
    assert_eq!(live.seq, turn.last().unwrap().seq + 1);
    assert!(matches!(
        f.core.subscribe(&id, Some(10_000), "terminal").await,
        Err(CoreError::FailedPrecondition(_))
    ));
}

#[tokio::test]
async fn a_slow_subscriber_is_cut_off_and_resumes_where_it_stopped() {
    let mut options = options();
    options.subscriber_lag = 2;
    let f = fixture_with(
        "file",
        vec![FakeReply::deltas(["1", "2", "3", "4", "5", "6"])],
        options,
    )
    .await;
    let id = f.new_session().await;
    let mut slow = f.core.subscribe(&id, None, "terminal").await.unwrap();
    // Nobody reads this turn's events; it runs to its end anyway.
    drop(f.turn(&id, "count", "terminal").await);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while f
        .core
        .get_session(&id, false)
        .await
        .unwrap()
        .summary
        .message_count
        < 2
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn never finished"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let lagged = tokio::time::timeout(DEADLINE, slow.next())
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(lagged.resume_after_seq, 0);
    let mut resumed = f
        .core
        .subscribe(&id, Some(lagged.resume_after_seq), "terminal")
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let event = next_event(&mut resumed).await;
        seen.push(event.kind.name());
        if matches!(event.kind, EventKind::TurnEnded(_)) {
            break;
        }
    }
    assert_eq!(
        seen,
        vec![
            "turn_queued",
            "turn_started",
            "text_delta",
            "text_delta",
            "text_delta",
            "text_delta",
            "text_delta",
            "text_delta",
            "turn_ended"
        ]
    );
}

#[tokio::test]
async fn turns_queue_and_an_idempotency_key_returns_the_same_turn() {
    let f = fixture("file", vec![FakeReply::text("one"), FakeReply::text("two")]).await;
    let id = f.new_session().await;
    let request = |text: &str, key: &str| StartTurn {
        session_id: id.clone(),
        text: text.to_owned(),
        channel: "terminal".to_owned(),
        idempotency_key: key.to_owned(),
    };
    let mut first = f.core.start_turn(request("first", "k1")).await.unwrap();
    let mut second = f.core.start_turn(request("second", "k2")).await.unwrap();
    let mut again = f
        .core
        .start_turn(request("first (retry)", "k1"))
        .await
        .unwrap();
    assert!(again.accepted().duplicate);
    assert_eq!(again.accepted().turn_id, first.accepted().turn_id);
    let first_events = drain(&mut first).await;
    let second_events = drain(&mut second).await;
    assert_eq!(ended_text(&first_events), "one");
    assert_eq!(ended_text(&second_events), "two");
    assert!(
        first_events.last().unwrap().seq < second_events[1].seq,
        "second ran after first"
    );
    assert_eq!(drain(&mut again).await, first_events);
    assert_eq!(f.model.call_count(), 2, "the retry started nothing");
    let detail = f.core.get_session(&id, true).await.unwrap();
    assert_eq!(detail.summary.message_count, 4);
}

#[tokio::test]
async fn a_queued_turn_can_be_cancelled_before_it_runs() {
    let f = fixture("file", vec![lamp(), FakeReply::text("no")]).await;
    let id = f.new_session().await;
    let mut first = f.turn(&id, "turn on the lamp", "terminal").await;
    until_approval(&mut first).await;
    let mut queued = f.turn(&id, "later", "terminal").await;
    assert_eq!(queued.accepted().queued_ahead, 1);
    let turn_id = queued.accepted().turn_id.clone();
    assert_eq!(
        f.core.cancel_turn(&id, Some(&turn_id)).await.unwrap(),
        Some(turn_id)
    );
    let events = drain(&mut queued).await;
    assert_eq!(names(&events), vec!["turn_queued", "turn_ended"]);
    // The running turn is cancelled too: its approval ends as cancelled.
    assert!(f.core.cancel_turn(&id, None).await.unwrap().is_some());
    let rest = drain(&mut first).await;
    assert!(rest.iter().any(|e| matches!(
        e.kind,
        EventKind::ApprovalResolved {
            resolution: Resolution::Cancelled,
            ..
        }
    )));
    match &rest.last().unwrap().kind {
        EventKind::TurnEnded(end) => assert_eq!(end.stop_reason.as_str(), "cancelled"),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.core.cancel_turn(&id, None).await.unwrap(), None);
}

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
        let dir = tempfile::tempdir().unwrap();
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
                .unwrap(),
            DecideOutcome::Expired(Resolution::ExpiredByRestart)
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
    let _ = &f.dir;
}

#[tokio::test]
async fn shutdown_cancels_turns_and_ends_subscriptions() {
    let f = fixture("file", vec![lamp(), FakeReply::text("stopped")]).await;
    let id = f.new_session().await;
    let mut watcher = f.core.subscribe(&id, None, "observer").await.unwrap();
    let mut stream = f.turn(&id, "turn on the lamp", "terminal").await;
    until_approval(&mut stream).await;
    f.core.shutdown().await;
    let rest = drain(&mut stream).await;
    assert!(matches!(rest.last().unwrap().kind, EventKind::TurnEnded(_)));
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
}
