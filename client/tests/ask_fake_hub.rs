//! `tau ask` against a scripted hub (a `tau.v1.Tau` server in this test process, on the socket
//! where `tau ask` looks for the hub) that cuts the turn's stream off as lagging: `tau ask`
//! resumes with Subscribe after the right seq, on the turn's event stream and channel, prints
//! every event of its turn once, none of another turn, and decides with the new attachment.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tau_api::proto::v1::{self as pb, session_event::Kind, tau_server};
use tokio_stream::Stream;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

const SESSION: &str = "20261130-010203-abcd";

type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// What the scripted hub was asked.
#[derive(Default)]
struct Seen {
    subscribes: Vec<pb::SubscribeRequest>,
    decisions: Vec<pb::DecideApprovalRequest>,
}

struct ScriptedHub {
    /// The trailer the cut-off carries (`None`: no trailer).
    trailer: Option<&'static str>,
    seen: Arc<Mutex<Seen>>,
}

fn event(seq: u64, turn_id: &str, kind: Kind) -> pb::SessionEvent {
    pb::SessionEvent {
        seq,
        session_id: SESSION.into(),
        turn_id: turn_id.into(),
        at: "2026-11-30T01:02:03Z".into(),
        kind: Some(kind),
    }
}

fn delta(seq: u64, turn_id: &str, text: &str) -> pb::SessionEvent {
    event(
        seq,
        turn_id,
        Kind::TextDelta(pb::TextDelta { text: text.into() }),
    )
}

fn unscripted<T>() -> Result<T, Status> {
    Err(Status::unimplemented("not scripted"))
}

#[tonic::async_trait]
impl tau_server::Tau for ScriptedHub {
    async fn get_status(
        &self,
        _: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        unscripted()
    }

    async fn list_sessions(
        &self,
        _: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        unscripted()
    }

    async fn get_session(
        &self,
        _: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        unscripted()
    }

    async fn open_session(
        &self,
        _: Request<pb::OpenSessionRequest>,
    ) -> Result<Response<pb::OpenSessionResponse>, Status> {
        Ok(Response::new(pb::OpenSessionResponse {
            session: Some(pb::SessionInfo {
                session_id: SESSION.into(),
                channel: "cli".into(),
                role: "brain".into(),
                ..Default::default()
            }),
            resumed: false,
            role: "brain".into(),
        }))
    }

    async fn compact_session(
        &self,
        _: Request<pb::CompactSessionRequest>,
    ) -> Result<Response<pb::CompactSessionResponse>, Status> {
        unscripted()
    }

    async fn switch_role(
        &self,
        _: Request<pb::SwitchRoleRequest>,
    ) -> Result<Response<pb::SwitchRoleResponse>, Status> {
        unscripted()
    }

    async fn read_events(
        &self,
        _: Request<pb::ReadEventsRequest>,
    ) -> Result<Response<pb::ReadEventsResponse>, Status> {
        unscripted()
    }

    type StartTurnStream = Boxed<pb::StartTurnResponse>;

    /// Accepted, three events of the turn, then the cut-off.
    async fn start_turn(
        &self,
        _: Request<pb::StartTurnRequest>,
    ) -> Result<Response<Self::StartTurnStream>, Status> {
        use pb::start_turn_response::Kind as K;
        let accepted = pb::TurnAccepted {
            session_id: SESSION.into(),
            turn_id: "turn-1".into(),
            attachment_id: "att-1".into(),
            stream_id: "stream-a".into(),
            ..Default::default()
        };
        let turn = pb::TurnInfo {
            turn_id: "turn-1".into(),
            channel: "cli".into(),
            text: "hi".into(),
            accepted_at: "2026-11-30T01:02:03Z".into(),
        };
        let mut messages: Vec<Result<pb::StartTurnResponse, Status>> = vec![
            K::Accepted(accepted),
            K::Event(event(
                1,
                "turn-1",
                Kind::TurnQueued(pb::TurnQueued {
                    turn: Some(turn.clone()),
                    ahead: 0,
                }),
            )),
            K::Event(event(
                2,
                "turn-1",
                Kind::TurnStarted(pb::TurnStarted { turn: Some(turn) }),
            )),
            K::Event(delta(3, "turn-1", "Hel")),
        ]
        .into_iter()
        .map(|kind| Ok(pb::StartTurnResponse { kind: Some(kind) }))
        .collect();
        let mut cut = Status::resource_exhausted("lagged; resume with after_seq = 4");
        if let Some(trailer) = self.trailer {
            cut.metadata_mut()
                .insert("tau-resume-after-seq", trailer.parse().unwrap());
        }
        messages.push(Err(cut));
        Ok(Response::new(Box::pin(tokio_stream::iter(messages))))
    }

    async fn cancel_turn(
        &self,
        _: Request<pb::CancelTurnRequest>,
    ) -> Result<Response<pb::CancelTurnResponse>, Status> {
        unscripted()
    }

    type SubscribeStream = Boxed<pb::SubscribeResponse>;

