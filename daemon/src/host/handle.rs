//! [`Hub`]: the shared handle every hub service gets: identity and clock, status and its sources,
//! the dynamic route table, the gRPC mount and the list of started services; and [`HubService`],
//! the contract of a long-lived part of the hub (started with this handle, stopped in reverse
//! order), with its [`ServiceError`].
//!
//! Invariants: cheap to clone (one `Arc`); every lock is a short std lock that is never held
//! across an `.await`; [`Hub::find_service`] sees only services that have started and are not yet
//! stopping; a service that fails to start is logged and skipped, and the hub runs on; what it
//! added to the hub (routes, status sources) before failing is taken back.

use std::any::Any;
use std::io;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use async_trait::async_trait;
use axum::http::Method;
use serde_json::{Map, Value};
use tau_api::components::HubServiceReport;
use tau_api::hub_files::{CrashReport, HubPaths};

use super::files::now_rfc3339;
use super::routes::{RouteError, RouteHandler, RouteKey, RouteTable};
use super::settings::HubOptions;
use super::snapshot::{HubStatus, StatusSource};

/// A service could not be built, started or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A route it wanted is taken.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// An I/O failure (binding a port or a socket, reading a file).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: io::Error,
    },
    /// Anything else, in one line.
    #[error("{0}")]
    Failed(String),
}

impl ServiceError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// A long-lived part of the hub.
///
/// `start` may add routes ([`Hub::add_route`]) and status sources ([`Hub::add_status_source`]);
/// it must clean up anything else it took (a bound port) before returning an error. `stop` is
/// called once, in reverse start order, under the hub's stop deadline; it should return promptly.
#[async_trait]
pub trait HubService: Any + Send + Sync {
    /// The service's name, as listed in `[components.hub] services`.
    fn name(&self) -> &str;
    /// Starts the service.
    async fn start(&self, hub: &Hub) -> Result<(), ServiceError>;
    /// Stops the service.
    async fn stop(&self) -> Result<(), ServiceError>;
}

type Gauge<T> = Arc<dyn Fn() -> T + Send + Sync>;

struct Inner {
    options: HubOptions,
    paths: HubPaths,
    pid: u32,
    started_at: String,
    started: Instant,
    last_crash: Option<CrashReport>,
    heartbeat_at: Mutex<String>,
    listening_port: Mutex<Option<u16>>,
    ready_at: Mutex<Option<String>>,
    status_sources: RwLock<Vec<StatusSource>>,
    routes: RouteTable,
    grpc: RwLock<Option<axum::Router>>,
    services: RwLock<Vec<Arc<dyn HubService>>>,
    service_reports: RwLock<Vec<HubServiceReport>>,
    approvals_pending: RwLock<Option<Gauge<u32>>>,
    nodes: RwLock<Option<Gauge<Vec<String>>>>,
}

/// The hub, as its services see it.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("pid", &self.inner.pid)
            .field("started_at", &self.inner.started_at)
            .finish_non_exhaustive()
    }
}

/// A gRPC router is already mounted on the TCP port.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a gRPC server is already mounted on the hub's TCP port")]
pub struct GrpcMounted;

impl Hub {
    /// A hub that starts now, knowing the latest crash report (from the crash check).
    pub fn new(options: HubOptions, last_crash: Option<CrashReport>) -> Self {
        let started_at = now_rfc3339();
        let paths = options.paths();
        Self {
            inner: Arc::new(Inner {
                options,
                paths,
                pid: std::process::id(),
                heartbeat_at: Mutex::new(started_at.clone()),
                started_at,
                started: Instant::now(),
                last_crash,
                listening_port: Mutex::new(None),
                ready_at: Mutex::new(None),
                status_sources: RwLock::new(Vec::new()),
                routes: RouteTable::default(),
                grpc: RwLock::new(None),
                services: RwLock::new(Vec::new()),
                service_reports: RwLock::new(Vec::new()),
                approvals_pending: RwLock::new(None),
                nodes: RwLock::new(None),
            }),
        }
    }

    /// The options the hub runs with.
    pub fn options(&self) -> &HubOptions {
        &self.inner.options
    }

    /// The hub's file paths.
    pub fn paths(&self) -> &HubPaths {
        &self.inner.paths
    }

    /// The hub's process id.
    pub fn pid(&self) -> u32 {
        self.inner.pid
    }

    /// When the hub started (RFC 3339).
    pub fn started_at(&self) -> &str {
        &self.inner.started_at
    }

    /// Whole seconds since start.
    pub fn uptime_s(&self) -> u64 {
        self.inner.started.elapsed().as_secs()
    }

