//! Routines in the hub core: a tier-2 tool routine registered through the registering session's
//! approval (approved and rejected), its schedule never replaced without a new approval, and a
//! manual run asked every time in the caller's session; a prompt routine run as a turn on its own
//! session, whose tier-2 question is held for the owner (any subscriber of the session may answer
//! it) and ends as timeout at its deadline, with the next firing going on; the routine status
//! report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::hub::{DEADLINE, Fixture, fixture_in, next_event, options};
use taud::hub::{AddRoutine, ApprovalAnswer, CoreError, EventKind, EventStream};
use taud::routine::{CatchUp, Creator, FiringOutcome, RoutineAction};
use taud::testing::FakeReply;

async fn routines_fixture(replies: Vec<FakeReply>) -> Fixture {
    let dir = crate::support::temp::dir();
    let mut options = options();
    options.routines_file = Some(dir.path().join("routines.json"));
    fixture_in(dir, "file", replies, options).await
}

fn lamp_routine(session_id: &str, action: &str) -> AddRoutine {
    AddRoutine {
        name: "lamp-off".into(),
        cron: "0 23 * * *".into(),
        every: String::new(),
        at: String::new(),
        action: RoutineAction::Tool {
            tool: "demo_physical_action".into(),
            arguments: json!({"action": action}),
        },
        catch_up: CatchUp::Skip,
        replace: false,
        session_id: session_id.into(),
        channel: "terminal".into(),
        created_by: Creator::Owner,
    }
}

/// Reads the watcher's events up to an approval question; returns its id and effect.
async fn question(watcher: &mut EventStream) -> (String, String) {
    loop {
        let event = next_event(watcher).await;
        if let EventKind::ApprovalRequested(info) = &event.kind {
            return (
                info.request.approval_id.clone(),
                info.request.effect.clone(),
            );
        }
    }
}

/// Decides `approval` as a client holding `attachment` would; the decision must count.
async fn decide(f: &Fixture, approval: &str, answer: ApprovalAnswer, attachment: &str) {
    f.core.decide(approval, answer, attachment).await.unwrap();
}

