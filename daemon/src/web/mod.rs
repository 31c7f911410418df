//! The web client (`web` service): a page served by `taud` when `[web] listen` is set, through
//! which an enrolled browser chats, watches sessions and answers approvals, over the same
//! [`HubCore`] the gRPC API serves (JSON requests and one Server-Sent Events stream per session,
//! on channel [`WEB_CHANNEL`]).
//!
//! - `guard`: Host and Origin checks and the security headers of every response.
//! - `device_auth`: pairing codes, challenges, signatures and sessions; `device_store`: the enrolled
//!   devices' file; `signin`: the enrolment and sign-in requests; `owner`: what `tau web pair`,
//!   `devices` and `revoke` call, on the hub's control port with the hub token.
//! - `api`: sessions, turns, approvals and status as JSON; `hub_views`: routines with their last
//!   firings and the paired nodes as JSON; `stream`: a session's events as SSE; `event_json`: the
//!   JSON of one event; `assets`: the page (embedded: no build step, no other host); `texts`: its
//!   chrome from the message table the terminal uses.
//!
//! Invariants: loopback unless TLS is configured (checked at load and again at start); a
//! configured certificate and key that do not load refuse the hub's start ([`WebLaunch::check_tls`],
//! called by `taud` before it takes the lock), and the web client's start if they broke since; every
//! request passes `guard` first; nothing but a fresh signed challenge makes a session, and no
//! token ever travels in a URL; a decision counts only from a stream this device holds, which the
//! hub showed the approval (the core's one-winner path decides); revoking a device ends its
//! sessions and streams at once; the device file is written off the async executor.

mod api;
mod assets;
mod device_auth;
pub mod device_store;
mod event_json;
pub mod guard;
mod https;
mod hub_views;
mod owner;
mod signin;
mod stream;
mod texts;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::DefaultBodyLimit;
use tau_api::config::WebConfig;
use tau_api::installation::Installation;
use tau_api::lang::Lang;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::host::{Hub, HubService, ServiceError};
use crate::hub::HubCore;
use crate::listen::{self, Protocols};
use crate::node::NodeRegistry;
use device_auth::Auth;
use device_store::{DEVICES_FILE, Devices};
use guard::Origins;

pub use device_auth::{PAIR_TTL, SESSION_TTL};

/// The service's name.
pub const WEB_SERVICE: &str = tau_api::config::WEB_COMPONENT;
/// The channel of every turn and stream of the web client.
pub const WEB_CHANNEL: &str = "web";
/// The largest request body read.
const MAX_BODY: usize = 64 * 1024;

/// Test knob: how long a session cookie lasts, in seconds (1..=3600; it can only shorten
/// [`SESSION_TTL`]), so a test sees a stream end at its cookie's expiry without waiting an hour.
/// Not a setting: a value that does not parse is ignored.
pub const SESSION_SECONDS_ENV: &str = "TAU_WEB_SESSION_SECONDS";

/// Finds the session service to serve (the one the gRPC service started).
pub type CoreLookup = Arc<dyn Fn(&Hub) -> Option<HubCore> + Send + Sync>;

/// What the web client is started with.
#[derive(Debug, Clone)]
pub struct WebLaunch {
    pub config: WebConfig,
    /// The chrome's language (`[ui] language`).
    pub lang: Lang,
    /// How long a session cookie lasts ([`SESSION_TTL`] unless [`SESSION_SECONDS_ENV`] shortens it).
    pub session_ttl: Duration,
    /// The paired nodes the page lists (none on a hub without a node registry).
    pub nodes: Option<Arc<NodeRegistry>>,
}

impl WebLaunch {
    /// The web client's settings, when `[web] listen` is set.
    pub fn from_installation(installation: &Installation) -> Option<Self> {
        let config = installation.config.web.clone();
        config.listen?;
        let session_ttl = installation
            .env
            .non_empty(SESSION_SECONDS_ENV)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|s| (1..=SESSION_TTL.as_secs()).contains(s))
            .map_or(SESSION_TTL, Duration::from_secs);
        Some(Self {
            config,
            lang: installation.config.ui.language,
            session_ttl,
            nodes: None,
        })
    }

    /// The same, listing the nodes of `registry`.
    #[must_use]
    pub fn with_nodes(mut self, registry: Arc<NodeRegistry>) -> Self {
        self.nodes = Some(registry);
        self
    }

    /// Loads the configured TLS certificate and key (when `tls_cert` and `tls_key` are set), so a
    /// file that is missing, unreadable or not PEM refuses the hub's start: one line naming the key
    /// and the file.
    pub fn check_tls(&self) -> Result<(), String> {
        match (&self.config.tls_cert, &self.config.tls_key) {
            (Some(cert), Some(key)) => https::server_config(cert, key).map(drop),
            _ => Ok(()),
        }
    }
}

/// What the handlers share.
pub(crate) struct WebState {
    core: HubCore,
    origins: Arc<Origins>,
    auth: Auth,
    devices: Mutex<Devices>,
    devices_file: PathBuf,
    /// Live event streams: stream key → (device id, the core's attachment id).
    streams: Mutex<HashMap<String, (String, String)>>,
    lang: Lang,
    tls: bool,
    /// The paired nodes, when the hub has a registry.
    nodes: Option<Arc<NodeRegistry>>,
    /// Where a pairing link points (the page's origin).
    link_base: String,
    stop: CancellationToken,
}

