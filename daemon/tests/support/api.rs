//! Helpers of the wire API tests against the real `taud`: clients over the socket and TCP, turn
//! and subscription readers with deadlines, decisions.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use super::process as common;

use common::{Install, uds_channel};
use tau_api::proto::v1::{self as pb, session_event::Kind, tau_client::TauClient};
use tonic::Streaming;
use tonic::transport::Channel;

pub type Client = TauClient<Channel>;

pub async fn socket_client(install: &Install) -> Client {
    TauClient::new(uds_channel(&install.paths().socket).await)
}

pub fn token(install: &Install) -> String {
    std::fs::read_to_string(install.paths().token_file)
        .unwrap()
        .trim()
        .to_owned()
}

pub async fn new_session(client: &mut Client, channel: &str) -> String {
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

pub fn turn(session_id: &str, text: &str, channel: &str) -> pb::StartTurnRequest {
    pb::StartTurnRequest {
        session_id: session_id.into(),
        text: text.into(),
        channel: channel.into(),
        idempotency_key: String::new(),
        new_session: false,
    }
}

/// The next message of a turn stream, with the deadline.
pub async fn next(stream: &mut Streaming<pb::StartTurnResponse>) -> Option<pb::StartTurnResponse> {
    tokio::time::timeout(common::DEADLINE, stream.message())
        .await
        .expect("a message in time")
        .expect("the stream is healthy")
}

/// Starts a turn; returns the stream and the attachment id from `accepted`.
pub async fn start(
    client: &mut Client,
    request: pb::StartTurnRequest,
) -> (Streaming<pb::StartTurnResponse>, pb::TurnAccepted) {
    let mut stream = client.start_turn(request).await.unwrap().into_inner();
    match next(&mut stream).await.and_then(|m| m.kind) {
        Some(pb::start_turn_response::Kind::Accepted(accepted)) => (stream, accepted),
        other => panic!("the first message is not `accepted`: {other:?}"),
    }
}

pub fn kind(message: pb::StartTurnResponse) -> Kind {
    match message.kind {
        Some(pb::start_turn_response::Kind::Event(event)) => event.kind.unwrap(),
        other => panic!("not an event: {other:?}"),
    }
}

/// Reads a turn's events to its end.
pub async fn rest(stream: &mut Streaming<pb::StartTurnResponse>) -> Vec<Kind> {
    let mut kinds = Vec::new();
    while let Some(message) = next(stream).await {
        kinds.push(kind(message));
    }
    kinds
}

pub async fn until_approval(stream: &mut Streaming<pb::StartTurnResponse>) -> pb::PendingApproval {
    loop {
        let message = next(stream).await.expect("an approval before the end");
        if let Kind::ApprovalRequested(requested) = kind(message) {
            return requested.approval.unwrap();
        }
    }
}

pub fn ended(kinds: &[Kind]) -> &pb::TurnEnded {
    match kinds.last() {
        Some(Kind::TurnEnded(end)) => end,
        other => panic!("the turn did not end: {other:?}"),
    }
}

pub fn tool_call(kinds: &[Kind]) -> &pb::ToolCallFinished {
    kinds
        .iter()
        .find_map(|k| match k {
            Kind::ToolCall(call) => Some(call),
            _ => None,
        })
        .expect("a tool call")
}

pub async fn decide(
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

pub async fn subscribe(
    client: &mut Client,
    id: &str,
    after_seq: Option<u64>,
) -> (Streaming<pb::SubscribeResponse>, pb::SessionSnapshot) {
    let mut stream = client
        .subscribe(pb::SubscribeRequest {
            session_id: id.into(),
            after_seq,
            channel: "terminal".into(),
            stream_id: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    match stream.message().await.unwrap().unwrap().kind {
        Some(pb::subscribe_response::Kind::Snapshot(snapshot)) => (stream, snapshot),
        other => panic!("no snapshot first: {other:?}"),
    }
}

/// Subscribes on `terminal` resuming after `after_seq` of the stream `stream_id`; the refusal as is.
pub async fn subscribe_in_stream(
    client: &mut Client,
    id: &str,
    after_seq: Option<u64>,
    stream_id: &str,
) -> Result<(Streaming<pb::SubscribeResponse>, pb::SessionSnapshot), tonic::Status> {
    let mut stream = client
        .subscribe(pb::SubscribeRequest {
            session_id: id.into(),
            after_seq,
            channel: "terminal".into(),
            stream_id: stream_id.into(),
        })
        .await?
        .into_inner();
    match stream.message().await?.and_then(|m| m.kind) {
        Some(pb::subscribe_response::Kind::Snapshot(snapshot)) => Ok((stream, snapshot)),
        other => panic!("no snapshot first: {other:?}"),
    }
}

pub async fn events_until_end(
    stream: &mut Streaming<pb::SubscribeResponse>,
) -> Vec<pb::SessionEvent> {
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
