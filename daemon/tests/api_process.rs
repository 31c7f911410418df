//! The wire API against the real `taud` binary (temporary TAU_HOME and TAU_DATA_DIR, a free port,
//! the offline demo model): turns over the Unix socket and over TCP with the token, approvals
//! decided through the API, a client dropped mid-turn, two subscribers and `after_seq` resumption,
//! a turn that creates its session, and its retry.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::api::*;
use support::process::{self as common, Install, tcp_channel, with_token};
use tau_api::proto::v1::{self as pb, session_event::Kind, tau_client::TauClient};
use tonic::Code;

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
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(session.messages.len(), 6, "2 + 4 messages are stored");
    assert_eq!(session.next_before_index, None, "no page, no cursor");
    assert_eq!(session.session.unwrap().title, "hello");
    // By the page: newest first, each response naming the next (older) page.
    let mut indexes = Vec::new();
    let mut before = None;
    loop {
        let page = client
            .get_session(pb::GetSessionRequest {
                session_id: id.clone(),
                page: Some(pb::MessagePage {
                    size: 4,
                    before_index: before,
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.session.unwrap().message_count, 6);
        indexes.extend(page.messages.iter().map(|m| m.index));
        before = page.next_before_index;
        if before.is_none() {
            break;
        }
    }
    assert_eq!(indexes, [5, 4, 3, 2, 1, 0]);
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

/// Every stored session, listed on channel `cli`.
async fn cli_sessions(client: &mut TauClient<tonic::transport::Channel>) -> Vec<pb::SessionInfo> {
    client
        .list_sessions(pb::ListSessionsRequest {
            channel: "cli".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .sessions
}

/// StartTurn's `new_session`, listed in GetStatus's features: one call creates the session, titled
/// from the text, and runs the turn in it; a request it refuses creates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_creates_its_session_over_the_unix_socket() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let sessions_dir = install.data.join("sessions");
    let stored = || {
        std::fs::read_dir(&sessions_dir).map_or(0, |dir| {
            dir.filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir()))
                .count()
        })
    };

    // The hub says it takes new_session, so a client can tell its refusals from an older hub's.
    let status = client
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.features, ["start_turn.new_session"]);

    let new_turn = |text: &str| pb::StartTurnRequest {
        new_session: true,
        ..turn("", text, "cli")
    };
    let (mut stream, accepted) = start(&mut client, new_turn("lamp  status")).await;
    let id = accepted.session_id;
    assert!(!id.is_empty(), "accepted names the new session");
    let kinds = rest(&mut stream).await;
    assert_eq!(ended(&kinds).stop_reason, "end_turn");
    let listed = cli_sessions(&mut client).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].session_id, id);
    assert_eq!(listed[0].title, "lamp status");
    assert_eq!(listed[0].channel, "cli");
    assert_eq!(listed[0].message_count, 2);
    assert_eq!(stored(), 1);

    // The session goes on like any other.
    let (mut stream, accepted) = start(&mut client, turn(&id, "and now?", "cli")).await;
    assert_eq!(accepted.session_id, id);
    assert_eq!(ended(&rest(&mut stream).await).stop_reason, "end_turn");

    // Refused before anything is made: a session named as well, a blank text.
    for (request, field) in [
        (
            pb::StartTurnRequest {
                new_session: true,
                ..turn(&id, "hello", "cli")
            },
            "session_id",
        ),
        (new_turn("   "), "text"),
    ] {
        let status = client.start_turn(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains(field), "{status:?}");
    }
    assert_eq!(stored(), 1, "a refused turn created no session");
}

/// A retried `new_session` turn with an idempotency key finds the session its first request made
/// and there its first turn: one session, the turn run once. The same key on another channel, or
/// another key, is another request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_new_session_turn_runs_once_in_one_session() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let keyed = |channel: &str, key: &str| pb::StartTurnRequest {
        new_session: true,
        idempotency_key: key.into(),
        ..turn("", "hello", channel)
    };

    let (mut stream, first) = start(&mut client, keyed("cli", "retry-1")).await;
    assert_eq!(ended(&rest(&mut stream).await).stop_reason, "end_turn");
    let (mut stream, again) = start(&mut client, keyed("cli", "retry-1")).await;
    assert_eq!(again.session_id, first.session_id, "the same session");
    assert_eq!(again.turn_id, first.turn_id, "the first turn, replayed");
    assert_eq!(ended(&rest(&mut stream).await).stop_reason, "end_turn");

    let (mut stream, other_channel) = start(&mut client, keyed("web", "retry-1")).await;
    rest(&mut stream).await;
    let (mut stream, other_key) = start(&mut client, keyed("cli", "retry-2")).await;
    rest(&mut stream).await;
    assert_ne!(other_channel.session_id, first.session_id);
    assert_ne!(other_key.session_id, first.session_id);

    let listed = cli_sessions(&mut client).await;
    assert_eq!(
        listed.len(),
        3,
        "three requests, three sessions: {listed:?}"
    );
    let retried = listed
        .iter()
        .find(|s| s.session_id == first.session_id)
        .unwrap();
    assert_eq!(retried.message_count, 2, "the turn ran once");
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
            stream_id: String::new(),
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
            ..Default::default()
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
            stream_id: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_seq_from_before_a_restart_is_refused_by_stream_id() {
    let install = Install::new();
    let mut hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let id = new_session(&mut client, "terminal").await;
    let (_watch, snapshot) = subscribe(&mut socket_client(&install).await, &id, None).await;
    let old_stream = snapshot.stream_id.clone();
    assert!(!old_stream.is_empty());
    let (mut stream, accepted) = start(&mut client, turn(&id, "hello", "terminal")).await;
    assert_eq!(accepted.stream_id, old_stream, "one numbering per hub");
    rest(&mut stream).await;
    // Resuming in the same hub with its stream id works.
    let (_same, again) = subscribe_in_stream(&mut client, &id, Some(1), &old_stream)
        .await
        .unwrap();
    assert_eq!(again.stream_id, old_stream);
    drop((_watch, _same, client));

    hub.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(hub.wait_exit().success());
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    // The new hub numbers this session's events from 1 again: after a turn, seq 1 exists but
    // is another event than the one the client saw.
    let (mut stream, accepted) = start(&mut client, turn(&id, "again", "terminal")).await;
    assert_ne!(accepted.stream_id, old_stream, "a new hub, a new numbering");
    rest(&mut stream).await;
    let err = subscribe_in_stream(&mut client, &id, Some(1), &old_stream)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
    assert!(err.message().contains("the hub restarted"), "{err}");
    assert!(err.message().contains("without after_seq"), "{err}");
    // Without after_seq (or with the current stream id) it attaches.
    let (_fresh, snapshot) = subscribe(&mut client, &id, None).await;
    assert_eq!(snapshot.stream_id, accepted.stream_id);
    assert!(
        subscribe_in_stream(&mut client, &id, Some(1), &accepted.stream_id)
            .await
            .is_ok()
    );
}
