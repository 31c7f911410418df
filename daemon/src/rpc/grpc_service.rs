//! The gRPC hub service (`grpc`): `tau.v1.Tau`, `grpc.health.v1.Health` and server reflection
//! (neither on a node: [`GrpcService::lean`]), served on the Unix socket `hub/taud.sock` (same
//! uid only) and mounted on the control API's TCP port (bearer token only). The socket's connections get the hub's deadlines and cap
//! ([`crate::listen`], HTTP/2 only).
//!
//! It also starts the session service (the [`HubCore`]) with the [`CoreStarter`] it was given (the
//! hub is assembled in `crate::services`); a session service that fails to start is logged,
//! status still answers and the other calls say why.
//!
//! Invariants: both transports serve the same routes, each behind its own check; a start that
//! fails after the session service started stops it again (its reaper and store are released); on
//! stop the
//! health status turns NOT_SERVING, the session service stops (turns cancelled and stored,
//! subscriptions ended), the TCP mount is removed, the socket server drains (bounded by the hub's
//! stop deadline) and the socket file is removed.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::future::BoxFuture;
use tau_api::proto::v1 as pb;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::service::Routes;
use tonic_health::server::HealthReporter;

use super::auth;
use super::deadline;
use super::tau_service::TauApi;
use super::uds;
use crate::host::{Hub, HubService, ServiceError, token};
use crate::hub::HubCore;
use crate::listen::{self, Protocols};

/// The gRPC service's name.
pub const GRPC: &str = "grpc";

struct Running {
    hub: Hub,
    core: Option<HubCore>,
    health: Option<HealthReporter>,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// Starts the session service a gRPC service serves, for the hub it starts in; on failure the
/// reason, which the API then reports. The hub is assembled where services are made
/// (`crate::services::start_core`), not here: this service only serves what it is given.
pub type CoreStarter =
    Arc<dyn Fn(Hub) -> BoxFuture<'static, Result<HubCore, String>> + Send + Sync>;

/// Adds more services to the ones served (e.g. `tau.v1.Nodes`), behind the same checks.
pub type RoutesHook = Arc<dyn Fn(Routes) -> Routes + Send + Sync>;

/// The gRPC hub service.
#[derive(Default)]
pub struct GrpcService {
    running: Mutex<Option<Running>>,
    starter: Option<CoreStarter>,
    routes: Option<RoutesHook>,
    /// The uid allowed on the socket; `None`: the hub's own.
    socket_uid: Option<u32>,
    /// Serve `tau.v1.Tau` (and the hook's routes) only: no health, no reflection (a node's).
    lean: bool,
}

impl GrpcService {
    /// A gRPC service that has not started, serving status only (no session service).
    pub fn new() -> Self {
        Self::default()
    }

    /// A gRPC service that serves the session service (sessions, turns, events, approvals)
    /// `starter` starts when this service starts.
    pub fn with_core_starter(starter: CoreStarter) -> Self {
        Self {
            running: Mutex::new(None),
            starter: Some(starter),
            routes: None,
            socket_uid: None,
            lean: false,
        }
    }

    /// This service without `grpc.health.v1.Health` and server reflection: what a node serves
    /// on its socket for `tau` on that machine, which uses neither (each costs the node memory).
    #[must_use]
    pub fn lean(mut self) -> Self {
        self.lean = true;
        self
    }

    /// This service, also serving what `hook` adds.
    #[must_use]
    pub fn with_routes(mut self, hook: RoutesHook) -> Self {
        self.routes = Some(hook);
        self
    }

    /// This service, letting only `uid` call over the Unix socket instead of the hub's own uid
    /// (tests use it to see a foreign caller refused).
    #[must_use]
    pub fn with_socket_uid(mut self, uid: u32) -> Self {
        self.socket_uid = Some(uid);
        self
    }

    /// The session service this service serves, once started (`None` before, after stop, or
    /// when it did not start); other front ends (the web client) serve the same core.
    pub fn core(&self) -> Option<HubCore> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|running| running.core.clone())
    }

    /// Starts the session service; on failure the reason, which the API then reports.
    async fn start_core(&self, hub: &Hub) -> Result<HubCore, String> {
        match &self.starter {
            Some(starter) => starter(hub.clone()).await,
            None => Err("this hub runs without a session service".to_owned()),
        }
    }
}

