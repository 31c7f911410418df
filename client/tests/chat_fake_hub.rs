//! `tau chat` against a scripted hub: a `tau.v1.Tau` server in this test process, on the socket
//! where `tau chat` looks for the hub, whose turns the test feeds event by event. The real `tau`
//! binary runs on a pseudo-terminal, so these tests see exactly what a person sees and pin down
//! the timing the real hub's fake model is too fast for: Ctrl-C during a reply, input typed while
//! a reply streams, an approval resolved elsewhere while its prompt is open.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::pin::Pin;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use rexpect::session::PtySession;
use tau_api::error_marks;
use tau_api::proto::v1::{self as pb, open_session_request, start_turn_response, tau_server};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tonic::{Request, Response, Status};

type EventSender = mpsc::Sender<Result<pb::StartTurnResponse, Status>>;

/// What the scripted hub tells the test.
struct Notices {
    turns: std_mpsc::Receiver<(pb::StartTurnRequest, EventSender)>,
    cancels: std_mpsc::Receiver<pb::CancelTurnRequest>,
    decisions: std_mpsc::Receiver<pb::DecideApprovalRequest>,
    opens: std_mpsc::Receiver<pb::OpenSessionRequest>,
}

struct ScriptedHub {
    turns: std_mpsc::Sender<(pb::StartTurnRequest, EventSender)>,
    cancels: std_mpsc::Sender<pb::CancelTurnRequest>,
    decisions: std_mpsc::Sender<pb::DecideApprovalRequest>,
    opens: std_mpsc::Sender<pb::OpenSessionRequest>,
    script: Script,
}

/// An earlier session that was recorded under `[agent] context = "summarize"`: opening it fails.
const MISMATCHED: &str = "20261129-000000-beef";

/// An earlier session that opens.
const EARLIER: &str = "20261128-101010-cafe";

/// How the scripted hub answers the calls a test wants to go wrong.
#[derive(Clone, Copy, Default)]
struct Script {
    /// `ListSessions` and `CompactSession` never answer.
    stall: bool,
    /// `OpenSession` never answers.
    stall_open: bool,
}

fn session() -> pb::SessionInfo {
    pb::SessionInfo {
        session_id: "20261130-010203-abcd".into(),
        channel: "terminal".into(),
        role: "brain".into(),
        message_count: 4,
        ..Default::default()
    }
}

