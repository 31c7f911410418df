//! The real hub in-process (the gRPC service on a temporary socket, the fake model) and the
//! Telegram channel run against it and a [`super::fake_bot::FakeBot`].
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tau_api::config::{RoleConfig, TelegramConfig};
use tau_api::credentials::Secret;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use tau_telegram::state::{OwnerBinding, StatePaths};
use tau_telegram::{ChannelError, ChannelOptions, ChannelPhase, run_channel};
use taud::host::{Hub, HubOptions, HubService};
use taud::hub::{CoreOptions, CoreSetup, SharedModelFactory};
use taud::rpc::{GrpcService, RoutesHook};
use taud::store::{Durability, SessionBackends, SessionStoreConfig};
use taud::testing::{FakeModel, FakeReply};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;

use super::fake_bot::{FakeBot, OWNER, TEST_TOKEN};

pub struct TestHub {
    pub hub: Hub,
    pub service: GrpcService,
    pub model: Arc<FakeModel>,
    /// Declared last, so dropped last: what writes into it is gone first.
    pub tmp: tempfile::TempDir,
}

pub fn core_options() -> CoreOptions {
    let mut options = CoreOptions::default();
    options.roles.insert(
        "brain".to_owned(),
        RoleConfig {
            provider: "fake".into(),
            model_id: "brain-model".into(),
            max_tokens: 100,
            cache: None,
            fallback: None,
            tuning: Default::default(),
        },
    );
    options
}

impl TestHub {
    pub async fn start(replies: Vec<FakeReply>) -> Self {
        Self::start_with(replies, None, None).await
    }

    /// A hub that answers StartTurn with its headers and then sends nothing, ever (every other
    /// call as the real hub answers it).
    pub async fn start_silent_turns() -> Self {
        let hook: RoutesHook = Arc::new(|routes: Routes| {
            let silent = axum::routing::post(|| async {
                let never = futures::stream::pending::<Result<axum::body::Bytes, Infallible>>();
                axum::response::Response::builder()
                    .header("content-type", "application/grpc")
                    .body(axum::body::Body::from_stream(never))
                    .unwrap()
            });
            Routes::from(
                routes
                    .into_axum_router()
                    .route("/tau.v1.Tau/StartTurn", silent),
            )
        });
        Self::start_with(Vec::new(), None, Some(hook)).await
    }

    /// [`TestHub::start`] with routines on (their file in the temporary directory), a routine's
    /// question held for the owner for `hold`.
    pub async fn start_with_routines(replies: Vec<FakeReply>, hold: Duration) -> Self {
        Self::start_with(replies, Some(hold), None).await
    }

    async fn start_with(
        replies: Vec<FakeReply>,
        routine_hold: Option<Duration>,
        routes: Option<RoutesHook>,
    ) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let mut core = core_options();
        if let Some(hold) = routine_hold {
            core.routines_file = Some(tmp.path().join("routines.json"));
            core.routine_approval_timeout = hold;
        }
        let options = HubOptions::new(tmp.path().join("data"));
        let dir = options.paths().dir.clone();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let model = Arc::new(FakeModel::scripted(replies));
        let store = tmp.path().join("store");
        let setup = CoreSetup {
            options: core,
            backend: "file".to_owned(),
            store: SessionStoreConfig {
                sessions_dir: store.join("sessions"),
                sqlite_path: store.join("sessions.db"),
                durability: Durability::NoSync,
            },
            backends: SessionBackends::builtin(),
            factory: Arc::new(SharedModelFactory(Arc::clone(&model) as _)),
        };
        let hub = Hub::new(options, None);
        let mut service =
            taud::services::grpc_service(setup).with_socket_uid(nix::unistd::geteuid().as_raw());
        if let Some(hook) = routes {
            service = service.with_routes(hook);
        }
        service.start(&hub).await.unwrap();
        TestHub {
            tmp,
            hub,
            service,
            model,
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.hub.paths().socket.clone()
    }

    pub fn state_paths(&self) -> StatePaths {
        StatePaths::for_data_dir(&self.tmp.path().join("data"))
    }

    pub async fn client(&self) -> TauClient<tonic::transport::Channel> {
        tau_telegram::hub_link::connect(&self.socket())
            .await
            .unwrap()
    }

    /// Binds the owner as a finished pairing would.
    pub fn pair_owner(&self) {
        tau_telegram::state::write_owner(&self.state_paths(), &OwnerBinding::new(OWNER, OWNER, 1))
            .unwrap();
    }

