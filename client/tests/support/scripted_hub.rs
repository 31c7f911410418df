//! The scripted hub of the `tau chat` tests: a `tau.v1.Tau` server in the test process, on the
//! socket where `tau chat` looks for the hub, whose turns the test feeds event by event (and may
//! cut off as lagging, then feed on the Subscribe that resumes them; it may refuse the first
//! decision as coming from a cut-off attachment), and the fixture that runs the real `tau` on a
//! pseudo-terminal against it.
//!
//! Invariant: everything lives under one temporary directory (home, TAU_HOME, TAU_DATA_DIR, the
//! socket); nothing touches the real home or the network.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc as std_mpsc};
use std::time::Duration;

use rexpect::session::PtySession;
use tau_api::error_marks;
use tau_api::proto::v1::{self as pb, open_session_request, start_turn_response, tau_server};
use tokio::sync::{Notify, mpsc};
use tokio_stream::Stream;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tonic::{Request, Response, Status};

#[path = "stored_session.rs"]
mod stored_session;

pub type EventSender = mpsc::Sender<Result<pb::StartTurnResponse, Status>>;

pub type SubscribeSender = mpsc::Sender<Result<pb::SubscribeResponse, Status>>;

/// What the scripted hub tells the test.
pub struct Notices {
    pub turns: std_mpsc::Receiver<(pb::StartTurnRequest, EventSender)>,
    pub cancels: std_mpsc::Receiver<pb::CancelTurnRequest>,
    pub decisions: std_mpsc::Receiver<pb::DecideApprovalRequest>,
    pub opens: std_mpsc::Receiver<pb::OpenSessionRequest>,
    pub subscribes: std_mpsc::Receiver<(pb::SubscribeRequest, SubscribeSender)>,
    /// Lets the refusal of a [`Script::cut_off_first_decision`] go out.
    pub refusal: Arc<Notify>,
    /// How many `GetStatus` calls the hub answered.
    pub statuses: Arc<AtomicUsize>,
}

pub struct ScriptedHub {
    pub turns: std_mpsc::Sender<(pb::StartTurnRequest, EventSender)>,
    pub cancels: std_mpsc::Sender<pb::CancelTurnRequest>,
    pub decisions: std_mpsc::Sender<pb::DecideApprovalRequest>,
    pub opens: std_mpsc::Sender<pb::OpenSessionRequest>,
    pub subscribes: std_mpsc::Sender<(pb::SubscribeRequest, SubscribeSender)>,
    pub script: Script,
    /// Released by the test: the held first decision is refused.
    pub refusal: Arc<Notify>,
    /// Whether the first decision was refused already.
    pub refused_one: AtomicBool,
    pub statuses: Arc<AtomicUsize>,
}

/// An earlier session that was recorded under `[agent] context = "summarize"`: opening it fails.
pub const MISMATCHED: &str = "20261129-000000-beef";

/// An earlier session that opens.
pub const EARLIER: &str = "20261128-101010-cafe";

/// How the scripted hub answers the calls a test wants to go wrong.
#[derive(Clone, Copy, Default)]
pub struct Script {
    /// `ListSessions` and `CompactSession` never answer.
    pub stall: bool,
    /// `OpenSession` never answers.
    pub stall_open: bool,
    /// `StartTurn` never answers.
    pub stall_start: bool,
    /// The first `DecideApproval` is held until the test releases [`Notices::refusal`], then
    /// refused as coming from an attachment cut off for lagging (marked `cut-off`).
    pub cut_off_first_decision: bool,
    /// A resumed session has a stored conversation whose turns stopped and repaired.
    pub stored_stops: bool,
    /// `StartTurn` without a session (a new one's) is refused: INVALID_ARGUMENT with this message
    /// (`session_id is empty` is how a hub older than `new_session` refuses it).
    pub refuse_new_session: Option<&'static str>,
    /// What `GetStatus` lists as the hub's features (none: a hub older than the list).
    pub features: &'static [&'static str],
}

pub fn session() -> pb::SessionInfo {
    pb::SessionInfo {
        session_id: "20261130-010203-abcd".into(),
        channel: "terminal".into(),
        role: "brain".into(),
        message_count: 4,
        ..Default::default()
    }
}

impl ScriptedHub {
    pub async fn stall_if_scripted(&self) {
        if self.script.stall {
            std::future::pending::<()>().await;
        }
    }
}