impl ScriptedHub {
    async fn stall_if_scripted(&self) {
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
        Ok(Response::new(pb::GetStatusResponse {
            version: "9.9.9".into(),
            profile: "home".into(),
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
        let id = request.into_inner().session_id;
        Ok(Response::new(pb::GetSessionResponse {
            session: Some(pb::SessionInfo {
                session_id: id,
                ..session()
            }),
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
        Ok(Response::new(pb::ReadEventsResponse::default()))
    }

    type StartTurnStream =
        Pin<Box<dyn Stream<Item = Result<pb::StartTurnResponse, Status>> + Send + 'static>>;

    async fn start_turn(
        &self,
        request: Request<pb::StartTurnRequest>,
    ) -> Result<Response<Self::StartTurnStream>, Status> {
        let (sender, receiver) = mpsc::channel(32);
        self.turns
            .send((request.into_inner(), sender))
            .map_err(|_| Status::unavailable("test gone"))?;
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
        _: Request<pb::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        Err(Status::unimplemented("not scripted"))
    }

    async fn list_pending_approvals(
        &self,
        _: Request<pb::ListPendingApprovalsRequest>,
    ) -> Result<Response<pb::ListPendingApprovalsResponse>, Status> {
        Ok(Response::new(pb::ListPendingApprovalsResponse::default()))
    }

    async fn decide_approval(
        &self,
        request: Request<pb::DecideApprovalRequest>,
    ) -> Result<Response<pb::DecideApprovalResponse>, Status> {
        let request = request.into_inner();
        let approved = request.decision == pb::ApprovalDecision::Approved as i32;
        self.decisions
            .send(request)
            .map_err(|_| Status::unavailable("test gone"))?;
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
}

/// The scripted hub on `<root>/data/hub/taud.sock` and `tau chat` attached to it on a terminal.
struct Fixture {
    _root: tempfile::TempDir,
    _runtime: tokio::runtime::Runtime,
    notices: Notices,
    chat: PtySession,
    /// What the chat printed before its ready banner's profile.
    startup: String,
}

const WAIT: Duration = Duration::from_secs(20);

impl Fixture {
    fn start() -> Self {
        Self::start_with(Script::default(), &[])
    }

    /// The scripted hub answering by `script`, and `tau chat` with `env` set.
    fn start_with(script: Script, env: &[(&str, &str)]) -> Self {
        Self::launch(script, env, &[])
    }

    /// The scripted hub answering by `script`, and `tau chat ARGS` with `env` set.
    fn launch(script: Script, env: &[(&str, &str)], args: &[&str]) -> Self {
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
    fn turn(&mut self, text: &str) -> Turn {
        self.chat.send_line(text).unwrap();
        let (request, events) = self.notices.turns.recv_timeout(WAIT).unwrap();
        assert_eq!(request.text, text);
        assert_eq!(request.channel, "terminal");
        let turn = Turn { events, seq: 0 };
        turn.send(start_turn_response::Kind::Accepted(pb::TurnAccepted {
            session_id: session().session_id,
            turn_id: "turn-1".into(),
            attachment_id: "attachment-7".into(),
            ..Default::default()
        }));
        turn
    }

    /// Ctrl-D once the input prompt is back (an end-of-file typed before the line editor took
    /// the terminal would be lost, as on any terminal).
    fn quit(mut self) {
        self.chat.see("> ").unwrap();
        self.chat.send_control('d').unwrap();
        self.chat.see("Goodbye.").unwrap();
        self.chat.exp_eof().unwrap();
    }
}

/// The scripted hub on `<root>/data/hub/taud.sock` of a fresh temporary root.
fn scripted_hub(script: Script) -> (tempfile::TempDir, tokio::runtime::Runtime, Notices) {
    let root = tempfile::tempdir().unwrap();
    let hub_dir = root.path().join("data/hub");
    std::fs::create_dir_all(&hub_dir).unwrap();
    std::fs::create_dir_all(root.path().join("home")).unwrap();
    let (turns_tx, turns) = std_mpsc::channel();
    let (cancels_tx, cancels) = std_mpsc::channel();
    let (decisions_tx, decisions) = std_mpsc::channel();
    let (opens_tx, opens) = std_mpsc::channel();
    let hub = ScriptedHub {
        turns: turns_tx,
        cancels: cancels_tx,
        decisions: decisions_tx,
        opens: opens_tx,
        script,
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
    };
    (root, runtime, notices)
}

fn chat_command(root: &Path) -> std::process::Command {
    let mut command = tau_command(root);
    command.args(["chat", "--no-start"]);
    command
}

/// `tau` in the sandbox of `root` (its home, TAU_HOME and TAU_DATA_DIR under it).
fn tau_command(root: &Path) -> std::process::Command {
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
fn spawn_chat(command: std::process::Command) -> (PtySession, String) {
    let mut chat = rexpect::session::spawn_command(command, Some(20_000)).unwrap();
    // The ready banner names the profile in every UI language.
    let startup = chat.see("home · ").unwrap();
    (chat, startup)
}

/// rexpect reads the terminal byte by byte as Latin-1 characters; UTF-8 text is matched as the
/// same bytes.
trait See {
    fn see(&mut self, text: &str) -> Result<String, rexpect::error::Error>;
}

impl See for PtySession {
    fn see(&mut self, text: &str) -> Result<String, rexpect::error::Error> {
        let bytes: String = text.bytes().map(char::from).collect();
        self.exp_string(&bytes)
    }
}

struct Turn {
    events: EventSender,
    seq: u64,
}

impl Turn {
    fn send(&self, kind: start_turn_response::Kind) {
        self.events
            .blocking_send(Ok(pb::StartTurnResponse { kind: Some(kind) }))
            .unwrap();
    }

    fn event(&mut self, kind: pb::session_event::Kind) {
        self.seq += 1;
        self.send(start_turn_response::Kind::Event(pb::SessionEvent {
            seq: self.seq,
            session_id: session().session_id,
            turn_id: "turn-1".into(),
            kind: Some(kind),
            ..Default::default()
        }));
    }

    fn text(&mut self, text: &str) {
        self.event(pb::session_event::Kind::TextDelta(pb::TextDelta {
            text: text.into(),
        }));
    }

    fn approval(&mut self, id: &str, channel: &str) {
        self.event(pb::session_event::Kind::ApprovalRequested(
            pb::ApprovalRequested {
                approval: Some(pb::PendingApproval {
                    approval_id: id.into(),
                    channel: channel.into(),
                    tool: "demo_physical_action".into(),
                    tier: 2,
                    arguments: "{\"action\": \"turn on the desk lamp\"}".into(),
                    effect: "Demo: simulates a physical action; no real device moves.".into(),
                    ..Default::default()
                }),
            },
        ));
    }

    fn refused(&mut self) {
        self.event(pb::session_event::Kind::ToolCall(pb::ToolCallFinished {
            tool: "demo_physical_action".into(),
            tier: pb::Tier::Physical as i32,
            status: pb::ToolCallStatus::Refused as i32,
            approval: "rejected".into(),
            ..Default::default()
        }));
    }

    fn end(&mut self, stop_reason: &str, text: &str) {
        self.event(pb::session_event::Kind::TurnEnded(pb::TurnEnded {
            stop_reason: stop_reason.into(),
            text: text.into(),
            ..Default::default()
        }));
    }
}

#[test]
fn replies_stream_sanitized_with_dim_throttling_and_stop_notices() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("hello");
    turn.text("Hel");
    turn.text("lo\x1b[2J \u{202e}gnp.exe");
    fixture
        .chat
        .see("Hello\\u{1b}[2J \\u{202e}gnp.exe")
        .unwrap();
    turn.event(pb::session_event::Kind::Throttled(pb::Throttled {
        delay_ms: 1500,
    }));
    fixture.chat.see("Throttled; retrying in 2 s…").unwrap();
    turn.text("Hello again");
    turn.end("limit_turns", "Hello again");
    fixture.chat.see("Hello again").unwrap();
    fixture
        .chat
        .see("Stopped: this turn reached its limit of 12 model calls")
        .unwrap();
    fixture.quit();
}

#[test]
fn ctrl_c_during_a_reply_cancels_the_turn() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("write a long story");
    turn.text("Once upon a time");
    fixture.chat.see("Once upon a time").unwrap();
    fixture.chat.send_control('c').unwrap();
    let cancel = fixture.notices.cancels.recv_timeout(WAIT).unwrap();
    assert_eq!(cancel.turn_id, "turn-1");
    assert_eq!(cancel.session_id, session().session_id);
    turn.end("cancelled", "Once upon a time");
    fixture.chat.see("Cancelled.").unwrap();
    // Back at the prompt: the chat goes on.
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    fixture.quit();
}

#[test]
fn input_typed_during_a_reply_does_not_answer_the_next_approval() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("turn on the lamp");
    turn.text("Let me see");
    fixture.chat.see("Let me see").unwrap();
    // Typed while the reply streams, before any prompt exists.
    fixture.chat.send("y\r").unwrap();
    fixture.chat.flush().unwrap();
    turn.approval("approval-1", "terminal");
    fixture.chat.see("Approve? [y/N]").unwrap();
    fixture.chat.send_line("n").unwrap();
    let decision = fixture.notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "approval-1");
    assert_eq!(decision.attachment_id, "attachment-7");
    assert_eq!(decision.decision, pb::ApprovalDecision::Rejected as i32);
    turn.refused();
    fixture
        .chat
        .see("✗ demo_physical_action: not approved")
        .unwrap();
    turn.end("end_turn", "");
    fixture.quit();
}

#[test]
fn ctrl_c_at_an_approval_prompt_rejects() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("turn on the lamp");
    turn.approval("approval-2", "terminal");
    fixture
        .chat
        .see("Arguments: {\"action\": \"turn on the desk lamp\"}")
        .unwrap();
    fixture.chat.see("Approve? [y/N]").unwrap();
    fixture.chat.send_control('c').unwrap();
    let decision = fixture.notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.decision, pb::ApprovalDecision::Rejected as i32);
    turn.refused();
    turn.end("end_turn", "");
    fixture
        .chat
        .see("✗ demo_physical_action: not approved")
        .unwrap();
    fixture.quit();
}

#[test]
fn an_approval_resolved_elsewhere_closes_its_prompt_without_a_decision() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("turn on the lamp");
    turn.approval("approval-3", "terminal");
    fixture.chat.see("Approve? [y/N]").unwrap();
    turn.event(pb::session_event::Kind::ApprovalResolved(
        pb::ApprovalResolved {
            approval_id: "approval-3".into(),
            tool: "demo_physical_action".into(),
            resolution: pb::ApprovalResolution::Timeout as i32,
            ..Default::default()
        },
    ));
    turn.event(pb::session_event::Kind::ToolCall(pb::ToolCallFinished {
        tool: "demo_physical_action".into(),
        tier: pb::Tier::Physical as i32,
        status: pb::ToolCallStatus::Refused as i32,
        approval: "timeout".into(),
        ..Default::default()
    }));
    turn.end("end_turn", "");
    fixture
        .chat
        .see("✗ demo_physical_action: no answer in time; not approved")
        .unwrap();
    // The abandoned prompt does not eat the next line: it reaches the chat.
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    assert!(fixture.notices.decisions.try_recv().is_err());
    fixture.quit();
}

#[test]
fn approvals_of_another_channel_are_not_asked_here() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("turn on the lamp");
    turn.approval("approval-4", "telegram");
    fixture.chat.see("Awaiting approval on telegram.").unwrap();
    turn.end("end_turn", "ok");
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    assert!(fixture.notices.decisions.try_recv().is_err());
    fixture.quit();
}

#[test]
fn failed_compaction_and_role_switch_say_why_and_keep_the_session() {
    let mut fixture = Fixture::start();
    fixture.chat.send_line("/model").unwrap();
    fixture
        .chat
        .see("brain → fake, fake-demo (current)")
        .unwrap();
    fixture.chat.send_line("/model fast").unwrap();
    fixture
        .chat
        .see("Unknown model role: fast. Roles: brain, remote.")
        .unwrap();
    fixture.chat.send_line("/compact the lamp").unwrap();
    fixture
        .chat
        .see(
            "Could not compact the session: this hub cannot compact sessions yet. Nothing changed.",
        )
        .unwrap();
    fixture.chat.send_line("/session").unwrap();
    fixture.chat.see("Id: 20261130-010203-abcd").unwrap();
    fixture.chat.send_line("/status").unwrap();
    fixture.chat.see("taud 9.9.9").unwrap();
    fixture.quit();
}

#[test]
fn an_unknown_pinned_role_is_refused_before_a_session_opens() {
    let (root, _runtime, _notices) = scripted_hub(Script::default());
    let output = chat_command(root.path())
        .args(["--role", "fast"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("Unknown model role: fast. Roles: brain, remote."),
        "{stdout}"
    );
    assert!(!stdout.contains("is ready"), "{stdout}");
}

#[test]
fn ctrl_c_abandons_a_slash_command_and_the_chat_goes_on() {
    let mut fixture = Fixture::start_with(
        Script {
            stall: true,
            ..Script::default()
        },
        &[],
    );
    fixture.chat.send_line("/compact").unwrap();
    fixture.chat.see("Summarizing 4 messages…").unwrap();
    fixture.chat.send_control('c').unwrap();
    fixture
        .chat
        .see("Cancelled; stopped waiting for the hub.")
        .unwrap();
    // Back at the prompt.
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    fixture.quit();
}

#[test]
fn a_hub_that_does_not_answer_in_time_is_left_with_one_line() {
    let mut fixture = Fixture::start_with(
        Script {
            stall: true,
            ..Script::default()
        },
        &[("TAU_HUB_TIMEOUT", "1")],
    );
    fixture.chat.send_line("/sessions").unwrap();
    fixture
        .chat
        .see("The hub did not answer within 1 s; stopped waiting.")
        .unwrap();
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    fixture.quit();
}

#[test]
fn a_session_of_another_context_mode_is_refused_in_the_ui_language() {
    let mut fixture = Fixture::start_with(Script::default(), &[("TAU_LANG", "tr")]);
    fixture
        .chat
        .send_line(&format!("/resume {MISMATCHED}"))
        .unwrap();
    fixture
        .chat
        .see(&format!(
            "{MISMATCHED} oturumu farklı bir [agent] context ayarıyla kaydedilmiş; ayarı yeniden summarize yapın ya da yeni bir oturum başlatın."
        ))
        .unwrap();
    fixture.chat.see("Geçerli oturum korunuyor.").unwrap();
    fixture.chat.send_line("/session").unwrap();
    fixture.chat.see(&session().session_id).unwrap();
    fixture.chat.send_control('d').unwrap();
    fixture.chat.see("Hoşça kalın.").unwrap();
    fixture.chat.exp_eof().unwrap();
}

#[test]
fn resume_and_session_options_open_the_named_session() {
    use open_session_request::Target;
    let cases = [
        (vec!["--resume", EARLIER], Target::SessionId(EARLIER.into())),
        (vec!["--resume"], Target::MostRecent(true)),
        (
            vec!["--session", EARLIER],
            Target::SessionId(EARLIER.into()),
        ),
    ];
    for (args, target) in cases {
        let mut fixture = Fixture::launch(Script::default(), &[], &args);
        let opened = fixture.notices.opens.recv_timeout(WAIT).unwrap();
        assert_eq!(opened.target, Some(target), "{args:?}");
        assert_eq!(opened.channel, "terminal");
        assert!(
            fixture
                .startup
                .contains(&format!("Resumed session {EARLIER}")),
            "{args:?}: {}",
            fixture.startup
        );
        fixture.chat.see(&format!("session {EARLIER}")).unwrap();
        // Only the one session was opened: no new one behind the resumed one.
        assert!(fixture.notices.opens.try_recv().is_err(), "{args:?}");
        fixture.quit();
    }
}

#[test]
fn a_role_that_cannot_be_built_is_not_switched_to() {
    let mut fixture = Fixture::start();
    fixture.chat.send_line("/model remote").unwrap();
    fixture
        .chat
        .see("Could not switch to role remote: missing credentials: ANTHROPIC_API_KEY. The current model stays.")
        .unwrap();
    fixture.chat.send_line("/status").unwrap();
    fixture.chat.see("messages · role brain").unwrap();
    fixture.chat.see("Model: brain → fake, fake-demo").unwrap();
    fixture.chat.send_line("/model").unwrap();
    fixture
        .chat
        .see("brain → fake, fake-demo (current)")
        .unwrap();
    fixture.quit();
}

#[test]
fn a_discarded_partial_reply_is_marked_and_the_final_reply_is_shown() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("hello");
    turn.text("Half an ans");
    fixture.chat.see("Half an ans").unwrap();
    turn.event(pb::session_event::Kind::OutputDiscarded(
        pb::OutputDiscarded::default(),
    ));
    turn.event(pb::session_event::Kind::Throttled(pb::Throttled {
        delay_ms: 1000,
    }));
    // The retry's reply reaches this stream only with the turn's end.
    turn.end("end_turn", "The whole answer.");
    let shown = fixture.chat.see("The whole answer.").unwrap();
    assert!(
        shown.contains("(The reply above was discarded; the model answers again.)\r\n"),
        "{shown:?}"
    );
    assert!(shown.contains("Throttled; retrying in 1 s"), "{shown:?}");
    assert!(!shown.contains("ansThe"), "{shown:?}");
    fixture.quit();
}

#[test]
fn tau_ask_gives_up_on_a_hub_that_does_not_open_the_session() {
    let (root, _runtime, notices) = scripted_hub(Script {
        stall_open: true,
        ..Script::default()
    });
    let mut ask = tau_command(root.path())
        .args(["ask", "hello"])
        .env("TAU_HUB_TIMEOUT", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + WAIT;
    while ask.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = ask.kill();
            panic!("tau ask still waits for the hub after {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = ask.wait_with_output().unwrap();
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("cannot open the session: the hub did not answer within 1 s"),
        "{stderr}"
    );
    assert!(notices.opens.try_recv().is_ok());
}