/// Stops a session service this service started but will not serve.
async fn stop_core(core: Result<HubCore, String>) {
    if let Ok(core) = core {
        core.shutdown().await;
    }
}

fn failed(what: &str) -> impl FnOnce(String) -> ServiceError + '_ {
    move |e| ServiceError::Failed(format!("{what}: {e}"))
}

#[async_trait]
impl HubService for GrpcService {
    fn name(&self) -> &str {
        GRPC
    }

    async fn start(&self, hub: &Hub) -> Result<(), ServiceError> {
        let paths = hub.paths();
        let token =
            token::ensure(&paths.token_file).map_err(|e| ServiceError::Failed(e.to_string()))?;

        let core = self.start_core(hub).await;
        let mut routes = Routes::new(pb::tau_server::TauServer::new(TauApi::new(
            hub.clone(),
            core.clone(),
        )));
        let mut health = None;
        if !self.lean {
            let (reporter, health_service) = tonic_health::server::health_reporter();
            reporter
                .set_serving::<pb::tau_server::TauServer<TauApi>>()
                .await;
            let reflection = tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                .build_v1();
            let reflection = match reflection {
                Ok(reflection) => reflection,
                Err(e) => {
                    stop_core(core).await;
                    return Err(failed("server reflection")(e.to_string()));
                }
            };
            routes = routes.add_service(health_service).add_service(reflection);
            health = Some(reporter);
        }
        if let Some(hook) = &self.routes {
            routes = hook(routes);
        }
        let grpc = routes
            .prepare()
            .into_axum_router()
            .layer(axum::middleware::from_fn(deadline::apply_grpc_timeout));

        let uid = self
            .socket_uid
            .unwrap_or_else(|| nix::unistd::geteuid().as_raw());
        let over_socket = grpc.clone().layer(axum::middleware::from_fn_with_state(
            uid,
            auth::require_same_uid,
        ));
        let over_tcp = grpc.layer(axum::middleware::from_fn_with_state(
            token,
            auth::require_bearer,
        ));

        let socket = paths.socket.clone();
        let listener = match uds::bind(&socket) {
            Ok(listener) => listener,
            Err(e) => {
                stop_core(core).await;
                let what = format!("cannot listen on {}", socket.display());
                return Err(ServiceError::io(what, e));
            }
        };
        if let Err(e) = hub.mount_grpc(over_tcp) {
            drop(listener);
            let _ = uds::remove(&socket);
            stop_core(core).await;
            return Err(ServiceError::Failed(e.to_string()));
        }
        let (shutdown, signal) = oneshot::channel::<()>();
        let task = tokio::spawn(listen::serve(
            GRPC,
            uds::SocketAcceptor(listener),
            over_socket,
            hub.options().connections,
            Protocols::Http2Only,
            async move {
                let _ = signal.await;
            },
        ));
        tracing::info!(socket = %socket.display(), "gRPC listening");
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = Some(Running {
            hub: hub.clone(),
            core: core.ok(),
            health,
            shutdown,
            task,
        });
        Ok(())
    }

    async fn stop(&self) -> Result<(), ServiceError> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(Running {
            hub,
            core,
            health,
            shutdown,
            task,
        }) = running
        else {
            return Ok(());
        };
        if let Some(health) = health {
            health
                .set_not_serving::<pb::tau_server::TauServer<TauApi>>()
                .await;
        }
        if let Some(core) = core {
            // Ends every turn (stored as cancelled) and every subscription, so the server drains.
            core.shutdown().await;
        }
        hub.unmount_grpc();
        let _ = shutdown.send(());
        let socket = hub.paths().socket.clone();
        let guard = RemoveOnDrop {
            abort: task.abort_handle(),
            socket: socket.clone(),
        };
        let joined = task.await;
        drop(guard);
        joined.map_err(|e| failed("gRPC socket task")(e.to_string()))
    }
}

/// Aborts the socket server and removes the socket file, also when the hub's stop deadline drops
/// the stop future.
struct RemoveOnDrop {
    abort: tokio::task::AbortHandle,
    socket: std::path::PathBuf,
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        self.abort.abort();
        if let Err(e) = uds::remove(&self.socket) {
            tracing::warn!("cannot remove {}: {e}", self.socket.display());
        }
    }
}
