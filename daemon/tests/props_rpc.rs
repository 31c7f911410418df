//! Property tests of every `tau.v1.Tau` call through the real gRPC server (in process, over its
//! Unix socket) on a hub with the offline demo model, for both session backends. Each request's
//! fields are drawn from hostile values (empty, huge, arbitrary Unicode, control characters,
//! unknown enum numbers, extreme numbers, unknown ids, ids of another session, turn, approval or
//! attachment, path-traversal ids) and from the hub's real ids, so valid calls mix with refused
//! ones while a tier-2 approval waits. Properties: nothing panics; every answer is OK or a status
//! with a code that names the client's mistake or the hub's state (never INTERNAL, UNKNOWN or
//! UNAVAILABLE) and a message of one bounded line; a stream's first message comes in time; the
//! hub still answers GetStatus; and a refused request leaves no new session (nor any other file)
//! on disk.
//!
//! `PROPTEST_CASES=N` runs N cases per property instead of the short default.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use proptest::prelude::*;
use support::props::{panics, runner};
use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use taud::host::{Hub, HubOptions, HubService};
use taud::rpc::GrpcService;
use taud::testing::FakeModel;
use tonic::transport::Channel;
use tonic::{Code, Status, Streaming};

type Client = TauClient<Channel>;

const DEADLINE: Duration = Duration::from_secs(10);

/// A string field: one of the hub's real ids or names, or hostile text.
#[derive(Debug, Clone)]
enum Field {
    /// The session whose turn waits for an approval.
    Busy,
    /// A session with a finished turn, watched from another channel.
    Idle,
    /// A well-formed session id no session has.
    Unknown,
    ApprovalId,
    /// The attachment of the stream that was asked the approval.
    OwnAttachment,
    /// The attachment of a stream on another session and channel.
    OtherAttachment,
    TurnId,
    StreamId,
    Name(&'static str),
    Text(String),
}

const NAMES: [&str; 30] = [
    "terminal",
    "telegram",
    "api",
    "brain",
    "fast",
    "tau",
    "turn on the lamp",
    "what time is it",
    "../x",
    "..",
    ".",
    "../../etc/passwd",
    "/etc/passwd",
    "a/b",
    "a\\b",
    "sessions.db",
    ".sessions-index.jsonl",
    "hub",
    "%2e%2e%2fx",
    "20261201-120000-abcd/../x",
    "a\0b",
    "a\nb",
    "\u{1b}[31m",
    "a\u{202e}b",
    "\u{feff}",
    " ",
    "\t\n",
    "apr-none",
    "att-forged",
    "turn-0000000000000000-0001",
];

fn field() -> impl Strategy<Value = Field> {
    prop_oneof![
        2 => Just(Field::Busy),
        2 => Just(Field::Idle),
        1 => Just(Field::Unknown),
        1 => Just(Field::ApprovalId),
        1 => Just(Field::OwnAttachment),
        1 => Just(Field::OtherAttachment),
        1 => Just(Field::TurnId),
        1 => Just(Field::StreamId),
        4 => proptest::sample::select(&NAMES[..]).prop_map(Field::Name),
        3 => support::props::text().prop_map(Field::Text),
        1 => (200_000usize..300_000).prop_map(|n| Field::Text("y".repeat(n))),
    ]
}

fn number_u32() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), Just(1), Just(2), Just(u32::MAX), any::<u32>()]
}

fn enum_number() -> impl Strategy<Value = i32> {
    prop_oneof![
        Just(0i32),
        Just(1),
        Just(2),
        Just(3),
        Just(-1),
        Just(i32::MAX),
        Just(i32::MIN),
        any::<i32>()
    ]
}

#[derive(Debug, Clone)]
enum Target {
    None,
    New(bool),
    Id(Field),
    Index(u32),
    MostRecent(bool),
}

