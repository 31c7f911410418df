//! `tau ask` against a scripted hub (a `tau.v1.Tau` server in this test process, on the socket
//! where `tau ask` looks for the hub) that cuts the turn's stream off as lagging: `tau ask`
//! resumes with Subscribe after the right seq, on the turn's event stream and channel, prints
//! every event of its turn once, none of another turn, and decides with the new attachment. When
//! the hub cuts the stream off just before the decision arrives and refuses it as coming from the
//! cut-off attachment, `tau ask` resumes and sends the decision again with the new attachment.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tau_api::proto::v1::{self as pb, session_event::Kind, tau_server};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
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
    /// The turn asks its approval at once; the stream is cut off when the first decision
    /// arrives, which is refused as cut off; the turn goes on on the resumed stream.
    cut_at_decision: bool,
    /// The live streams of `cut_at_decision`.
    live: Mutex<Live>,
}

#[derive(Default)]
struct Live {
    turn: Option<mpsc::Sender<Result<pb::StartTurnResponse, Status>>>,
    resumed: Option<mpsc::Sender<Result<pb::SubscribeResponse, Status>>>,
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

fn approval_requested(seq: u64) -> pb::SessionEvent {
    let approval = pb::PendingApproval {
        approval_id: "apr-1".into(),
        session_id: SESSION.into(),
        turn_id: "turn-1".into(),
        channel: "cli".into(),
        tool: "demo_physical_action".into(),
        tier: pb::Tier::Physical as i32,
        ..Default::default()
    };
    event(
        seq,
        "turn-1",
        Kind::ApprovalRequested(pb::ApprovalRequested {
            approval: Some(approval),
        }),
    )
}

fn ended(seq: u64) -> pb::SessionEvent {
    event(
        seq,
        "turn-1",
        Kind::TurnEnded(pb::TurnEnded {
            stop_reason: "end_turn".into(),
            text: "Hello".into(),
            ..Default::default()
        }),
    )
}

fn rejected(seq: u64) -> pb::SessionEvent {
    event(
        seq,
        "turn-1",
        Kind::ApprovalResolved(pb::ApprovalResolved {
            approval_id: "apr-1".into(),
            resolution: pb::ApprovalResolution::Rejected as i32,
            ..Default::default()
        }),
    )
}

fn cut_off(trailer: Option<&str>) -> Status {
    let mut cut = Status::resource_exhausted("lagged; resume with after_seq = 4");
    if let Some(trailer) = trailer {
        cut.metadata_mut()
            .insert("tau-resume-after-seq", trailer.parse().unwrap());
    }
    cut
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
        if self.cut_at_decision {
            let (sender, receiver) = mpsc::channel(16);
            let messages = [
                K::Accepted(accepted),
                K::Event(event(
                    1,
                    "turn-1",
                    Kind::TurnStarted(pb::TurnStarted { turn: Some(turn) }),
                )),
                K::Event(approval_requested(2)),
            ];
            for kind in messages {
                sender
                    .try_send(Ok(pb::StartTurnResponse { kind: Some(kind) }))
                    .unwrap();
            }
            self.live.lock().unwrap().turn = Some(sender);
            return Ok(Response::new(Box::pin(ReceiverStream::new(receiver))));
        }
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
        messages.push(Err(cut_off(self.trailer)));
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
        if self.cut_at_decision {
            let (sender, receiver) = mpsc::channel(16);
            let snapshot = K::Snapshot(pb::SessionSnapshot {
                last_seq: 2,
                attachment_id: "att-2".into(),
                stream_id: "stream-a".into(),
                ..Default::default()
            });
            sender
                .try_send(Ok(pb::SubscribeResponse {
                    kind: Some(snapshot),
                }))
                .unwrap();
            // The rest of the turn waits for the decision.
            self.live.lock().unwrap().resumed = Some(sender);
            return Ok(Response::new(Box::pin(ReceiverStream::new(receiver))));
        }
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
            K::Event(approval_requested(6)),
            K::Event(rejected(7)),
            K::Event(ended(8)),
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

    type WatchApprovalsStream = Boxed<pb::PendingApproval>;

    async fn watch_approvals(
        &self,
        _: Request<pb::WatchApprovalsRequest>,
    ) -> Result<Response<Self::WatchApprovalsStream>, Status> {
        unscripted()
    }

    async fn decide_approval(
        &self,
        request: Request<pb::DecideApprovalRequest>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        let request = request.into_inner();
        let attachment = request.attachment_id.clone();
        let count = {
            let mut seen = self.seen.lock().unwrap();
            seen.decisions.push(request);
            seen.decisions.len()
        };
        if self.cut_at_decision {
            let mut live = self.live.lock().unwrap();
            if count == 1 {
                // Cut off first, then refused as coming from the cut-off attachment.
                let turn = live.turn.take().unwrap();
                turn.try_send(Err(cut_off(Some("2")))).unwrap();
                let mut status = Status::failed_precondition(format!(
                    "attachment {attachment:?} was cut off for falling behind"
                ));
                tau_api::error_marks::mark_cut_off(&mut status);
                return Err(status);
            }
            let resumed = live.resumed.take().unwrap();
            for event in [rejected(3), ended(4)] {
                let kind = pb::subscribe_response::Kind::Event(event);
                resumed
                    .try_send(Ok(pb::SubscribeResponse { kind: Some(kind) }))
                    .unwrap();
            }
        }
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

    async fn get_usage(
        &self,
        _: Request<pb::GetUsageRequest>,
    ) -> Result<Response<pb::GetUsageResponse>, Status> {
        unscripted()
    }

    async fn list_routines(
        &self,
        _: Request<pb::ListRoutinesRequest>,
    ) -> Result<Response<pb::ListRoutinesResponse>, Status> {
        unscripted()
    }

    async fn add_routine(
        &self,
        _: Request<pb::AddRoutineRequest>,
    ) -> Result<Response<pb::AddRoutineResponse>, Status> {
        unscripted()
    }

    async fn remove_routine(
        &self,
        _: Request<pb::RemoveRoutineRequest>,
    ) -> Result<Response<pb::RemoveRoutineResponse>, Status> {
        unscripted()
    }

    async fn pause_routine(
        &self,
        _: Request<pb::PauseRoutineRequest>,
    ) -> Result<Response<pb::PauseRoutineResponse>, Status> {
        unscripted()
    }

    async fn resume_routine(
        &self,
        _: Request<pb::ResumeRoutineRequest>,
    ) -> Result<Response<pb::ResumeRoutineResponse>, Status> {
        unscripted()
    }

    async fn run_routine(
        &self,
        _: Request<pb::RunRoutineRequest>,
    ) -> Result<Response<pb::RunRoutineResponse>, Status> {
        unscripted()
    }

    async fn routine_history(
        &self,
        _: Request<pb::RoutineHistoryRequest>,
    ) -> Result<Response<pb::RoutineHistoryResponse>, Status> {
        unscripted()
    }
}

/// Runs `tau ask <args>` against the scripted hub, which must succeed; returns its stdout and what
/// the hub saw.
fn ask(trailer: Option<&'static str>, args: &[&str]) -> (String, Arc<Mutex<Seen>>) {
    run_ask(trailer, false, args)
}

/// Runs `tau ask <args>` against the scripted hub (cutting the stream off at the first decision
/// when `cut_at_decision`), which must succeed; returns its stdout and what the hub saw.
fn run_ask(
    trailer: Option<&'static str>,
    cut_at_decision: bool,
    args: &[&str],
) -> (String, Arc<Mutex<Seen>>) {
    let root = tempfile::tempdir().unwrap();
    let hub_dir = root.path().join("data/hub");
    std::fs::create_dir_all(&hub_dir).unwrap();
    std::fs::create_dir_all(root.path().join("home")).unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let hub = ScriptedHub {
        trailer,
        seen: Arc::clone(&seen),
        cut_at_decision,
        live: Mutex::new(Live::default()),
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

#[test]
fn a_decision_refused_as_cut_off_is_sent_again_with_the_resumed_attachment() {
    let (stdout, seen) = run_ask(None, true, &["--json", "hi"]);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<u64> = lines[1..]
        .iter()
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 4], "{stdout}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.subscribes.len(), 1);
    assert_eq!(seen.subscribes[0].after_seq, Some(2));
    let decisions: Vec<(&str, &str, i32)> = seen
        .decisions
        .iter()
        .map(|d| (d.approval_id.as_str(), d.attachment_id.as_str(), d.decision))
        .collect();
    let rejected = pb::ApprovalDecision::Rejected as i32;
    assert_eq!(
        decisions,
        vec![("apr-1", "att-1", rejected), ("apr-1", "att-2", rejected)],
        "refused with the cut-off attachment, then sent again with the resumed one"
    );
}
