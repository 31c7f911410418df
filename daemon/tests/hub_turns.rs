//! The hub core in-process, on both session backends, with a scripted fake model: turns, queued
//! turns, approvals through attachments, dropped clients, subscriptions, resumption and idempotent
//! turns.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::hub::*;
use taud::hub::{
    ApprovalAnswer, ApprovalOutcome, CoreError, DecideOutcome, EventKind, LAG_GRACE, StartTurn,
};
use taud::testing::FakeReply;

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
        assert_eq!(pending[0].request.channel, "terminal");
        assert_eq!(
            pending[0].request.formatted_arguments(),
            r#"{"action": "turn on the lamp"}"#
        );
        let attachment = stream.attachment_id().to_owned();
        assert_eq!(
            f.core.decide(&approval, answer, &attachment).await.unwrap(),
            DecideOutcome::Applied(if ran {
                ApprovalOutcome::Approved
            } else {
                ApprovalOutcome::Rejected
            })
        );
        assert_eq!(
            f.core
                .decide(&approval, ApprovalAnswer::Approve, &attachment)
                .await
                .unwrap(),
            DecideOutcome::AlreadyDecided(if ran {
                ApprovalOutcome::Approved
            } else {
                ApprovalOutcome::Rejected
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
            ApprovalOutcome::Approved
        } else {
            ApprovalOutcome::Rejected
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
        .await
        .unwrap_err();
    assert!(matches!(wrong, CoreError::FailedPrecondition(_)), "{wrong}");
    assert!(matches!(
        f.core
            .decide(&approval, ApprovalAnswer::Approve, "att-forged")
            .await,
        Err(CoreError::FailedPrecondition(_))
    ));
    assert!(matches!(
        f.core.decide(&approval, ApprovalAnswer::Approve, "").await,
        Err(CoreError::InvalidArgument(_))
    ));
    assert_eq!(
        f.core
            .decide(
                "apr-unknown",
                ApprovalAnswer::Approve,
                stream.attachment_id()
            )
            .await
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
        assert_eq!(
            resolution,
            Some(ApprovalOutcome::ChannelClosed),
            "{backend}"
        );
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
            resolution: ApprovalOutcome::Cancelled,
            ..
        }
    )));
    match &rest.last().unwrap().kind {
        EventKind::TurnEnded(end) => assert_eq!(end.stop_reason.as_str(), "cancelled"),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.core.cancel_turn(&id, None).await.unwrap(), None);
}