/// One call with its fields (ids still symbolic).
#[derive(Debug, Clone)]
enum Call {
    GetStatus,
    ListSessions(u32, Field, Field),
    GetSession(Field, bool),
    OpenSession(Target, Field, Field, Field),
    CompactSession(Field, Field, Field),
    SwitchRole(Field, Field),
    ReadEvents(Field),
    StartTurn(Field, Field, Field, Field),
    CancelTurn(Field, Field),
    Subscribe(Field, Option<u64>, Field, Field),
    ListPendingApprovals(Field),
    DecideApproval(Field, i32, Field),
    ListTools,
    ListModelRoles,
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        Just(Target::None),
        any::<bool>().prop_map(Target::New),
        field().prop_map(Target::Id),
        number_u32().prop_map(Target::Index),
        any::<bool>().prop_map(Target::MostRecent),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    let after_seq = proptest::option::of(prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        any::<u64>()
    ]);
    prop_oneof![
        Just(Call::GetStatus),
        (number_u32(), field(), field()).prop_map(|(l, c, e)| Call::ListSessions(l, c, e)),
        (field(), any::<bool>()).prop_map(|(s, m)| Call::GetSession(s, m)),
        (target(), field(), field(), field())
            .prop_map(|(t, r, c, e)| Call::OpenSession(t, r, c, e)),
        (field(), field(), field()).prop_map(|(s, f, c)| Call::CompactSession(s, f, c)),
        (field(), field()).prop_map(|(s, r)| Call::SwitchRole(s, r)),
        field().prop_map(Call::ReadEvents),
        (field(), field(), field(), field()).prop_map(|(s, t, c, k)| Call::StartTurn(s, t, c, k)),
        (field(), field()).prop_map(|(s, t)| Call::CancelTurn(s, t)),
        (field(), after_seq, field(), field()).prop_map(|(s, a, c, i)| Call::Subscribe(s, a, c, i)),
        field().prop_map(Call::ListPendingApprovals),
        (field(), enum_number(), field()).prop_map(|(a, d, t)| Call::DecideApproval(a, d, t)),
        Just(Call::ListTools),
        Just(Call::ListModelRoles),
    ]
}

/// The hub's real ids, and the streams that hold its attachments.
struct Known {
    busy: String,
    idle: String,
    approval_id: String,
    own_attachment: String,
    other_attachment: String,
    turn_id: String,
    stream_id: String,
    /// The turn stream asked the approval, and the watcher on the idle session: they hold the
    /// attachments.
    _turn: Streaming<pb::StartTurnResponse>,
    _watch: Streaming<pb::SubscribeResponse>,
}

impl Known {
    fn resolve(&self, field: &Field) -> String {
        match field {
            Field::Busy => self.busy.clone(),
            Field::Idle => self.idle.clone(),
            Field::Unknown => "20991231-235959-beef".into(),
            Field::ApprovalId => self.approval_id.clone(),
            Field::OwnAttachment => self.own_attachment.clone(),
            Field::OtherAttachment => self.other_attachment.clone(),
            Field::TurnId => self.turn_id.clone(),
            Field::StreamId => self.stream_id.clone(),
            Field::Name(name) => (*name).to_owned(),
            Field::Text(text) => text.clone(),
        }
    }
}

struct Fixture {
    store: PathBuf,
    backend: &'static str,
    hub: Hub,
    service: GrpcService,
    client: Client,
    known: Option<Known>,
    /// How the calls were answered: `OK` or the refusal's code, with counts.
    tally: std::collections::BTreeMap<String, usize>,
    /// Declared last, so dropped last: what writes into it is gone first.
    _tmp: crate::support::temp::TestDir,
}

async fn fixture(backend: &'static str) -> Fixture {
    let tmp = crate::support::temp::dir();
    let options = HubOptions::new(tmp.path().join("data"));
    let dir = options.paths().dir.clone();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let hub = Hub::new(options, None);
    let store = tmp.path().join("store");
    let model = Arc::new(FakeModel::demo());
    let core = support::hub::setup(&store, backend, &model, support::hub::options());
    let service =
        taud::services::grpc_service(core).with_socket_uid(nix::unistd::geteuid().as_raw());
    service.start(&hub).await.unwrap();
    let client = TauClient::new(support::process::uds_channel(&hub.paths().socket).await);
    let mut fixture = Fixture {
        _tmp: tmp,
        store,
        backend,
        hub,
        service,
        client,
        known: None,
        tally: Default::default(),
    };
    fixture.known = Some(fixture.ask_again(None).await);
    fixture
}