async fn ended_firing(f: &Fixture, name: &str, number: u64) -> taud::routine::Firing {
    let deadline = tokio::time::Instant::now() + DEADLINE * 3; // a firing may wait out a held question first
    loop {
        let history = f.core.routine_history(name).unwrap();
        if let Some(firing) = history
            .iter()
            .find(|h| h.number == number && h.outcome != FiringOutcome::Running)
        {
            return firing.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the firing ended in time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_tier_two_routine_is_approved_in_its_session_then_fires_exempt() {
    let f = routines_fixture(vec![]).await;
    let id = f.new_session().await;
    let mut watcher = f.core.subscribe(&id, None, "terminal").await.unwrap();
    let attachment = watcher.snapshot().attachment_id.clone();

    // Rejected: nothing is stored.
    let core = f.core.clone();
    let adding = tokio::spawn({
        let request = lamp_routine(&id, "desk lamp off");
        async move { core.add_routine(request).await }
    });
    let (approval, effect) = question(&mut watcher).await;
    assert!(
        effect.contains("Routine \"lamp-off\" (cron 0 23 * * *"),
        "{effect}"
    );
    decide(&f, &approval, ApprovalAnswer::Reject, &attachment).await;
    let refused = adding.await.unwrap().unwrap_err();
    assert!(
        matches!(refused, CoreError::FailedPrecondition(_)),
        "{refused:?}"
    );
    assert!(f.core.list_routines().unwrap().is_empty());

    // Approved: stored with its approval.
    let core = f.core.clone();
    let adding = tokio::spawn({
        let request = lamp_routine(&id, "desk lamp off");
        async move { core.add_routine(request).await }
    });
    let (approval, _) = question(&mut watcher).await;
    decide(&f, &approval, ApprovalAnswer::Approve, &attachment).await;
    let view = adding.await.unwrap().unwrap();
    assert_eq!(
        view.routine
            .approval
            .as_ref()
            .map(|a| a.approval_id.as_str()),
        Some(approval.as_str())
    );

    // The schedule cannot be replaced without a new question: rejected, the old one stays.
    let core = f.core.clone();
    let replacing = tokio::spawn({
        let mut request = lamp_routine(&id, "desk lamp off");
        request.cron = String::new();
        request.every = "1m".into();
        request.replace = true;
        async move { core.add_routine(request).await }
    });
    let (approval, effect) = question(&mut watcher).await;
    assert!(effect.contains("every 1m"), "{effect}");
    decide(&f, &approval, ApprovalAnswer::Reject, &attachment).await;
    assert!(replacing.await.unwrap().is_err());
    let kept = f.core.list_routines().unwrap().remove(0);
    assert_eq!(kept.schedule_text, "cron 0 23 * * *");
    // And not at all from outside a session.
    let mut outside = lamp_routine("", "desk lamp off");
    outside.cron = String::new();
    outside.every = "1m".into();
    outside.replace = true;
    let err = f.core.add_routine(outside).await.unwrap_err();
    assert!(matches!(err, CoreError::InvalidArgument(_)), "{err:?}");
    assert_eq!(
        f.core.list_routines().unwrap()[0].schedule_text,
        "cron 0 23 * * *"
    );

    // A manual run is refused without a session, and asked in one every time.
    let err = f.core.run_routine("lamp-off", "", "").await.unwrap_err();
    assert!(matches!(err, CoreError::FailedPrecondition(_)), "{err:?}");
    assert!(err.to_string().contains("asked in a session"), "{err}");
    let core = f.core.clone();
    let session = id.clone();
    let running =
        tokio::spawn(async move { core.run_routine("lamp-off", &session, "terminal").await });
    let (approval, effect) = question(&mut watcher).await;
    assert!(effect.starts_with("Demo: simulates"), "{effect}");
    decide(&f, &approval, ApprovalAnswer::Approve, &attachment).await;
    let run = running.await.unwrap().unwrap();
    assert!(run.result.as_ref().unwrap().succeeded, "{run:?}");
    let firing = ended_firing(&f, "lamp-off", run.firing).await;
    assert_eq!(
        firing.outcome,
        FiringOutcome::Succeeded,
        "{}",
        firing.detail
    );
    assert!(firing.detail.contains("(approved)"), "{}", firing.detail);
    let events = f.core.read_events(&id).await.unwrap();
    let calls: Vec<_> = events.iter().filter(|e| e["type"] == "tool_call").collect();
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0]["approval"], "approved");
    assert_eq!(calls[0]["tool"], "demo_physical_action");
    let status = f.core.routine_status();
    assert!(status.enabled);
    assert_eq!(status.routines.len(), 1);
    assert!(status.missing_tools.is_empty());
    f.core.shutdown().await;
}

#[tokio::test]
async fn a_tier_two_routine_needs_a_session_to_be_asked_in() {
    let f = routines_fixture(vec![]).await;
    let err = f
        .core
        .add_routine(lamp_routine("", "desk lamp off"))
        .await
        .unwrap_err();
    assert!(matches!(err, CoreError::InvalidArgument(_)), "{err:?}");
    assert!(err.to_string().contains("from a session"), "{err}");
    let mut bad = lamp_routine("", "x");
    bad.action = RoutineAction::Tool {
        tool: "current_time".into(),
        arguments: json!({}),
    };
    bad.cron = "0 99 * * *".into();
    let err = f.core.add_routine(bad).await.unwrap_err();
    assert!(err.to_string().contains("hour field"), "{err}");
    f.core.shutdown().await;
}

#[tokio::test]
async fn a_prompt_routine_runs_as_a_turn_on_its_own_session() {
    let f = routines_fixture(vec![FakeReply::text("Sunny, 21 degrees.")]).await;
    let view = f
        .core
        .add_routine(AddRoutine {
            name: "weather".into(),
            cron: String::new(),
            every: "1d".into(),
            at: String::new(),
            action: RoutineAction::Prompt {
                text: "Read me the weather.".into(),
                approval_channel: "terminal".into(),
            },
            catch_up: CatchUp::RunOnce,
            replace: false,
            session_id: String::new(),
            channel: "terminal".into(),
            created_by: Creator::Owner,
        })
        .await
        .unwrap();
    assert!(view.routine.approval.is_none());
    let number = f.core.run_routine("weather", "", "").await.unwrap().firing;
    let firing = ended_firing(&f, "weather", number).await;
    assert_eq!(
        firing.outcome,
        FiringOutcome::Succeeded,
        "{}",
        firing.detail
    );
    assert_eq!(firing.detail, "Sunny, 21 degrees.");
    let detail = f.core.summary("routine-weather").await.unwrap();
    assert_eq!(detail.channel, "routine");
    f.core.shutdown().await;
}

#[tokio::test]
async fn the_model_proposes_a_routine_and_the_owner_approves_it_in_the_turn() {
    let proposal = FakeReply::tool_call(
        "schedule_routine",
        json!({"name": "lamp-off", "cron": "0 23 * * *", "tool": "demo_physical_action",
               "arguments": {"action": "desk lamp off"}, "skip_missed": true}),
    );
    let f = routines_fixture(vec![
        proposal,
        FakeReply::text("Done: every night at 23:00."),
    ])
    .await;
    assert!(
        f.core.tools().iter().any(|t| t.name == "schedule_routine"),
        "the hub offers the tool"
    );
    let id = f.new_session().await;
    let mut turn = f
        .turn(&id, "switch the desk lamp off every night", "terminal")
        .await;
    let approval = support::hub::until_approval(&mut turn).await;
    decide(&f, &approval, ApprovalAnswer::Approve, turn.attachment_id()).await;
    let events = support::hub::drain(&mut turn).await;
    assert_eq!(
        support::hub::ended_text(&events),
        "Done: every night at 23:00."
    );
    let routine = f.core.list_routines().unwrap().remove(0);
    assert_eq!(routine.routine.name, "lamp-off");
    assert_eq!(routine.routine.catch_up, CatchUp::Skip);
    assert_eq!(
        routine.routine.approval.map(|a| a.approval_id),
        Some(approval)
    );
    let stored = f.core.read_events(&id).await.unwrap();
    let call = stored
        .iter()
        .find(|e| e["type"] == "tool_call" && e["tool"] == "schedule_routine")
        .expect("the proposal is recorded");
    assert_eq!(call["approval"], "not_required");
    assert!(
        call["result_summary"]
            .as_str()
            .unwrap()
            .contains("registered"),
        "{call}"
    );
    f.core.shutdown().await;
}

#[tokio::test]
async fn a_prompt_routine_the_model_proposes_is_asked_and_refused_when_rejected() {
    let proposal = || {
        FakeReply::tool_call(
            "schedule_routine",
            json!({"name": "spender", "every": "1m", "prompt": "Search the web again."}),
        )
    };
    let f = routines_fixture(vec![
        proposal(),
        FakeReply::text("It was not registered."),
        proposal(),
        FakeReply::text("Registered."),
    ])
    .await;
    let id = f.new_session().await;
    let mut turn = f.turn(&id, "keep searching", "terminal").await;
    let approval = support::hub::until_approval(&mut turn).await;
    let pending = f.core.list_pending(Some(&id)).unwrap();
    assert_eq!(pending[0].request.tool, "schedule_routine");
    assert_eq!(
        pending[0].request.arguments,
        json!({"name": "spender", "prompt": "Search the web again.", "approval_channel": "terminal"})
    );
    assert!(
        pending[0].request.effect.contains("every 1m"),
        "{}",
        pending[0].request.effect
    );
    decide(&f, &approval, ApprovalAnswer::Reject, turn.attachment_id()).await;
    support::hub::drain(&mut turn).await;
    assert!(
        f.core.list_routines().unwrap().is_empty(),
        "nothing the model proposed is stored unapproved"
    );
    let mut turn = f.turn(&id, "keep searching", "terminal").await;
    let approval = support::hub::until_approval(&mut turn).await;
    decide(&f, &approval, ApprovalAnswer::Approve, turn.attachment_id()).await;
    support::hub::drain(&mut turn).await;
    let routine = f.core.list_routines().unwrap().remove(0);
    assert_eq!(routine.routine.created_by, Creator::Model);
    assert_eq!(
        routine.routine.approval.map(|a| a.approval_id),
        Some(approval)
    );
    f.core.shutdown().await;
}

#[tokio::test]
async fn a_tool_firings_events_reach_events_jsonl_without_waiting_for_a_checkpoint() {
    let f = routines_fixture(vec![]).await;
    let mut time = lamp_routine("", "x");
    time.name = "time".into();
    time.action = RoutineAction::Tool {
        tool: "current_time".into(),
        arguments: json!({}),
    };
    f.core.add_routine(time).await.unwrap();
    let number = f.core.run_routine("time", "", "").await.unwrap().firing;
    let firing = ended_firing(&f, "time", number).await;
    assert_eq!(
        firing.outcome,
        FiringOutcome::Succeeded,
        "{}",
        firing.detail
    );
    // The seed's own file, not the journal: no turn ended, no checkpoint was due.
    let events = f
        .dir
        .join("sessions")
        .join("routine-time")
        .join("events.jsonl");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&events).unwrap_or_default();
        if text.contains("\"tool_call\"") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "events.jsonl: {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f.core.shutdown().await;
}