/// A turn on `terminal` that waits for an approval, started by a client that reads nothing: its
/// stream is cut off for lagging and dropped (as the rpc layer drops it). Returns the approval id.
async fn lagged_turn_with_a_pending_approval(f: &Fixture, id: &str) -> (String, u64) {
    let mut stream = f.turn(id, "turn on the lamp", "terminal").await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    let approval = loop {
        if let Some(pending) = f.core.list_pending(Some(id)).unwrap().first() {
            break pending.request.approval_id.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "no approval asked");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    // What was replayed at the start comes first; then the cut-off.
    let lagged = loop {
        match tokio::time::timeout(DEADLINE, stream.next()).await.unwrap() {
            Ok(Some(event)) => assert!(event.seq <= 1, "only the replayed start: {event:?}"),
            Ok(None) => panic!("the turn stream ended without a cut-off"),
            Err(lagged) => break lagged,
        }
    };
    let cut_off = stream.attachment_id().to_owned();
    drop(stream);
    assert_eq!(
        f.core.list_pending(Some(id)).unwrap().len(),
        1,
        "still pending right after the cut-off"
    );
    assert!(
        matches!(
            f.core
                .decide(&approval, ApprovalAnswer::Approve, &cut_off)
                .await,
            Err(CoreError::CutOff(_))
        ),
        "a cut-off attachment no longer decides"
    );
    (approval, lagged.resume_after_seq)
}

#[tokio::test]
async fn a_cut_off_client_that_resubscribes_within_the_grace_keeps_its_approval() {
    let mut options = options();
    options.subscriber_lag = 2;
    let f = fixture_with("file", vec![lamp(), FakeReply::text("Done.")], options).await;
    tokio::time::pause();
    let id = f.new_session().await;
    let (approval, after) = lagged_turn_with_a_pending_approval(&f, &id).await;
    tokio::time::sleep(LAG_GRACE / 2).await;
    let resumed = f
        .core
        .subscribe(&id, Some(after), "terminal")
        .await
        .unwrap();
    assert_eq!(resumed.snapshot().pending.len(), 1);
    // The grace of the old attachment runs out; the new one keeps the channel attached.
    tokio::time::sleep(LAG_GRACE * 2).await;
    assert_eq!(f.core.list_pending(Some(&id)).unwrap().len(), 1);
    let attachment = resumed.snapshot().attachment_id.clone();
    assert_eq!(
        f.core
            .decide(&approval, ApprovalAnswer::Approve, &attachment)
            .await
            .unwrap(),
        DecideOutcome::Applied(ApprovalOutcome::Approved)
    );
    // The turn goes on with the approval; the resumed stream may lag again on a lag of 2.
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while f
        .core
        .get_session(&id, false)
        .await
        .unwrap()
        .summary
        .message_count
        < 4
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn never ended"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stored = f.core.read_events(&id).await.unwrap();
    let call = stored.iter().find(|e| e["type"] == "tool_call").unwrap();
    assert_eq!(call["approval"], "approved", "{call}");
    drop(resumed);
}

#[tokio::test]
async fn a_cut_off_client_that_does_not_come_back_has_its_approval_rejected_after_the_grace() {
    let mut options = options();
    options.subscriber_lag = 2;
    let f = fixture_with(
        "sqlite",
        vec![lamp(), FakeReply::text("Not done.")],
        options,
    )
    .await;
    tokio::time::pause();
    let id = f.new_session().await;
    let (approval, _) = lagged_turn_with_a_pending_approval(&f, &id).await;
    tokio::time::sleep(LAG_GRACE - Duration::from_secs(1)).await;
    assert_eq!(f.core.registry().resolution_of(&approval), None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while f.core.registry().resolution_of(&approval).is_none() {
        assert!(tokio::time::Instant::now() < deadline, "never resolved");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        f.core.registry().resolution_of(&approval),
        Some(ApprovalOutcome::ChannelClosed)
    );
}

#[tokio::test]
async fn a_held_attachment_ends_when_the_hub_stops() {
    let mut options = options();
    options.subscriber_lag = 2;
    let f = fixture_with("file", vec![lamp(), FakeReply::text("Stopped.")], options).await;
    let id = f.new_session().await;
    let (approval, _) = lagged_turn_with_a_pending_approval(&f, &id).await;
    assert_eq!(f.core.registry().attachments_on(&id), 1, "the held one");
    f.core.shutdown().await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while f.core.registry().attachments_on(&id) > 0 {
        assert!(tokio::time::Instant::now() < deadline, "still held");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(f.core.registry().resolution_of(&approval).is_some());
}

#[tokio::test]
async fn an_approval_nobody_answers_times_out_with_the_configured_deadline() {
    let mut options = options();
    options.approval_timeout = Some(Duration::from_millis(300));
    let f = fixture_with("file", vec![lamp(), FakeReply::text("Not done.")], options).await;
    let id = f.new_session().await;
    let mut stream = f.turn(&id, "turn on the lamp", "terminal").await;
    let approval = until_approval(&mut stream).await;
    // Nobody answers: the deadline refuses the call and the turn goes on to its end.
    let rest = drain(&mut stream).await;
    let call = rest
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(call.status, taud::gate::ToolCallStatus::Refused, "{call:?}");
    assert_eq!(ended_text(&rest), "Not done.");
    let stored = f.core.read_events(&id).await.unwrap();
    let statuses: Vec<_> = stored
        .iter()
        .filter(|e| e["type"] == "approval" && e["approval_id"] == approval.as_str())
        .map(|e| e["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        statuses,
        vec![
            "pending".to_owned(),
            ApprovalOutcome::Timeout.as_str().to_owned()
        ]
    );
    assert!(f.core.list_pending(None).unwrap().is_empty());
}
