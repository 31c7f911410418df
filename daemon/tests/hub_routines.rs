//! Routines in the hub core: a tier-2 tool routine registered through the registering session's
//! approval (approved and rejected), fired without a prompt and recorded in the routine's session
//! as `exempt`; a prompt routine run as a turn on its own session on channel `routine`, whose
//! tier-2 question fails the firing at once when no client there could answer it; the routine
//! status report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support {
    pub mod hub;
}

use std::time::Duration;

use serde_json::json;
use support::hub::{DEADLINE, Fixture, fixture_with, next_event, options};
use taud::hub::{AddRoutine, ApprovalAnswer, CoreError, EventKind, EventStream};
use taud::routine::{CatchUp, FiringOutcome, RoutineAction};
use taud::testing::FakeReply;

async fn routines_fixture(replies: Vec<FakeReply>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options();
    options.routines_file = Some(dir.path().join("routines.json"));
    let f = fixture_with("file", replies, options).await;
    // Keep the routines file's directory alive with the fixture's.
    std::mem::forget(dir);
    f
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

async fn ended_firing(f: &Fixture, name: &str, number: u64) -> taud::routine::Firing {
    let deadline = tokio::time::Instant::now() + DEADLINE;
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
        effect.contains("Routine \"lamp-off\", cron 0 23 * * *"),
        "{effect}"
    );
    f.core
        .decide(&approval, ApprovalAnswer::Reject, &attachment)
        .unwrap();
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
    f.core
        .decide(&approval, ApprovalAnswer::Approve, &attachment)
        .unwrap();
    let view = adding.await.unwrap().unwrap();
    assert_eq!(
        view.routine
            .approval
            .as_ref()
            .map(|a| a.approval_id.as_str()),
        Some(approval.as_str())
    );

    // Fired: no question anywhere, recorded as exempt in the routine's session.
    let number = f.core.run_routine("lamp-off").unwrap();
    let firing = ended_firing(&f, "lamp-off", number).await;
    assert_eq!(
        firing.outcome,
        FiringOutcome::Succeeded,
        "{}",
        firing.detail
    );
    assert!(firing.detail.contains("(exempt)"), "{}", firing.detail);
    assert!(f.core.list_pending(None).unwrap().is_empty());
    let events = f.core.read_events("routine-lamp-off").await.unwrap();
    let calls: Vec<_> = events.iter().filter(|e| e["type"] == "tool_call").collect();
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0]["approval"], "exempt");
    assert_eq!(calls[0]["tool"], "demo_physical_action");
    assert_eq!(
        calls[0]["tool_use_id"],
        format!("routine-lamp-off-{number}")
    );
    assert!(
        !events.iter().any(|e| e["type"] == "approval"),
        "no question in the routine's session"
    );
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
        })
        .await
        .unwrap();
    assert!(view.routine.approval.is_none());
    let number = f.core.run_routine("weather").unwrap();
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
    f.core
        .decide(&approval, ApprovalAnswer::Approve, turn.attachment_id())
        .unwrap();
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
async fn a_routine_whose_tool_is_gone_is_reported() {
    let dir = tempfile::tempdir().unwrap();
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
    let f = fixture_with("file", vec![], options).await;
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
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routines.json");
    std::fs::write(&path, "{not json").unwrap();
    let mut options = options();
    options.routines_file = Some(path);
    let f = fixture_with("file", vec![], options).await;
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
        })
        .await
        .unwrap();
    let a = f.core.run_routine("news").unwrap();
    let b = f.core.run_routine("news").unwrap();
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

#[tokio::test]
async fn a_prompt_routines_question_nobody_can_answer_fails_the_firing_at_once() {
    let lamp = || FakeReply::tool_call("demo_physical_action", json!({"action": "desk lamp off"}));
    let f = routines_fixture(vec![lamp(), lamp(), FakeReply::text("The lamp is off.")]).await;
    f.core
        .add_routine(AddRoutine {
            name: "lamp".into(),
            cron: "0 23 * * *".into(),
            every: String::new(),
            at: String::new(),
            action: RoutineAction::Prompt {
                text: "Switch the desk lamp off.".into(),
                approval_channel: "terminal".into(),
            },
            catch_up: CatchUp::Skip,
            replace: false,
            session_id: String::new(),
            channel: "terminal".into(),
        })
        .await
        .unwrap();

    // Nobody attached on the routine's session and channel: failed at once (no approval timeout
    // is configured here, so waiting would never end), nothing ran.
    let number = f.core.run_routine("lamp").unwrap();
    let firing = ended_firing(&f, "lamp", number).await;
    assert_eq!(firing.outcome, FiringOutcome::Failed, "{}", firing.detail);
    assert!(
        firing.detail.starts_with(
            "needs_approval: no client on channel routine to ask about demo_physical_action"
        ),
        "{}",
        firing.detail
    );
    assert!(f.core.list_pending(None).unwrap().is_empty());
    let events = f.core.read_events("routine-lamp").await.unwrap();
    assert!(
        !events
            .iter()
            .any(|e| e["type"] == "tool_call" && e["status"] == "success"),
        "{events:?}"
    );

    // A client attached there is asked as usual, and its approval lets the call run.
    let mut watcher = f
        .core
        .subscribe("routine-lamp", None, "routine")
        .await
        .unwrap();
    let attachment = watcher.snapshot().attachment_id.clone();
    let number = f.core.run_routine("lamp").unwrap();
    let (approval, _) = question(&mut watcher).await;
    f.core
        .decide(&approval, ApprovalAnswer::Approve, &attachment)
        .unwrap();
    let firing = ended_firing(&f, "lamp", number).await;
    assert_eq!(
        firing.outcome,
        FiringOutcome::Succeeded,
        "{}",
        firing.detail
    );
    assert_eq!(firing.detail, "The lamp is off.");
    f.core.shutdown().await;
}