    /// The stored `tool_call` records of `session` whose tool ran.
    pub async fn tools_run(&self, session: &str) -> Vec<String> {
        let events = self
            .client()
            .await
            .read_events(pb::ReadEventsRequest {
                session_id: session.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .events;
        events
            .into_iter()
            .filter(|e| e.r#type == "tool_call" && e.json.contains("\"success\""))
            .map(|e| e.json)
            .collect()
    }

    /// Every stored event of `session` of type `kind`.
    pub async fn stored(&self, session: &str, kind: &str) -> Vec<String> {
        self.client()
            .await
            .read_events(pb::ReadEventsRequest {
                session_id: session.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .events
            .into_iter()
            .filter(|e| e.r#type == kind)
            .map(|e| e.json)
            .collect()
    }

    /// Adds a prompt routine `name` (the owner's) whose turns run on `approval_channel`; it is due
    /// only in 2099, so it fires when run.
    pub async fn add_prompt_routine(&self, name: &str, text: &str, approval_channel: &str) {
        self.client()
            .await
            .add_routine(pb::AddRoutineRequest {
                name: name.into(),
                at: "2099-12-31 23:00".into(),
                action: Some(pb::add_routine_request::Action::Prompt(
                    pb::RoutinePromptAction {
                        text: text.into(),
                        approval_channel: approval_channel.into(),
                    },
                )),
                catch_up: "skip".into(),
                ..Default::default()
            })
            .await
            .unwrap();
    }

    /// Fires routine `name` now; the number of its firing.
    pub async fn run_routine(&self, name: &str) -> u64 {
        self.client()
            .await
            .run_routine(pb::RunRoutineRequest {
                name: name.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .firing
    }

    /// Waits for firing `number` of routine `name` to end; that firing.
    pub async fn ended_firing(&self, name: &str, number: u64) -> pb::RoutineFiring {
        let end = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let firings = self
                .client()
                .await
                .routine_history(pb::RoutineHistoryRequest { name: name.into() })
                .await
                .unwrap()
                .into_inner()
                .firings;
            if let Some(firing) = firings
                .into_iter()
                .find(|f| f.number == number && f.outcome != "running")
            {
                return firing;
            }
            assert!(
                std::time::Instant::now() < end,
                "firing {number} of {name} did not end"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Holds an attachment on channel `telegram` for `session`, as a second telegram client
    /// would, so an approval outlives the channel's restart.
    pub async fn hold_attachment(&self, session: &str) -> tonic::Streaming<pb::SubscribeResponse> {
        let mut stream = self
            .client()
            .await
            .subscribe(pb::SubscribeRequest {
                session_id: session.into(),
                after_seq: None,
                channel: "telegram".into(),
                stream_id: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        stream.message().await.unwrap().unwrap();
        stream
    }

    /// The approvals asked on `channel`, as the hub offers them to a watcher.
    pub async fn watch_approvals(&self, channel: &str) -> tonic::Streaming<pb::PendingApproval> {
        self.client()
            .await
            .watch_approvals(pb::WatchApprovalsRequest {
                channel: channel.into(),
            })
            .await
            .unwrap()
            .into_inner()
    }

    pub async fn pending(&self) -> Vec<pb::PendingApproval> {
        self.client()
            .await
            .list_pending_approvals(pb::ListPendingApprovalsRequest::default())
            .await
            .unwrap()
            .into_inner()
            .approvals
    }
}

/// A running channel.
pub struct RunningChannel {
    pub stop: CancellationToken,
    pub phase: watch::Receiver<ChannelPhase>,
    pub task: JoinHandle<Result<(), ChannelError>>,
}

impl RunningChannel {
    pub async fn stop(self) -> Result<(), ChannelError> {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("the channel stops in time")
            .unwrap()
    }

    /// Waits for the run to end by itself.
    pub async fn ended(self) -> Result<(), ChannelError> {
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("the channel ends in time")
            .unwrap()
    }
}

pub fn config(bot: &FakeBot) -> TelegramConfig {
    TelegramConfig {
        api_base: bot.base.clone(),
        approval_timeout_seconds: 600,
        poll_timeout_seconds: 1,
        owner_user_id: None,
        owner_chat_id: None,
    }
}

pub fn start_channel(hub: &TestHub, config: TelegramConfig) -> RunningChannel {
    start_channel_with_token(hub, config, TEST_TOKEN)
}

pub fn start_channel_with_token(
    hub: &TestHub,
    config: TelegramConfig,
    token: &str,
) -> RunningChannel {
    start_channel_with(hub, config, token, tau_telegram::hub_link::CALL_TIMEOUT)
}

/// [`start_channel_with_token`] whose turn relays wait `hub_call_timeout` for the hub.
pub fn start_channel_with(
    hub: &TestHub,
    config: TelegramConfig,
    token: &str,
    hub_call_timeout: Duration,
) -> RunningChannel {
    let options = ChannelOptions {
        config,
        token: Secret::new(token),
        state: hub.state_paths(),
        socket: hub.socket(),
        lang: Lang::En,
        hub_call_timeout,
    };
    let (tx, rx) = watch::channel(ChannelPhase::Starting);
    let stop = CancellationToken::new();
    let task = tokio::spawn(run_channel(options, tx, stop.clone()));
    RunningChannel {
        stop,
        phase: rx,
        task,
    }
}

/// The chat's session id, once the channel stored it.
pub async fn session_of(hub: &TestHub) -> String {
    let paths = hub.state_paths();
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(id) = tau_telegram::state::read_session(&paths).unwrap() {
            return id;
        }
        assert!(std::time::Instant::now() < end, "no session stored");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The next approval a [`TestHub::watch_approvals`] stream offers.
pub async fn next_asked(stream: &mut tonic::Streaming<pb::PendingApproval>) -> pb::PendingApproval {
    tokio::time::timeout(Duration::from_secs(20), stream.message())
        .await
        .expect("an approval was asked in time")
        .unwrap()
        .expect("the watch goes on")
}
