//! The wire API against the real `taud` binary: unknown sessions, bad requests and duplicate
//! decisions, over-long strings (each refused naming its field and limit), the token on every TCP
//! call, and approvals expired by a restart after a kill.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use nix::sys::signal::Signal;
use support::api::*;
use support::process::{Install, tcp_channel, wait_for, with_token};
use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_sessions_and_bad_requests_get_clear_statuses() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let unknown = "20990101-000000-beef";

    let err = client
        .start_turn(turn(unknown, "hi", "terminal"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    let err = client
        .get_session(pb::GetSessionRequest {
            session_id: unknown.into(),
            include_messages: false,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    let err = client
        .read_events(pb::ReadEventsRequest {
            session_id: "../../etc".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    let err = client
        .open_session(pb::OpenSessionRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");

    let id = new_session(&mut client, "terminal").await;
    let err = client
        .start_turn(turn(&id, "  ", "terminal"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    let (mut stream, accepted) =
        start(&mut client, turn(&id, "turn on the lamp", "terminal")).await;
    let pending = until_approval(&mut stream).await;
    let err = client
        .decide_approval(pb::DecideApprovalRequest {
            approval_id: pending.approval_id.clone(),
            decision: pb::ApprovalDecision::Unspecified as i32,
            attachment_id: accepted.attachment_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    let (_other, snapshot) = {
        let mut other = socket_client(&install).await;
        let mut stream = other
            .subscribe(pb::SubscribeRequest {
                session_id: id.clone(),
                after_seq: None,
                channel: "telegram".into(),
                stream_id: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let Some(pb::subscribe_response::Kind::Snapshot(snapshot)) =
            stream.message().await.unwrap().unwrap().kind
        else {
            panic!("no snapshot");
        };
        (stream, snapshot)
    };
    assert_eq!(
        snapshot.pending_approvals.len(),
        1,
        "the snapshot has every pending approval"
    );
    assert!(snapshot.running_turn.is_some());
    let err = client
        .decide_approval(pb::DecideApprovalRequest {
            approval_id: pending.approval_id.clone(),
            decision: pb::ApprovalDecision::Approved as i32,
            attachment_id: snapshot.attachment_id,
        })
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Code::FailedPrecondition,
        "another channel: {err}"
    );
    let missing = decide(
        &mut client,
        "apr-none",
        pb::ApprovalDecision::Approved,
        &accepted.attachment_id,
    )
    .await;
    assert_eq!(missing.outcome, pb::DecideOutcome::NotFound as i32);
    let applied = decide(
        &mut client,
        &pending.approval_id,
        pb::ApprovalDecision::Rejected,
        &accepted.attachment_id,
    )
    .await;
    assert_eq!(applied.outcome, pb::DecideOutcome::Applied as i32);
    rest(&mut stream).await;
    let err = client
        .switch_role(pb::SwitchRoleRequest {
            session_id: id.clone(),
            role: "nonexistent".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err}");
    let compacted = client
        .compact_session(pb::CompactSessionRequest {
            session_id: id.clone(),
            focus: "the lamp".into(),
            channel: "terminal".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(compacted.previous_session_id, id);
    assert_eq!(compacted.summarized_messages, 4);
    assert!(!compacted.summary.is_empty());
    let new = compacted.session.unwrap();
    assert_eq!(
        (new.compacted_from.as_str(), new.message_count),
        (id.as_str(), 2)
    );
    let old = client
        .get_session(pb::GetSessionRequest {
            session_id: id,
            include_messages: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap();
    assert_eq!(old.compacted_to, new.session_id);
    assert_eq!(old.message_count, 4, "the old session keeps every message");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_over_tcp_needs_the_token() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = TauClient::new(tcp_channel(install.port).await);
    for token in [None, Some("not-the-token")] {
        let err = client
            .list_sessions(with_token(pb::ListSessionsRequest::default(), token))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{token:?}: {err}");
        let err = client
            .start_turn(with_token(turn("20990101-000000-beef", "hi", "x"), token))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{token:?}: {err}");
        let err = client
            .subscribe(with_token(
                pb::SubscribeRequest {
                    session_id: "20990101-000000-beef".into(),
                    after_seq: None,
                    channel: String::new(),
                    stream_id: String::new(),
                },
                token,
            ))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{token:?}: {err}");
    }
    let token = token(&install);
    let listed = client
        .list_sessions(with_token(pb::ListSessionsRequest::default(), Some(&token)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.backend, "file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_hub_leaves_its_pending_approval_expired_on_restart() {
    let install =
        Install::with_config("[hub]\nheartbeat_seconds = 1\n[sessions]\nbackend = \"sqlite\"\n");
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let id = new_session(&mut client, "terminal").await;
    let (mut stream, _) = start(&mut client, turn(&id, "turn on the lamp", "terminal")).await;
    let pending = until_approval(&mut stream).await;
    hub.signal(Signal::SIGKILL);
    drop(stream);
    drop(client);
    drop(hub);

    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let events = client
        .read_events(pb::ReadEventsRequest {
            session_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .events;
    let last: serde_json::Value = serde_json::from_str(&events.last().unwrap().json).unwrap();
    assert_eq!(last["status"], "expired_by_restart");
    assert_eq!(last["approval_id"], pending.approval_id.as_str());
    let listed = client
        .list_pending_approvals(pb::ListPendingApprovalsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(listed.approvals.is_empty());
    let (_watch, snapshot) = subscribe(&mut client, &id, None).await;
    let outcome = decide(
        &mut client,
        &pending.approval_id,
        pb::ApprovalDecision::Approved,
        &snapshot.attachment_id,
    )
    .await;
    assert_eq!(outcome.outcome, pb::DecideOutcome::Expired as i32);
    assert_eq!(
        outcome.resolution,
        pb::ApprovalResolution::ExpiredByRestart as i32
    );
    let log = wait_for("the expiry in the log", || {
        let text = std::fs::read_to_string(install.data.join("logs/tau.log")).ok()?;
        text.contains("approval expired by restart").then_some(text)
    });
    assert!(log.contains(&pending.approval_id), "{log}");
    // The tool never ran: no tool_call record exists for it.
    assert!(!events.iter().any(|e| e.r#type == "tool_call"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_keys_and_channels_are_refused_naming_the_field_and_limit() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let id = new_session(&mut client, "terminal").await;

    let mut request = turn(&id, "hi", "terminal");
    request.idempotency_key = "k".repeat(129);
    let err = client.start_turn(request.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(
        err.message().contains("idempotency_key") && err.message().contains("128"),
        "{err}"
    );
    // At the limit it is taken.
    request.idempotency_key = "k".repeat(128);
    let (mut stream, _) = start(&mut client, request).await;
    rest(&mut stream).await;

    let long = "c".repeat(65);
    let err = client.start_turn(turn(&id, "hi", &long)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(
        err.message().contains("channel") && err.message().contains("64"),
        "{err}"
    );
    let err = client
        .subscribe(pb::SubscribeRequest {
            session_id: id.clone(),
            after_seq: None,
            channel: long.clone(),
            stream_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(err.message().contains("channel"), "{err}");
    let err = client
        .open_session(pb::OpenSessionRequest {
            target: Some(pb::open_session_request::Target::NewSession(true)),
            channel: long,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    let (mut stream, _) = start(&mut client, turn(&id, "hi", &"c".repeat(64))).await;
    rest(&mut stream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_texts_roles_and_ids_are_refused_naming_the_field_and_limit() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let id = new_session(&mut client, "terminal").await;
    let refused = |err: tonic::Status, field: &str, limit: &str| {
        assert_eq!(err.code(), Code::InvalidArgument, "{field}: {err}");
        assert!(
            err.message().contains(field) && err.message().contains(limit),
            "{field}: {err}"
        );
    };

    let err = client
        .start_turn(turn(&id, &"t".repeat(100_001), "terminal"))
        .await
        .unwrap_err();
    refused(err, "text", "100000 characters");
    let err = client
        .compact_session(pb::CompactSessionRequest {
            session_id: id.clone(),
            focus: "f".repeat(4097),
            channel: "terminal".into(),
        })
        .await
        .unwrap_err();
    refused(err, "focus", "4096");
    let long_role = "r".repeat(65);
    let err = client
        .open_session(pb::OpenSessionRequest {
            target: Some(pb::open_session_request::Target::NewSession(true)),
            role: long_role.clone(),
            channel: "terminal".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    refused(err, "role", "64");
    let err = client
        .switch_role(pb::SwitchRoleRequest {
            session_id: id.clone(),
            role: long_role,
        })
        .await
        .unwrap_err();
    refused(err, "role", "64");
    let long_id = "i".repeat(129);
    let err = client
        .list_sessions(pb::ListSessionsRequest {
            exclude_session_id: long_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    refused(err, "exclude_session_id", "128");
    let err = client
        .decide_approval(pb::DecideApprovalRequest {
            approval_id: long_id.clone(),
            decision: pb::ApprovalDecision::Approved as i32,
            attachment_id: "att-1".into(),
        })
        .await
        .unwrap_err();
    refused(err, "approval_id", "128");
    let err = client
        .decide_approval(pb::DecideApprovalRequest {
            approval_id: "apr-1".into(),
            decision: pb::ApprovalDecision::Approved as i32,
            attachment_id: long_id.clone(),
        })
        .await
        .unwrap_err();
    refused(err, "attachment_id", "128");
    let err = client
        .cancel_turn(pb::CancelTurnRequest {
            session_id: id.clone(),
            turn_id: long_id.clone(),
        })
        .await
        .unwrap_err();
    refused(err, "turn_id", "128");
    let err = client
        .subscribe(pb::SubscribeRequest {
            session_id: id.clone(),
            after_seq: Some(0),
            channel: "terminal".into(),
            stream_id: long_id,
        })
        .await
        .unwrap_err();
    refused(err, "stream_id", "128");
    // Within the limits the same calls get past the checks.
    let err = client
        .compact_session(pb::CompactSessionRequest {
            session_id: id.clone(),
            focus: "f".repeat(4096),
            channel: "terminal".into(),
        })
        .await
        .unwrap_err();
    assert_ne!(err.code(), Code::InvalidArgument, "{err}");
    let err = client
        .switch_role(pb::SwitchRoleRequest {
            session_id: id.clone(),
            role: "r".repeat(64),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "an unknown role: {err}");
}