impl Fixture {
    /// Sets up a waiting approval on a new busy session, and (unless given) an idle session with
    /// a finished turn, watched from `telegram`.
    async fn ask_again(&mut self, idle: Option<String>) -> Known {
        let client = &mut self.client;
        let idle = match idle {
            Some(idle) => idle,
            None => {
                let idle = support::api::new_session(client, "terminal").await;
                let (mut stream, _) =
                    support::api::start(client, support::api::turn(&idle, "hello", "terminal"))
                        .await;
                support::api::rest(&mut stream).await;
                idle
            }
        };
        let busy = support::api::new_session(client, "terminal").await;
        let (mut stream, accepted) = support::api::start(
            client,
            support::api::turn(&busy, "turn on the lamp", "terminal"),
        )
        .await;
        let pending = support::api::until_approval(&mut stream).await;
        let mut watch = client
            .subscribe(pb::SubscribeRequest {
                session_id: idle.clone(),
                after_seq: None,
                channel: "telegram".into(),
                stream_id: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let Some(pb::subscribe_response::Kind::Snapshot(snapshot)) =
            watch.message().await.unwrap().unwrap().kind
        else {
            panic!("no snapshot first");
        };
        Known {
            busy,
            idle,
            approval_id: pending.approval_id,
            own_attachment: accepted.attachment_id,
            other_attachment: snapshot.attachment_id,
            turn_id: accepted.turn_id,
            stream_id: accepted.stream_id,
            _turn: stream,
            _watch: watch,
        }
    }

    /// A new approval when the last one was decided or cancelled, so decisions keep meeting one.
    async fn keep_an_approval_waiting(&mut self) {
        let known = self.known.as_ref().unwrap();
        let waiting = self
            .client
            .list_pending_approvals(pb::ListPendingApprovalsRequest {
                session_id: known.busy.clone(),
            })
            .await
            .unwrap()
            .into_inner()
            .approvals;
        if waiting.is_empty() {
            let idle = Some(known.idle.clone());
            self.known = None;
            self.known = Some(self.ask_again(idle).await);
        }
    }

    /// What is on disk that a request could have created: the store's entries and its sessions.
    fn disk(&self) -> (BTreeSet<PathBuf>, u64) {
        let mut entries = BTreeSet::new();
        for dir in [
            self.store.clone(),
            self.store.join("sessions"),
            self.store.parent().unwrap().to_path_buf(),
        ] {
            if let Ok(read) = std::fs::read_dir(&dir) {
                for entry in read {
                    entries.insert(entry.unwrap().path());
                }
            }
        }
        let sessions = if self.backend == "sqlite" {
            sqlite_sessions(&self.store.join("sessions.db"))
        } else {
            entries
                .iter()
                .filter(|p| p.parent() == Some(&self.store.join("sessions")))
                .count() as u64
        };
        // Sqlite's own -wal/-shm files come and go; they are not the request's doing.
        entries.retain(|p| {
            !p.to_string_lossy().ends_with("-wal") && !p.to_string_lossy().ends_with("-shm")
        });
        (entries, sessions)
    }
}

fn sqlite_sessions(db: &Path) -> u64 {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    conn.query_row("SELECT count(*) FROM sessions", [], |row| {
        row.get::<_, i64>(0)
    })
    .unwrap() as u64
}

fn open_target(target: &Target, known: &Known) -> Option<pb::open_session_request::Target> {
    use pb::open_session_request::Target as T;
    match target {
        Target::None => None,
        Target::New(b) => Some(T::NewSession(*b)),
        Target::Id(f) => Some(T::SessionId(known.resolve(f))),
        Target::Index(n) => Some(T::Index(*n)),
        Target::MostRecent(b) => Some(T::MostRecent(*b)),
    }
}

/// The first message of a server stream, in time.
async fn first<T>(stream: &mut Streaming<T>) -> Result<Option<T>, Status> {
    match tokio::time::timeout(DEADLINE, stream.message()).await {
        Ok(result) => result,
        Err(_) => Err(Status::deadline_exceeded(
            "the stream's first message never came",
        )),
    }
}

/// Runs one call; a stream's first message is read too. Ok when the hub took the request.
async fn execute(client: &mut Client, known: &Known, call: &Call) -> Result<(), Status> {
    let r = |f: &Field| known.resolve(f);
    match call {
        Call::GetStatus => client.get_status(pb::GetStatusRequest {}).await.map(drop),
        Call::ListSessions(limit, channel, exclude) => client
            .list_sessions(pb::ListSessionsRequest {
                limit: *limit,
                channel: r(channel),
                exclude_session_id: r(exclude),
            })
            .await
            .map(drop),
        Call::GetSession(id, messages) => client
            .get_session(pb::GetSessionRequest {
                session_id: r(id),
                include_messages: *messages,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::OpenSession(target, role, channel, exclude) => client
            .open_session(pb::OpenSessionRequest {
                target: open_target(target, known),
                role: r(role),
                channel: r(channel),
                exclude_session_id: r(exclude),
            })
            .await
            .map(drop),
        Call::CompactSession(id, focus, channel) => client
            .compact_session(pb::CompactSessionRequest {
                session_id: r(id),
                focus: r(focus),
                channel: r(channel),
            })
            .await
            .map(drop),
        Call::SwitchRole(id, role) => client
            .switch_role(pb::SwitchRoleRequest {
                session_id: r(id),
                role: r(role),
            })
            .await
            .map(drop),
        Call::ReadEvents(id) => client
            .read_events(pb::ReadEventsRequest { session_id: r(id) })
            .await
            .map(drop),
        Call::StartTurn(id, text, channel, key) => {
            let mut stream = client
                .start_turn(pb::StartTurnRequest {
                    session_id: r(id),
                    text: r(text),
                    channel: r(channel),
                    idempotency_key: r(key),
                    new_session: false,
                })
                .await?
                .into_inner();
            match first(&mut stream).await?.and_then(|m| m.kind) {
                Some(pb::start_turn_response::Kind::Accepted(_)) => Ok(()),
                other => Err(Status::data_loss(format!(
                    "not `accepted` first: {other:?}"
                ))),
            }
        }
        Call::CancelTurn(id, turn) => client
            .cancel_turn(pb::CancelTurnRequest {
                session_id: r(id),
                turn_id: r(turn),
            })
            .await
            .map(drop),
        Call::Subscribe(id, after_seq, channel, stream_id) => {
            let mut stream = client
                .subscribe(pb::SubscribeRequest {
                    session_id: r(id),
                    after_seq: *after_seq,
                    channel: r(channel),
                    stream_id: r(stream_id),
                })
                .await?
                .into_inner();
            match first(&mut stream).await?.and_then(|m| m.kind) {
                Some(pb::subscribe_response::Kind::Snapshot(_)) => Ok(()),
                other => Err(Status::data_loss(format!(
                    "not a snapshot first: {other:?}"
                ))),
            }
        }
        Call::ListPendingApprovals(id) => client
            .list_pending_approvals(pb::ListPendingApprovalsRequest { session_id: r(id) })
            .await
            .map(drop),
        Call::DecideApproval(approval, decision, attachment) => client
            .decide_approval(pb::DecideApprovalRequest {
                approval_id: r(approval),
                decision: *decision,
                attachment_id: r(attachment),
            })
            .await
            .map(drop),
        Call::ListTools => client.list_tools(pb::ListToolsRequest {}).await.map(drop),
        Call::ListModelRoles => client
            .list_model_roles(pb::ListModelRolesRequest {})
            .await
            .map(drop),
    }
}

/// The codes a refusal may carry: the client's mistake or the hub's state, never the hub's own
/// failure.
const REFUSALS: [Code; 6] = [
    Code::InvalidArgument,
    Code::OutOfRange,
    Code::NotFound,
    Code::FailedPrecondition,
    Code::ResourceExhausted,
    Code::AlreadyExists,
];

async fn case(fixture: &mut Fixture, call: &Call) -> Result<(), TestCaseError> {
    fixture.keep_an_approval_waiting().await;
    let before = fixture.disk();
    let panics_before = panics().load(Ordering::SeqCst);
    let known = fixture.known.as_ref().unwrap();
    let answer = tokio::time::timeout(DEADLINE, execute(&mut fixture.client, known, call))
        .await
        .map_err(|_| TestCaseError::fail("the call hung"))?;
    let outcome = match &answer {
        Ok(()) => "OK".to_owned(),
        Err(status) => format!("{:?}", status.code()),
    };
    *fixture.tally.entry(outcome).or_default() += 1;
    if let Err(status) = &answer {
        prop_assert!(
            REFUSALS.contains(&status.code()),
            "refused with {:?}: {}",
            status.code(),
            status.message()
        );
        prop_assert!(!status.message().is_empty(), "a refusal without a message");
        prop_assert!(
            status.message().len() <= taud::rpc::errors::MAX_STATUS_MESSAGE
                && !status.message().chars().any(char::is_control),
            "not one bounded line: {:?}",
            status.message()
        );
        let after = fixture.disk();
        prop_assert_eq!(
            &after.0,
            &before.0,
            "a refused request changed what is on disk"
        );
        prop_assert_eq!(after.1, before.1, "a refused request created a session");
    }
    let status = tokio::time::timeout(DEADLINE, fixture.client.get_status(pb::GetStatusRequest {}))
        .await
        .map_err(|_| TestCaseError::fail("GetStatus hung afterwards"))?;
    prop_assert!(status.is_ok(), "GetStatus afterwards: {:?}", status.err());
    prop_assert_eq!(
        panics().load(Ordering::SeqCst),
        panics_before,
        "something panicked"
    );
    Ok(())
}

fn run(backend: &'static str, cases: u32) {
    panics();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fixture = RefCell::new(rt.block_on(fixture(backend)));
    let result = runner(cases).run(&call(), |call| {
        rt.block_on(case(&mut fixture.borrow_mut(), &call))
    });
    let mut fixture = fixture.into_inner();
    eprintln!("{backend}: answers {:?}", fixture.tally);
    rt.block_on(async {
        fixture.known = None;
        fixture.service.stop().await.unwrap();
    });
    drop(fixture.hub);
    result.unwrap();
}

#[test]
fn every_call_with_hostile_fields_is_answered_or_refused_cleanly_on_the_file_store() {
    run("file", 512);
}

#[test]
fn every_call_with_hostile_fields_is_answered_or_refused_cleanly_on_the_sqlite_store() {
    run("sqlite", 384);
}