    /// A snapshot, an event already seen (a hub may replay one too many), one of another turn,
    /// then the rest of the turn with an approval.
    async fn subscribe(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        use pb::subscribe_response::Kind as K;
        self.seen
            .lock()
            .unwrap()
            .subscribes
            .push(request.into_inner());
        let approval = pb::PendingApproval {
            approval_id: "apr-1".into(),
            session_id: SESSION.into(),
            turn_id: "turn-1".into(),
            channel: "cli".into(),
            tool: "demo_physical_action".into(),
            tier: 2,
            ..Default::default()
        };
        let messages: Vec<Result<pb::SubscribeResponse, Status>> = vec![
            K::Snapshot(pb::SessionSnapshot {
                last_seq: 8,
                attachment_id: "att-2".into(),
                stream_id: "stream-a".into(),
                ..Default::default()
            }),
            K::Event(delta(3, "turn-1", "Hel")),
            K::Event(delta(4, "turn-0", "another turn")),
            K::Event(delta(5, "turn-1", "lo")),
            K::Event(event(
                6,
                "turn-1",
                Kind::ApprovalRequested(pb::ApprovalRequested {
                    approval: Some(approval),
                }),
            )),
            K::Event(event(
                7,
                "turn-1",
                Kind::ApprovalResolved(pb::ApprovalResolved {
                    approval_id: "apr-1".into(),
                    resolution: pb::ApprovalResolution::Rejected as i32,
                    ..Default::default()
                }),
            )),
            K::Event(event(
                8,
                "turn-1",
                Kind::TurnEnded(pb::TurnEnded {
                    stop_reason: "end_turn".into(),
                    text: "Hello".into(),
                    ..Default::default()
                }),
            )),
        ]
        .into_iter()
        .map(|kind| Ok(pb::SubscribeResponse { kind: Some(kind) }))
        .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(messages))))
    }

    async fn list_pending_approvals(
        &self,
        _: Request<pb::ListPendingApprovalsRequest>,
    ) -> Result<Response<pb::ListPendingApprovalsResponse>, Status> {
        unscripted()
    }

    async fn decide_approval(
        &self,
        request: Request<pb::DecideApprovalRequest>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        self.seen
            .lock()
            .unwrap()
            .decisions
            .push(request.into_inner());
        Ok(Response::new(pb::DecideApprovalResponse {
            outcome: pb::DecideOutcome::Applied as i32,
            resolution: pb::ApprovalResolution::Rejected as i32,
        }))
    }

    async fn list_tools(
        &self,
        _: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        unscripted()
    }

    async fn list_model_roles(
        &self,
        _: Request<pb::ListModelRolesRequest>,
    ) -> Result<Response<pb::ListModelRolesResponse>, Status> {
        unscripted()
    }
}

/// Runs `tau ask <args>` against the scripted hub, which must succeed; returns its stdout and what
/// the hub saw.
fn ask(trailer: Option<&'static str>, args: &[&str]) -> (String, Arc<Mutex<Seen>>) {
    let root = tempfile::tempdir().unwrap();
    let hub_dir = root.path().join("data/hub");
    std::fs::create_dir_all(&hub_dir).unwrap();
    std::fs::create_dir_all(root.path().join("home")).unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let hub = ScriptedHub {
        trailer,
        seen: Arc::clone(&seen),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = {
        let _guard = runtime.enter();
        tokio::net::UnixListener::bind(hub_dir.join("taud.sock")).unwrap()
    };
    runtime.spawn(
        tonic::transport::Server::builder()
            .add_service(tau_server::TauServer::new(hub))
            .serve_with_incoming(UnixListenerStream::new(listener)),
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tau"))
        .arg("ask")
        .args(args)
        .env_clear()
        .env("HOME", root.path())
        .env("TAU_HOME", root.path().join("home"))
        .env("TAU_DATA_DIR", root.path().join("data"))
        .current_dir(root.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    (stdout, seen)
}

#[test]
fn a_cut_off_turn_stream_resumes_after_the_trailer_seq_and_prints_each_event_once() {
    let (stdout, seen) = ask(Some("4"), &["--json", "hi"]);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "accepted");
    let seqs: Vec<u64> = lines[1..]
        .iter()
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 5, 6, 7, 8], "{stdout}");
    assert!(!stdout.contains("another turn"), "{stdout}");
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.subscribes,
        vec![pb::SubscribeRequest {
            session_id: SESSION.into(),
            after_seq: Some(4),
            channel: "cli".into(),
            stream_id: "stream-a".into(),
        }]
    );
    assert_eq!(seen.decisions.len(), 1);
    assert_eq!(seen.decisions[0].approval_id, "apr-1");
    assert_eq!(
        seen.decisions[0].attachment_id, "att-2",
        "decided with the attachment of the resumed stream"
    );
}

#[test]
fn without_a_trailer_it_resumes_after_the_last_seq_it_printed() {
    let (stdout, seen) = ask(None, &["hi"]);
    assert_eq!(stdout, "Hello\n");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.subscribes.len(), 1);
    assert_eq!(seen.subscribes[0].after_seq, Some(3));
}