#[tonic::async_trait]
impl tau_server::Tau for ScriptedHub {
    async fn get_status(
        &self,
        _: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        self.statuses.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(pb::GetStatusResponse {
            version: "9.9.9".into(),
            profile: "home".into(),
            features: self.script.features.iter().map(|&f| f.into()).collect(),
            ..Default::default()
        }))
    }

    async fn list_sessions(
        &self,
        _: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        self.stall_if_scripted().await;
        Ok(Response::new(pb::ListSessionsResponse::default()))
    }

    async fn get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::GetSessionResponse>, Status> {
        let request = request.into_inner();
        let stored = self.script.stored_stops && request.include_messages;
        Ok(Response::new(pb::GetSessionResponse {
            session: Some(pb::SessionInfo {
                session_id: request.session_id,
                ..session()
            }),
            messages: stored.then(stored_session::messages).unwrap_or_default(),
            ..Default::default()
        }))
    }

    async fn open_session(
        &self,
        request: Request<pb::OpenSessionRequest>,
    ) -> Result<Response<pb::OpenSessionResponse>, Status> {
        let request = request.into_inner();
        self.opens
            .send(request.clone())
            .map_err(|_| Status::unavailable("test gone"))?;
        if self.script.stall_open {
            std::future::pending::<()>().await;
        }
        let id = match request.target {
            Some(open_session_request::Target::SessionId(id)) if id == MISMATCHED => {
                let mut status = Status::failed_precondition(format!(
                    "Session {id} was recorded with a different [agent] context setting; set it back to summarize or start a new session"
                ));
                error_marks::mark_context_mismatch(&mut status, &id, "summarize");
                return Err(status);
            }
            Some(open_session_request::Target::SessionId(id)) => id,
            Some(open_session_request::Target::MostRecent(_)) => EARLIER.to_owned(),
            _ => session().session_id,
        };
        Ok(Response::new(pb::OpenSessionResponse {
            resumed: id != session().session_id,
            session: Some(pb::SessionInfo {
                session_id: id,
                ..session()
            }),
            role: "brain".into(),
        }))
    }

    async fn compact_session(
        &self,
        _: Request<pb::CompactSessionRequest>,
    ) -> Result<Response<pb::CompactSessionResponse>, Status> {
        self.stall_if_scripted().await;
        Err(Status::failed_precondition(
            "this hub cannot compact sessions yet",
        ))
    }

    async fn switch_role(
        &self,
        _: Request<pb::SwitchRoleRequest>,
    ) -> Result<Response<pb::SwitchRoleResponse>, Status> {
        Err(Status::failed_precondition(
            "missing credentials: ANTHROPIC_API_KEY",
        ))
    }

    async fn read_events(
        &self,
        _: Request<pb::ReadEventsRequest>,
    ) -> Result<Response<pb::ReadEventsResponse>, Status> {
        let events = self.script.stored_stops.then(stored_session::events);
        Ok(Response::new(pb::ReadEventsResponse {
            events: events.unwrap_or_default(),
        }))
    }

    type StartTurnStream =
        Pin<Box<dyn Stream<Item = Result<pb::StartTurnResponse, Status>> + Send + 'static>>;

    async fn start_turn(
        &self,
        request: Request<pb::StartTurnRequest>,
    ) -> Result<Response<Self::StartTurnStream>, Status> {
        let request = request.into_inner();
        if let Some(message) = self.script.refuse_new_session
            && request.session_id.is_empty()
        {
            return Err(Status::invalid_argument(message));
        }
        let (sender, receiver) = mpsc::channel(32);
        self.turns
            .send((request, sender))
            .map_err(|_| Status::unavailable("test gone"))?;
        if self.script.stall_start {
            std::future::pending::<()>().await;
        }
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn cancel_turn(
        &self,
        request: Request<pb::CancelTurnRequest>,
    ) -> Result<Response<pb::CancelTurnResponse>, Status> {
        let request = request.into_inner();
        let turn_id = request.turn_id.clone();
        self.cancels
            .send(request)
            .map_err(|_| Status::unavailable("test gone"))?;
        Ok(Response::new(pb::CancelTurnResponse {
            outcome: pb::CancelOutcome::Cancelled as i32,
            turn_id,
        }))
    }

    type SubscribeStream =
        Pin<Box<dyn Stream<Item = Result<pb::SubscribeResponse, Status>> + Send + 'static>>;

    async fn subscribe(
        &self,
        request: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let (sender, receiver) = mpsc::channel(32);
        self.subscribes
            .send((request.into_inner(), sender))
            .map_err(|_| Status::unavailable("test gone"))?;
        Ok(Response::new(Box::pin(ReceiverStream::new(receiver))))
    }

    async fn list_pending_approvals(
        &self,
        _: Request<pb::ListPendingApprovalsRequest>,
    ) -> Result<Response<pb::ListPendingApprovalsResponse>, Status> {
        Ok(Response::new(pb::ListPendingApprovalsResponse::default()))
    }

    type WatchApprovalsStream =
        Pin<Box<dyn Stream<Item = Result<pb::PendingApproval, Status>> + Send + 'static>>;

    async fn watch_approvals(
        &self,
        _: Request<pb::WatchApprovalsRequest>,
    ) -> Result<Response<Self::WatchApprovalsStream>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn decide_approval(
        &self,
        request: Request<pb::DecideApprovalRequest>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        let request = request.into_inner();
        let approved = request.decision == pb::ApprovalDecision::Approved as i32;
        let attachment = request.attachment_id.clone();
        self.decisions
            .send(request)
            .map_err(|_| Status::unavailable("test gone"))?;
        if self.script.cut_off_first_decision && !self.refused_one.swap(true, Ordering::SeqCst) {
            self.refusal.notified().await;
            let mut status = Status::failed_precondition(format!(
                "attachment {attachment:?} was cut off for falling behind; subscribe again and decide with the new attachment id"
            ));
            error_marks::mark_cut_off(&mut status);
            return Err(status);
        }
        Ok(Response::new(pb::DecideApprovalResponse {
            outcome: pb::DecideOutcome::Applied as i32,
            resolution: if approved {
                pb::ApprovalResolution::Approved
            } else {
                pb::ApprovalResolution::Rejected
            } as i32,
        }))
    }

    async fn list_tools(
        &self,
        _: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        Ok(Response::new(pb::ListToolsResponse::default()))
    }

    async fn get_usage(
        &self,
        _: Request<pb::GetUsageRequest>,
    ) -> Result<Response<pb::GetUsageResponse>, Status> {
        Ok(Response::new(stored_session::usage()))
    }

    async fn list_model_roles(
        &self,
        _: Request<pb::ListModelRolesRequest>,
    ) -> Result<Response<pb::ListModelRolesResponse>, Status> {
        Ok(Response::new(pb::ListModelRolesResponse {
            roles: vec![
                pb::ModelRole {
                    name: "brain".into(),
                    provider: "fake".into(),
                    model_id: "fake-demo".into(),
                    ..Default::default()
                },
                // Configured, but its credentials are missing: switching to it fails.
                pb::ModelRole {
                    name: "remote".into(),
                    provider: "anthropic".into(),
                    model_id: "claude-test".into(),
                    ..Default::default()
                },
            ],
            default_role: "brain".into(),
        }))
    }

    async fn list_routines(
        &self,
        _: Request<pb::ListRoutinesRequest>,
    ) -> Result<Response<pb::ListRoutinesResponse>, Status> {
        Err(Status::unimplemented("routines are not scripted"))
    }

    async fn add_routine(
        &self,
        _: Request<pb::AddRoutineRequest>,
    ) -> Result<Response<pb::AddRoutineResponse>, Status> {
        Err(Status::unimplemented("routines are not scripted"))
    }

    async fn remove_routine(
        &self,
        _: Request<pb::RemoveRoutineRequest>,
    ) -> Result<Response<pb::RemoveRoutineResponse>, Status> {
        Err(Status::unimplemented("routines are not scripted"))
    }

    async fn pause_routine(
        &self,
        _: Request<pb::PauseRoutineRequest>,
    ) -> Result<Response<pb::PauseRoutineResponse>, Status> {
        Err(Status::unimplemented("routines are not scripted"))
    }

    async fn resume_routine(
        &self,
        _: Request<pb::ResumeRoutineRequest>,
    ) -> Result<Response<pb::ResumeRoutineResponse>, Status> {
        Err(Status::unimplemented("routines are not scripted"))
    }

    async fn run_routine(
        &self,
        _: Request<pb::RunRoutineRequest>,
    ) -> Result<Response<pb::RunRoutineResponse>, Status> {
        Err(Status::unimplemented("routines are not scripted"))
    }

    async fn routine_history(
        &self,
        _: Request<pb::RoutineHistoryRequest>,
    ) -> Result<Response<pb::RoutineHistoryResponse>, Status> {
        Err(Status::unimplemented("routines are not scripted"))
    }
}

