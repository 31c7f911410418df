//! The wire API against the real `taud` binary (temporary TAU_HOME and TAU_DATA_DIR, a free port,
//! the offline demo model): turns over the Unix socket and over TCP with the token, approvals
//! decided through the API, a client dropped mid-turn, two subscribers, `after_seq` resumption,
//! duplicate decisions, unknown sessions, bad requests, auth refusals, and approvals expired by a
//! restart after a kill.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod hub_common;
use hub_common as common;

use common::{Install, tcp_channel, uds_channel, wait_for, with_token};
use nix::sys::signal::Signal;
use tau_api::proto::v1::{self as pb, session_event::Kind, tau_client::TauClient};
use tonic::transport::Channel;
use tonic::{Code, Streaming};

type Client = TauClient<Channel>;

async fn socket_client(install: &Install) -> Client {
    TauClient::new(uds_channel(&install.paths().socket).await)
}

fn token(install: &Install) -> String {
    std::fs::read_to_string(install.paths().token_file)
        .unwrap()
        .trim()
        .to_owned()
}

async fn new_session(client: &mut Client, channel: &str) -> String {
    client
        .open_session(pb::OpenSessionRequest {
            target: Some(pb::open_session_request::Target::NewSession(true)),
            channel: channel.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap()
        .session_id
}

fn turn(session_id: &str, text: &str, channel: &str) -> pb::StartTurnRequest {
    pb::StartTurnRequest {
        session_id: session_id.into(),
        text: text.into(),
        channel: channel.into(),
        idempotency_key: String::new(),
    }
}

/// The next message of a turn stream, with the deadline.
async fn next(stream: &mut Streaming<pb::StartTurnResponse>) -> Option<pb::StartTurnResponse> {
    tokio::time::timeout(common::DEADLINE, stream.message())
        .await
        .expect("a message in time")
        .expect("the stream is healthy")
}

/// Starts a turn; returns the stream and the attachment id from `accepted`.
async fn start(
    client: &mut Client,
    request: pb::StartTurnRequest,
) -> (Streaming<pb::StartTurnResponse>, pb::TurnAccepted) {
    let mut stream = client.start_turn(request).await.unwrap().into_inner();
    match next(&mut stream).await.and_then(|m| m.kind) {
        Some(pb::start_turn_response::Kind::Accepted(accepted)) => (stream, accepted),
        other => panic!("the first message is not `accepted`: {other:?}"),
    }
}

fn kind(message: pb::StartTurnResponse) -> Kind {
    match message.kind {
        Some(pb::start_turn_response::Kind::Event(event)) => event.kind.unwrap(),
        other => panic!("not an event: {other:?}"),
    }
}

/// Reads a turn's events to its end.
async fn rest(stream: &mut Streaming<pb::StartTurnResponse>) -> Vec<Kind> {
    let mut kinds = Vec::new();
    while let Some(message) = next(stream).await {
        kinds.push(kind(message));
    }
    kinds
}

async fn until_approval(stream: &mut Streaming<pb::StartTurnResponse>) -> pb::PendingApproval {
    loop {
        let message = next(stream).await.expect("an approval before the end");
        if let Kind::ApprovalRequested(requested) = kind(message) {
            return requested.approval.unwrap();
        }
    }
}

fn ended(kinds: &[Kind]) -> &pb::TurnEnded {
    match kinds.last() {
        Some(Kind::TurnEnded(end)) => end,
        other => panic!("the turn did not end: {other:?}"),
    }
}

fn tool_call(kinds: &[Kind]) -> &pb::ToolCallFinished {
    kinds
        .iter()
        .find_map(|k| match k {
            Kind::ToolCall(call) => Some(call),
            _ => None,
        })
        .expect("a tool call")
}

async fn decide(
    client: &mut Client,
    approval_id: &str,
    decision: pb::ApprovalDecision,
    attachment_id: &str,
) -> pb::DecideApprovalResponse {
    client
        .decide_approval(pb::DecideApprovalRequest {
            approval_id: approval_id.into(),
            decision: decision as i32,
            attachment_id: attachment_id.into(),
        })
        .await
        .unwrap()
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_tool_turns_over_the_unix_socket() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;

    let id = new_session(&mut client, "terminal").await;
    let (mut stream, accepted) = start(&mut client, turn(&id, "hello", "terminal")).await;
    assert_eq!(accepted.session_id, id);
    assert!(!accepted.attachment_id.is_empty());
    let kinds = rest(&mut stream).await;
    assert!(matches!(kinds[0], Kind::TurnQueued(_)), "{kinds:?}");
    assert!(matches!(kinds[1], Kind::TurnStarted(_)), "{kinds:?}");
    let end = ended(&kinds);
    assert_eq!(end.stop_reason, "end_turn");
    assert!(end.text.contains("You said: \"hello\""), "{}", end.text);

    let (mut stream, _) = start(&mut client, turn(&id, "what time is it?", "terminal")).await;
    let kinds = rest(&mut stream).await;
    let call = tool_call(&kinds);
    assert_eq!(call.tool, "current_time");
    assert_eq!(call.tier, pb::Tier::Read as i32);
    assert_eq!(call.status, pb::ToolCallStatus::Success as i32);
    assert_eq!(ended(&kinds).stop_reason, "end_turn");

    let session = client
        .get_session(pb::GetSessionRequest {
            session_id: id.clone(),
            include_messages: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(session.messages.len(), 6, "2 + 4 messages are stored");
    assert_eq!(session.session.unwrap().title, "hello");
    let status = client
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.session_backend, "file");
    assert_eq!(status.sessions_open, 1);
    assert!(status.tools.contains(&"demo_physical_action".to_owned()));
    let tools = client
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap()
        .into_inner();
    let physical = tools
        .tools
        .iter()
        .find(|t| t.name == "demo_physical_action")
        .unwrap();
    assert_eq!(physical.tier, pb::Tier::Physical as i32);
    let roles = client
        .list_model_roles(pb::ListModelRolesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(roles.default_role, "brain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_and_reject_over_tcp_with_the_token() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let token = token(&install);
    let mut client = TauClient::new(tcp_channel(install.port).await);
    let open = pb::OpenSessionRequest {
        target: Some(pb::open_session_request::Target::NewSession(true)),
        channel: "web".into(),
        ..Default::default()
    };
    let id = client
        .open_session(with_token(open, Some(&token)))
        .await
        .unwrap()
        .into_inner()
        .session
        .unwrap()
        .session_id;

    for (decision, status, approval) in [
        (
            pb::ApprovalDecision::Approved,
            pb::ToolCallStatus::Success,
            "approved",
        ),
        (
            pb::ApprovalDecision::Rejected,
            pb::ToolCallStatus::Refused,
            "rejected",
        ),
    ] {
        let request = with_token(turn(&id, "turn on the lamp", "web"), Some(&token));
        let mut stream = client.start_turn(request).await.unwrap().into_inner();
        let Some(pb::start_turn_response::Kind::Accepted(accepted)) =
            next(&mut stream).await.unwrap().kind
        else {
            panic!("no accepted");
        };
        let pending = until_approval(&mut stream).await;
        assert_eq!(pending.tool, "demo_physical_action");
        assert_eq!(pending.channel, "web");
        assert_eq!(pending.arguments, r#"{"action": "turn on the lamp"}"#);
        let request = pb::DecideApprovalRequest {
            approval_id: pending.approval_id.clone(),
            decision: decision as i32,
            attachment_id: accepted.attachment_id.clone(),
        };
        let first = client
            .decide_approval(with_token(request.clone(), Some(&token)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(first.outcome, pb::DecideOutcome::Applied as i32);
        let second = client
            .decide_approval(with_token(request, Some(&token)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(second.outcome, pb::DecideOutcome::AlreadyDecided as i32);
        let kinds = rest(&mut stream).await;
        let call = tool_call(&kinds);
        assert_eq!(
            (call.status, call.approval.as_str()),
            (status as i32, approval)
        );
        assert_eq!(ended(&kinds).stop_reason, "end_turn");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_dropped_mid_turn_leaves_the_turn_stored_and_its_approval_rejected() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let id = new_session(&mut client, "terminal").await;

    let mut watcher = socket_client(&install).await;
    let mut watch = watcher
        .subscribe(pb::SubscribeRequest {
            session_id: id.clone(),
            after_seq: None,
            channel: "observer".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let snapshot = watch.message().await.unwrap().unwrap();
    assert!(matches!(
        snapshot.kind,
        Some(pb::subscribe_response::Kind::Snapshot(_))
    ));

    {
        let mut starter = socket_client(&install).await;
        let (mut stream, _) = start(&mut starter, turn(&id, "turn on the lamp", "terminal")).await;
        let pending = until_approval(&mut stream).await;
        let listed = client
            .list_pending_approvals(pb::ListPendingApprovalsRequest {
                session_id: id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(listed.approvals[0].approval_id, pending.approval_id);
        // The starting client goes away, connection and all.
    }

    let mut resolution = None;
    loop {
        let message = tokio::time::timeout(common::DEADLINE, watch.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Some(pb::subscribe_response::Kind::Event(event)) = message.kind else {
            continue;
        };
        match event.kind.unwrap() {
            Kind::ApprovalResolved(resolved) => resolution = Some(resolved.resolution),
            Kind::TurnEnded(_) => break,
            _ => {}
        }
    }
    assert_eq!(
        resolution,
        Some(pb::ApprovalResolution::ChannelClosed as i32)
    );
    let session = client
        .get_session(pb::GetSessionRequest {
            session_id: id.clone(),
            include_messages: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        session.messages.len(),
        4,
        "prompt, tool call, refusal, reply"
    );
    let events = client
        .read_events(pb::ReadEventsRequest { session_id: id })
        .await
        .unwrap()
        .into_inner()
        .events;
    let types: Vec<&str> = events.iter().map(|e| e.r#type.as_str()).collect();
    assert_eq!(types, vec!["approval", "approval", "tool_call"]);
    assert!(
        events[1].json.contains("\"rejected\""),
        "{}",
        events[1].json
    );
    assert!(events[2].json.contains("\"refused\""), "{}", events[2].json);
}

async fn subscribe(
    client: &mut Client,
    id: &str,
    after_seq: Option<u64>,
) -> (Streaming<pb::SubscribeResponse>, pb::SessionSnapshot) {
    let mut stream = client
        .subscribe(pb::SubscribeRequest {
            session_id: id.into(),
            after_seq,
            channel: "terminal".into(),
        })
        .await
        .unwrap()
        .into_inner();
    match stream.message().await.unwrap().unwrap().kind {
        Some(pb::subscribe_response::Kind::Snapshot(snapshot)) => (stream, snapshot),
        other => panic!("no snapshot first: {other:?}"),
    }
}

async fn events_until_end(stream: &mut Streaming<pb::SubscribeResponse>) -> Vec<pb::SessionEvent> {
    let mut events = Vec::new();
    loop {
        let message = tokio::time::timeout(common::DEADLINE, stream.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Some(pb::subscribe_response::Kind::Event(event)) = message.kind else {
            panic!("a second snapshot");
        };
        let end = matches!(event.kind, Some(Kind::TurnEnded(_)));
        events.push(event);
        if end {
            return events;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subscribers_see_the_same_sequence_and_after_seq_resumes() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let id = new_session(&mut client, "terminal").await;
    let (mut one, snapshot) = subscribe(&mut socket_client(&install).await, &id, None).await;
    assert_eq!(snapshot.last_seq, 0);
    let (mut two, _) = subscribe(&mut socket_client(&install).await, &id, None).await;
    let (mut stream, _) = start(&mut client, turn(&id, "what time is it", "terminal")).await;
    rest(&mut stream).await;
    let a = events_until_end(&mut one).await;
    let b = events_until_end(&mut two).await;
    assert_eq!(a, b);
    let seqs: Vec<u64> = a.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());

    let (mut late, snapshot) = subscribe(&mut client, &id, Some(3)).await;
    assert_eq!(snapshot.last_seq, a.last().unwrap().seq);
    let replayed = events_until_end(&mut late).await;
    assert_eq!(replayed, a[3..].to_vec());

    let err = client
        .subscribe(pb::SubscribeRequest {
            session_id: id,
            after_seq: Some(1_000_000),
            channel: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
}

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