#[tokio::test]
async fn a_routine_whose_tool_is_gone_is_reported() {
    let dir = crate::support::temp::dir();
    let path = dir.path().join("routines.json");
    let gone = taud::routine::Routine::new(
        "porch",
        taud::routine::Schedule::cron("0 20 * * *").unwrap(),
        RoutineAction::Tool {
            tool: "mcp__home__porch_light".into(),
            arguments: json!({"on": true}),
        },
        CatchUp::Skip,
        "2026-12-01T00:00:00Z".parse().unwrap(),
    );
    taud::routine::save_routines(&path, &[gone]).unwrap();
    let mut options = options();
    options.routines_file = Some(path);
    let f = fixture_in(dir, "file", vec![], options).await;
    let status = f.core.routine_status();
    assert_eq!(
        status.missing_tools,
        [("porch".to_owned(), "mcp__home__porch_light".to_owned())]
    );
    let json = status.to_json();
    assert_eq!(json["routines"]["count"], 1);
    let warning = json["routines"]["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("no longer in the tool catalog"),
        "{warning}"
    );
    f.core.shutdown().await;
}

#[tokio::test]
async fn an_unreadable_routines_file_leaves_routines_off_and_says_why() {
    let dir = crate::support::temp::dir();
    let path = dir.path().join("routines.json");
    std::fs::write(&path, "{not json").unwrap();
    let mut options = options();
    options.routines_file = Some(path);
    let f = fixture_in(dir, "file", vec![], options).await;
    let err = f.core.list_routines().unwrap_err();
    assert!(err.to_string().contains("routines are off"), "{err}");
    let status = f.core.routine_status();
    assert!(!status.enabled);
    assert_eq!(status.warnings().len(), 1);
    f.core.shutdown().await;
}