/// The scripted hub on `<root>/data/hub/taud.sock` and `tau chat` attached to it on a terminal.
pub struct Fixture {
    pub _runtime: tokio::runtime::Runtime,
    pub notices: Notices,
    pub chat: PtySession,
    /// What the chat printed before its ready banner's profile.
    pub startup: String,
    /// Declared last, so dropped last: what writes into it is gone first.
    pub _root: tempfile::TempDir,
}

pub const WAIT: Duration = Duration::from_secs(20);

impl Fixture {
    pub fn start() -> Self {
        Self::start_with(Script::default(), &[])
    }

    /// The scripted hub answering by `script`, and `tau chat` with `env` set.
    pub fn start_with(script: Script, env: &[(&str, &str)]) -> Self {
        Self::launch(script, env, &[])
    }

    /// The scripted hub answering by `script`, and `tau chat ARGS` with `env` set.
    pub fn launch(script: Script, env: &[(&str, &str)], args: &[&str]) -> Self {
        let (root, runtime, notices) = scripted_hub(script);
        let mut command = chat_command(root.path());
        command.envs(env.iter().copied()).args(args);
        let (chat, startup) = spawn_chat(command);
        Self {
            _root: root,
            _runtime: runtime,
            notices,
            chat,
            startup,
        }
    }