    /// The last heartbeat (RFC 3339).
    pub fn heartbeat_at(&self) -> String {
        self.inner
            .heartbeat_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records a heartbeat now and returns its time.
    pub fn beat(&self) -> String {
        let now = now_rfc3339();
        now.clone_into(
            &mut self
                .inner
                .heartbeat_at
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        now
    }

    /// The TCP port the control API listens on, once it does.
    pub fn listening_port(&self) -> Option<u16> {
        *self
            .inner
            .listening_port
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the TCP port the control API bound (so `state.json` names it).
    pub fn set_listening_port(&self, port: Option<u16>) {
        *self
            .inner
            .listening_port
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = port;
    }

    /// When every service had started or failed to; `None` while the hub is starting.
    pub fn ready_at(&self) -> Option<String> {
        self.inner
            .ready_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records that the start of every service is over (so `state.json` says the hub is ready).
    pub fn mark_ready(&self) {
        *self
            .inner
            .ready_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(now_rfc3339());
    }

    /// The latest crash report known at start.
    pub fn last_crash(&self) -> Option<&CrashReport> {
        self.inner.last_crash.as_ref()
    }

    /// Adds keys to `/status` (a source may not replace a core key).
    pub fn add_status_source<F>(&self, source: F)
    where
        F: Fn() -> Map<String, Value> + Send + Sync + 'static,
    {
        self.inner
            .status_sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::new(source));
    }

    /// Sets where `approvals_pending` comes from (the tier gate); 0 until one is set.
    pub fn set_approvals_pending_source<F>(&self, source: F)
    where
        F: Fn() -> u32 + Send + Sync + 'static,
    {
        *self
            .inner
            .approvals_pending
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(source));
    }

    /// Sets where `nodes` comes from; empty until one is set.
    pub fn set_nodes_source<F>(&self, source: F)
    where
        F: Fn() -> Vec<String> + Send + Sync + 'static,
    {
        *self
            .inner
            .nodes
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(source));
    }

    /// Adds an HTTP route served on the control API's port. Any axum handler works (an async fn
    /// or closure with extractors). Refused when `(method, path)` exists.
    pub fn add_route<H, T>(&self, method: Method, path: &str, handler: H) -> Result<(), RouteError>
    where
        H: axum::handler::Handler<T, ()>,
        T: 'static,
    {
        self.inner
            .routes
            .add(method, path, RouteHandler::from_axum(handler))
    }

    /// The handler routed at `(method, path)`.
    pub fn route(&self, method: &Method, path: &str) -> Option<RouteHandler> {
        self.inner.routes.get(method, path)
    }

    /// Whether any method is routed at `path`.
    pub fn has_route_path(&self, path: &str) -> bool {
        self.inner.routes.has_path(path)
    }

    pub(crate) fn route_keys(&self) -> Vec<RouteKey> {
        self.inner.routes.keys()
    }

    pub(crate) fn remove_routes(&self, keys: &[RouteKey]) {
        self.inner.routes.remove(keys);
    }

    pub(crate) fn status_source_count(&self) -> usize {
        self.inner
            .status_sources
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub(crate) fn truncate_status_sources(&self, len: usize) {
        self.inner
            .status_sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .truncate(len);
    }

    /// Mounts the gRPC router served on the TCP port (requests with `content-type:
    /// application/grpc*` go to it). Refused when one is mounted.
    pub fn mount_grpc(&self, router: axum::Router) -> Result<(), GrpcMounted> {
        let mut slot = self
            .inner
            .grpc
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return Err(GrpcMounted);
        }
        *slot = Some(router);
        Ok(())
    }

    /// Unmounts the gRPC router.
    pub fn unmount_grpc(&self) {
        *self
            .inner
            .grpc
            .write()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The mounted gRPC router (a cheap clone), if any.
    pub fn grpc_router(&self) -> Option<axum::Router> {
        self.inner
            .grpc
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The started service called `name`; `None` when it failed to start, has not started yet, or
    /// the hub is stopping.
    pub fn find_service(&self, name: &str) -> Option<Arc<dyn HubService>> {
        self.inner
            .services
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|s| s.name() == name)
            .cloned()
    }

    /// [`Hub::find_service`], downcast to the service's concrete type.
    pub fn find_service_as<T: HubService>(&self, name: &str) -> Option<Arc<T>> {
        let service: Arc<dyn std::any::Any + Send + Sync> = self.find_service(name)?;
        service.downcast::<T>().ok()
    }

    pub(crate) fn push_started(&self, service: Arc<dyn HubService>) {
        self.inner
            .services
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(service);
    }

    pub(crate) fn take_started(&self) -> Vec<Arc<dyn HubService>> {
        std::mem::take(
            &mut *self
                .inner
                .services
                .write()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// The names of the started services, in start order.
    pub fn started_services(&self) -> Vec<String> {
        self.inner
            .services
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|s| s.name().to_owned())
            .collect()
    }

    /// Records how a registered service came out at start (the `services` list of `/status`).
    pub(crate) fn record_service(&self, report: HubServiceReport) {
        self.inner
            .service_reports
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(report);
    }

    /// Every registered service with how it came out at start (started, skipped or failed, with
    /// the error), in start order; a service still starting is not listed yet.
    pub fn service_reports(&self) -> Vec<HubServiceReport> {
        self.inner
            .service_reports
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A snapshot of the hub.
    pub fn status(&self) -> HubStatus {
        let approvals = self
            .inner
            .approvals_pending
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let nodes = self
            .inner
            .nodes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let options = &self.inner.options;
        HubStatus {
            role: options.role.clone(),
            profile: options.profile.clone(),
            version: tau_api::VERSION.to_owned(),
            started_at: self.inner.started_at.clone(),
            heartbeat_at: self.heartbeat_at(),
            uptime_s: self.uptime_s(),
            last_crash: self.inner.last_crash.clone(),
            approvals_pending: approvals.map_or(0, |f| f()),
            nodes: nodes.map_or_else(Vec::new, |f| f()),
            pid: self.inner.pid,
        }
    }

    /// The JSON of `GET /status`: [`Hub::status`], `services` ([`Hub::service_reports`]), then
    /// every status source's keys (none may replace those).
    pub fn status_json(&self) -> Value {
        let reports = self.service_reports();
        let services: StatusSource = Arc::new(move || {
            let mut keys = Map::new();
            keys.insert(
                "services".to_owned(),
                serde_json::to_value(&reports).unwrap_or(Value::Null),
            );
            keys
        });
        let mut sources = vec![services];
        sources.extend(
            self.inner
                .status_sources
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned(),
        );
        self.status().to_json(&sources)
    }
}