#[tokio::test]
async fn overlapping_prompt_firings_queue_like_any_turn() {
    let f = routines_fixture(vec![FakeReply::text("first"), FakeReply::text("second")]).await;
    f.core
        .add_routine(AddRoutine {
            name: "news".into(),
            cron: "0 8 * * *".into(),
            every: String::new(),
            at: String::new(),
            action: RoutineAction::Prompt {
                text: "Tell me the news.".into(),
                approval_channel: "terminal".into(),
            },
            catch_up: CatchUp::RunOnce,
            replace: false,
            session_id: String::new(),
            channel: "terminal".into(),
            created_by: Creator::Owner,
        })
        .await
        .unwrap();
    let a = f.core.run_routine("news", "", "").await.unwrap().firing;
    let b = f.core.run_routine("news", "", "").await.unwrap().firing;
    let first = ended_firing(&f, "news", a).await;
    let second = ended_firing(&f, "news", b).await;
    let mut details = [first.detail, second.detail];
    details.sort();
    assert_eq!(
        details,
        ["first", "second"],
        "both ran, one after the other"
    );
    assert_eq!(f.model.call_count(), 2);
    f.core.shutdown().await;
}

/// Subscribes once the session exists (a routine makes it on its first firing).
async fn subscribe_when_there(f: &Fixture, session: &str, channel: &str) -> EventStream {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        match f.core.subscribe(session, None, channel).await {
            Ok(stream) => return stream,
            Err(CoreError::NotFound(_)) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(err) => panic!("subscribe: {err}"),
        }
    }
}

