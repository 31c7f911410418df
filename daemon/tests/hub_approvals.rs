//! Approvals through the in-process hub core: only an attachment that was shown an approval keeps
//! it pending or decides it, attachments are bounded, and a session is noted in the approval scan
//! mark before an approval is asked in it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::hub::*;
use taud::hub::{ApprovalAnswer, ApprovalOutcome, CoreError, DecideOutcome, EventKind};
use taud::testing::FakeReply;

#[tokio::test]
async fn a_queued_turn_neither_keeps_nor_decides_the_running_turns_approval() {
    let f = fixture(
        "file",
        vec![lamp(), FakeReply::text("no lamp"), FakeReply::text("b")],
    )
    .await;
    let id = f.new_session().await;
    let mut turn_a = f.turn(&id, "turn on the lamp", "terminal").await;
    let approval = until_approval(&mut turn_a).await;
    let turn_b = f.turn(&id, "then this", "terminal").await;
    assert_eq!(turn_b.accepted().queued_ahead, 1);
    // B's stream never showed A's approval: its decision does not count.
    let refused = f
        .core
        .decide(&approval, ApprovalAnswer::Approve, turn_b.attachment_id())
        .await
        .unwrap_err();
    assert!(
        matches!(refused, CoreError::FailedPrecondition(_)),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("never shown"), "{refused}");
    // A's client goes away: nobody that was shown the approval is left, so it ends rejected,
    // although B (same session and channel) is still attached.
    drop(turn_a);
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while f.core.registry().resolution_of(&approval).is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "A's approval stayed pending"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(
        f.core.registry().resolution_of(&approval),
        Some(ApprovalOutcome::ChannelClosed)
    );
    let mut turn_b = turn_b;
    let events = drain(&mut turn_b).await;
    assert_eq!(ended_text(&events), "b", "B ran after A");
}

#[tokio::test]
async fn a_subscriber_attached_while_an_approval_is_pending_may_decide_it() {
    let f = fixture("sqlite", vec![lamp(), FakeReply::text("done")]).await;
    let id = f.new_session().await;
    let mut turn = f.turn(&id, "turn on the lamp", "terminal").await;
    let approval = until_approval(&mut turn).await;
    let watcher = f.core.subscribe(&id, None, "terminal").await.unwrap();
    assert_eq!(watcher.snapshot().pending.len(), 1, "shown in its snapshot");
    drop(turn);
    assert_eq!(
        f.core.registry().resolution_of(&approval),
        None,
        "still shown"
    );
    assert_eq!(
        f.core
            .decide(
                &approval,
                ApprovalAnswer::Approve,
                &watcher.snapshot().attachment_id
            )
            .await
            .unwrap(),
        DecideOutcome::Applied(ApprovalOutcome::Approved)
    );
}

#[tokio::test]
async fn attachments_per_session_are_bounded_with_resource_exhausted() {
    let f = fixture("file", vec![]).await;
    let id = f.new_session().await;
    let mut streams = Vec::new();
    let refused = loop {
        match f.core.subscribe(&id, None, "terminal").await {
            Ok(stream) => streams.push(stream),
            Err(error) => break error,
        }
        assert!(streams.len() <= 10_000, "no bound");
    };
    assert!(
        matches!(refused, CoreError::ResourceExhausted(_)),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("too many clients"),
        "{refused}"
    );
    assert_eq!(
        streams.len(),
        taud::hub::approvals::attach::MAX_ATTACHMENTS_PER_SESSION
    );
    streams.pop();
    assert!(
        f.core.subscribe(&id, None, "terminal").await.is_ok(),
        "room again"
    );
}

#[tokio::test]
async fn a_session_is_noted_in_the_scan_mark_before_an_approval_is_asked_in_it() {
    let mut options = options();
    let dir = crate::support::temp::dir();
    let mark = dir.path().join("approval-scan.json");
    options.approval_scan_mark = Some(mark.clone());
    let f = fixture_with("file", vec![lamp(), FakeReply::text("ok")], options).await;
    let id = f.new_session().await;
    let marked = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&mark).unwrap()).unwrap()
    };
    assert_eq!(
        marked()["asked_in"],
        serde_json::json!([]),
        "written by the start-up scan"
    );
    let mut turn = f.turn(&id, "turn on the lamp", "terminal").await;
    let approval = until_approval(&mut turn).await;
    assert_eq!(marked()["asked_in"], serde_json::json!([id]));
    f.core
        .decide(&approval, ApprovalAnswer::Reject, turn.attachment_id())
        .await
        .unwrap();
    let events = drain(&mut turn).await;
    assert!(matches!(
        events.last().unwrap().kind,
        EventKind::TurnEnded(_)
    ));
}