    /// Types `text` and returns the turn the hub received, with the sender of its events. The
    /// turn is accepted at once.
    pub fn turn(&mut self, text: &str) -> Turn {
        self.chat.send_line(text).unwrap();
        let (request, events) = self.notices.turns.recv_timeout(WAIT).unwrap();
        assert_eq!(request.text, text);
        assert_eq!(request.channel, "terminal");
        let turn = Turn {
            events,
            resumed: None,
            seq: 0,
        };
        turn.send(start_turn_response::Kind::Accepted(pb::TurnAccepted {
            session_id: session().session_id,
            turn_id: "turn-1".into(),
            attachment_id: "attachment-7".into(),
            stream_id: STREAM.into(),
            ..Default::default()
        }));
        turn
    }

    /// Ctrl-D once the input prompt is back (an end-of-file typed before the line editor took
    /// the terminal would be lost, as on any terminal).
    pub fn quit(mut self) {
        self.chat.see("> ").unwrap();
        self.chat.send_control('d').unwrap();
        self.chat.see("Goodbye.").unwrap();
        self.chat.exp_eof().unwrap();
    }
}

/// The scripted hub on `<root>/data/hub/taud.sock` of a fresh temporary root.
pub fn scripted_hub(script: Script) -> (tempfile::TempDir, tokio::runtime::Runtime, Notices) {
    let root = tempfile::tempdir().unwrap();
    let (runtime, notices) = scripted_hub_in(root.path(), script);
    (root, runtime, notices)
}

/// The scripted hub on `<root>/data/hub/taud.sock` (a socket file left by a hub stopped before is
/// replaced), serving until its runtime is dropped.
pub fn scripted_hub_in(root: &Path, script: Script) -> (tokio::runtime::Runtime, Notices) {
    let hub_dir = root.join("data/hub");
    std::fs::create_dir_all(&hub_dir).unwrap();
    std::fs::create_dir_all(root.join("home")).unwrap();
    let _ = std::fs::remove_file(hub_dir.join("taud.sock"));
    let (turns_tx, turns) = std_mpsc::channel();
    let (cancels_tx, cancels) = std_mpsc::channel();
    let (decisions_tx, decisions) = std_mpsc::channel();
    let (opens_tx, opens) = std_mpsc::channel();
    let (subscribes_tx, subscribes) = std_mpsc::channel();
    let refusal = Arc::new(Notify::new());
    let statuses = Arc::new(AtomicUsize::new(0));
    let hub = ScriptedHub {
        turns: turns_tx,
        cancels: cancels_tx,
        decisions: decisions_tx,
        opens: opens_tx,
        subscribes: subscribes_tx,
        script,
        refusal: Arc::clone(&refusal),
        refused_one: AtomicBool::new(false),
        statuses: Arc::clone(&statuses),
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
    let notices = Notices {
        turns,
        cancels,
        decisions,
        opens,
        subscribes,
        refusal,
        statuses,
    };
    (runtime, notices)
}

pub fn chat_command(root: &Path) -> std::process::Command {
    let mut command = tau_command(root);
    command.args(["chat", "--no-start"]);
    command
}

/// `tau` in the sandbox of `root` (its home, TAU_HOME and TAU_DATA_DIR under it).
pub fn tau_command(root: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_tau"));
    command
        .env_clear()
        .env("HOME", root)
        .env("TAU_HOME", root.join("home"))
        .env("TAU_DATA_DIR", root.join("data"))
        .env("NO_COLOR", "1")
        .env("TERM", "xterm")
        .current_dir(root);
    command
}

/// `tau chat` on a terminal, once it is ready, and what it printed before.
pub fn spawn_chat(command: std::process::Command) -> (PtySession, String) {
    let mut chat = rexpect::session::spawn_command(command, Some(20_000)).unwrap();
    // The ready banner names the profile in every UI language.
    let startup = chat.see("home · ").unwrap();
    (chat, startup)
}

/// rexpect reads the terminal byte by byte as Latin-1 characters; UTF-8 text is matched as the
/// same bytes.
pub trait See {
    fn see(&mut self, text: &str) -> Result<String, rexpect::error::Error>;
}

impl See for PtySession {
    fn see(&mut self, text: &str) -> Result<String, rexpect::error::Error> {
        let bytes: String = text.bytes().map(char::from).collect();
        self.exp_string(&bytes)
    }
}

// A scripted turn, fed event by event.
#[path = "scripted_turn.rs"]
mod scripted_turn;
pub use scripted_turn::{STREAM, Turn};