async fn pending_in(f: &Fixture, session: &str, not: Option<&str>) -> String {
    let deadline = tokio::time::Instant::now() + DEADLINE * 3;
    loop {
        if let Some(info) = f
            .core
            .list_pending(Some(session))
            .unwrap()
            .into_iter()
            .find(|p| Some(p.request.approval_id.as_str()) != not)
        {
            return info.request.approval_id;
        }
        assert!(tokio::time::Instant::now() < deadline, "a question in time");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_prompt_routines_question_is_held_for_the_owner_and_ends_at_its_deadline() {
    let lamp = || FakeReply::tool_call("demo_physical_action", json!({"action": "desk lamp off"}));
    let dir = crate::support::temp::dir();
    let mut options = options();
    options.routines_file = Some(dir.path().join("routines.json"));
    // Long enough for a loaded machine to subscribe and answer, short enough for a test.
    options.routine_approval_timeout = Duration::from_secs(8);
    let f = fixture_in(
        dir,
        "file",
        vec![
            lamp(),
            FakeReply::text("It was not approved."),
            lamp(),
            FakeReply::text("The lamp is off."),
        ],
        options,
    )
    .await;
    f.core
        .add_routine(AddRoutine {
            name: "lamp".into(),
            cron: "0 23 * * *".into(),
            every: String::new(),
            at: String::new(),
            action: RoutineAction::Prompt {
                text: "Switch the desk lamp off.".into(),
                approval_channel: "telegram".into(),
            },
            catch_up: CatchUp::Skip,
            replace: false,
            session_id: String::new(),
            channel: "terminal".into(),
            created_by: Creator::Owner,
        })
        .await
        .unwrap();

    // A client subscribes on another channel, sees the question, and leaves: the question stays
    // pending for the owner (asked on the routine's approval channel), then ends at its deadline;
    // the firing queued behind it goes on.
    let first = f.core.run_routine("lamp", "", "").await.unwrap().firing;
    let passer = subscribe_when_there(&f, "routine-lamp", "routine").await;
    let approval = pending_in(&f, "routine-lamp", None).await;
    // Queued behind the first, which waits on its question.
    let second = f.core.run_routine("lamp", "", "").await.unwrap().firing;
    drop(passer);
    let pending = f.core.list_pending(None).unwrap();
    assert_eq!(pending.len(), 1, "still pending after the client left");
    assert_eq!(pending[0].request.approval_id, approval);
    assert_eq!(pending[0].request.channel, "telegram");
    assert!(pending[0].held);
    assert!(pending[0].deadline.is_some());
    let firing = ended_firing(&f, "lamp", first).await;
    assert_eq!(firing.outcome, FiringOutcome::Failed, "{}", firing.detail);
    assert!(
        firing.detail.starts_with(
            "timeout: nobody answered the question about demo_physical_action on channel telegram"
        ),
        "{}",
        firing.detail
    );
    let events = f.core.read_events("routine-lamp").await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "approval" && e["status"] == "timeout"),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "tool_call" && e["status"] == "success"),
        "{events:?}"
    );

    // The next firing's question: any subscriber of the session may answer it.
    let owner = subscribe_when_there(&f, "routine-lamp", "terminal").await;
    let attachment = owner.snapshot().attachment_id.clone();
    let approval = pending_in(&f, "routine-lamp", Some(&approval)).await;
    decide(&f, &approval, ApprovalAnswer::Approve, &attachment).await;
    let firing = ended_firing(&f, "lamp", second).await;
    assert_eq!(
        firing.outcome,
        FiringOutcome::Succeeded,
        "{}",
        firing.detail
    );
    assert_eq!(firing.detail, "The lamp is off.");
    f.core.shutdown().await;
}