impl WebState {
    fn devices(&self) -> MutexGuard<'_, Devices> {
        self.devices.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn streams(&self) -> MutexGuard<'_, HashMap<String, (String, String)>> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Saves the device file off the executor.
    async fn save_devices(&self) -> Result<(), String> {
        let devices = self.devices().clone();
        let path = self.devices_file.clone();
        tokio::task::spawn_blocking(move || devices.save(&path))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
    }
}

struct Running {
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
    stop: CancellationToken,
}

/// The web client service.
pub struct WebService {
    launch: WebLaunch,
    core: CoreLookup,
    running: Mutex<Option<Running>>,
}

impl WebService {
    pub fn new(launch: WebLaunch, core: CoreLookup) -> Self {
        Self {
            launch,
            core,
            running: Mutex::new(None),
        }
    }

    fn link_base(&self, bound: SocketAddr) -> String {
        if let Some(origin) = &self.launch.config.public_origin {
            return origin.clone();
        }
        let scheme = if self.launch.config.tls() {
            "https"
        } else {
            "http"
        };
        let host = if bound.ip().is_unspecified() {
            SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), bound.port())
        } else {
            bound
        };
        format!("{scheme}://{host}")
    }
}

fn failed(what: impl std::fmt::Display) -> ServiceError {
    ServiceError::Failed(what.to_string())
}

#[async_trait]
impl HubService for WebService {
    fn name(&self) -> &str {
        WEB_SERVICE
    }

    async fn start(&self, hub: &Hub) -> Result<(), ServiceError> {
        let config = &self.launch.config;
        let Some(listen) = config.listen else {
            return Err(failed("[web] listen is not set"));
        };
        if !listen.ip().is_loopback() && !config.tls() {
            return Err(failed(format!(
                "web.listen = {listen:?} is not a loopback address: set web.tls_cert and web.tls_key"
            )));
        }
        let tls = match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => Some(https::server_config(cert, key).map_err(failed)?),
            _ => None,
        };
        let core = (self.core)(hub).ok_or_else(|| {
            failed("the web client needs the session service, which is not running")
        })?;
        let devices_file = hub.paths().dir.join(DEVICES_FILE);
        let path = devices_file.clone();
        let devices = tokio::task::spawn_blocking(move || Devices::load(&path))
            .await
            .map_err(failed)?
            .map_err(failed)?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| ServiceError::io(format!("cannot listen on {listen}"), e))?;
        let bound = listener
            .local_addr()
            .map_err(|e| ServiceError::io("cannot read the bound address", e))?;
        let stop = CancellationToken::new();
        let state = Arc::new(WebState {
            core,
            origins: Arc::new(Origins::new(
                bound,
                tls.is_some(),
                config.public_origin.clone(),
            )),
            auth: Auth::new(self.launch.session_ttl),
            devices: Mutex::new(devices),
            devices_file,
            streams: Mutex::new(HashMap::new()),
            lang: self.launch.lang,
            tls: tls.is_some(),
            nodes: self.launch.nodes.clone(),
            link_base: self.link_base(bound),
            stop: stop.clone(),
        });
        owner::add_routes(hub, &state)?;
        let app = router(&state);
        let (shutdown, signal) = oneshot::channel::<()>();
        let limits = hub.options().connections;
        let signal = async move {
            let _ = signal.await;
        };
        let task = match tls {
            Some(tls) => tokio::spawn(listen::serve(
                WEB_SERVICE,
                https::TlsAcceptor::new(listener, tls),
                app,
                limits,
                Protocols::Http1And2,
                signal,
            )),
            None => tokio::spawn(listen::serve(
                WEB_SERVICE,
                listener,
                app,
                limits,
                Protocols::Http1And2,
                signal,
            )),
        };
        tracing::info!(%bound, "web client listening");
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = Some(Running {
            shutdown,
            task,
            stop,
        });
        Ok(())
    }

    async fn stop(&self) -> Result<(), ServiceError> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Running {
            shutdown,
            task,
            stop,
        }) = running
        {
            // Streams end first, so the server drains.
            stop.cancel();
            let _ = shutdown.send(());
            let _guard = AbortOnDrop(task.abort_handle());
            task.await
                .map_err(|e| failed(format!("web client task: {e}")))?;
        }
        Ok(())
    }
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Every route of the page, behind the guard.
fn router(state: &Arc<WebState>) -> axum::Router {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/app.css", get(assets::style))
        .route("/api/boot", get(signin::boot))
        .route("/api/enroll", post(signin::enroll))
        .route("/api/challenge", post(signin::challenge))
        .route("/api/login", post(signin::login))
        .route("/api/logout", post(signin::logout))
        .route("/api/sessions", get(api::sessions))
        .route("/api/open", post(api::open))
        .route("/api/messages", get(api::messages))
        .route("/api/turn", post(api::turn))
        .route("/api/cancel", post(api::cancel))
        .route("/api/decide", post(api::decide))
        .route("/api/pending", get(api::pending))
        .route("/api/status", get(api::status))
        .route("/api/routines", get(hub_views::routines))
        .route("/api/nodes", get(hub_views::nodes))
        .route("/api/events", get(stream::events))
        .fallback(assets::not_found)
        .with_state(Arc::clone(state))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state.origins),
            guard::protect,
        ))
}
