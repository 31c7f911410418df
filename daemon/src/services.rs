//! The hub services built into `taud`, in start order: the control API (the TCP port, JSON), then
//! the gRPC server (the Unix socket, and gRPC on the control API's port), then the channels that
//! are clients of it (Telegram).
//!
//! The hub's session service is assembled here ([`start_core`]: the `HubCore` and what the hub's
//! status reports of it), and handed to the gRPC service that serves it.
//!
//! Without the `hub` feature the Telegram channel and the web client are not built
//! ([`HUB_LEFT_OUT`] says so when such a `taud` is started as a hub).
//!
//! Invariant: the control API starts first, so gRPC over TCP is reachable as soon as gRPC starts;
//! a channel starts after gRPC (its socket exists) and stops before it; the web client starts
//! after gRPC too and serves the session service gRPC started.

use std::sync::Arc;

use crate::host::Hub;
use crate::host::{CONTROL_API, ControlApi, ServiceRegistry};
#[cfg(feature = "hub")]
use crate::host::{TELEGRAM_SERVICE, TelegramChannelService, TelegramLaunch};
use crate::hub::{CoreSetup, HubCore};
use crate::link::NodeServices;
use crate::rpc::{GRPC, GrpcService, RoutesHook};
#[cfg(feature = "hub")]
use crate::web::{WEB_SERVICE, WebLaunch, WebService};

/// Why a `taud` built without the `hub` feature refuses to run as a hub (one line; exit 78).
pub const HUB_LEFT_OUT: &str = "this taud was built without the hub (cargo feature `hub`) and \
     runs only as a node (TAU_ROLE=node); build the full hub with `cargo build --release -p taud`";

/// A registry with the built-in services.
pub fn builtin_services() -> ServiceRegistry {
    let mut registry = ServiceRegistry::new();
    registry.register(CONTROL_API, |_| Ok(Arc::new(ControlApi::new())));
    registry.register(GRPC, |_| Ok(Arc::new(GrpcService::new())));
    registry
}

/// The built-in services, the gRPC server also serving the session service (sessions, turns,
/// events, approvals) started from `setup`.
pub fn builtin_services_with_core(setup: CoreSetup) -> ServiceRegistry {
    let mut registry = ServiceRegistry::new();
    registry.register(CONTROL_API, |_| Ok(Arc::new(ControlApi::new())));
    registry.register(GRPC, move |_| Ok(Arc::new(grpc_service(setup.clone()))));
    registry
}

/// [`builtin_services_with_core`] for a hub that also serves nodes: `tau.v1.Nodes` beside
/// `tau.v1.Tau`, and the node listener after gRPC.
pub fn builtin_services_with_nodes(setup: CoreSetup, nodes: &NodeServices) -> ServiceRegistry {
    let mut registry = ServiceRegistry::new();
    let hook = nodes_hook(nodes);
    registry.register(CONTROL_API, |_| Ok(Arc::new(ControlApi::new())));
    registry.register(GRPC, move |_| {
        Ok(Arc::new(
            grpc_service(setup.clone()).with_routes(hook.clone()),
        ))
    });
    nodes.register(&mut registry);
    registry
}

/// The services of a `taud` running as a node: no model and no agent; the control API, gRPC
/// (status and `tau.v1.Nodes` on the local socket, without health or reflection) and the link to
/// its hub.
pub fn node_role_services(nodes: &NodeServices) -> ServiceRegistry {
    let mut registry = ServiceRegistry::new();
    let hook = nodes_hook(nodes);
    registry.register(CONTROL_API, |_| Ok(Arc::new(ControlApi::new())));
    registry.register(GRPC, move |_| {
        Ok(Arc::new(
            GrpcService::new().lean().with_routes(hook.clone()),
        ))
    });
    nodes.register(&mut registry);
    registry
}

fn nodes_hook(nodes: &NodeServices) -> RoutesHook {
    let nodes = nodes.clone();
    Arc::new(move |routes| nodes.add_routes(routes))
}

/// The gRPC service serving the session service started from `setup` (see [`start_core`]).
pub fn grpc_service(setup: CoreSetup) -> GrpcService {
    GrpcService::with_core_starter(Arc::new(move |hub| {
        Box::pin(start_core(setup.clone(), hub))
    }))
}

/// Assembles the hub's session service: starts the [`HubCore`] from `setup` and gives `hub`'s
/// status what it reports of it (pending approvals, MCP servers, routines). On failure the reason,
/// logged, which the API then reports.
pub async fn start_core(setup: CoreSetup, hub: Hub) -> Result<HubCore, String> {
    match setup.start().await {
        Ok(core) => {
            let registry = Arc::clone(core.registry());
            hub.set_approvals_pending_source(move || {
                u32::try_from(registry.pending_count()).unwrap_or(u32::MAX)
            });
            // Weak: the hub's status sources outlive a core whose start failed or that stopped,
            // and a strong handle here would keep the whole core alive.
            if !core.mcp().is_empty() {
                let mcp = core.downgrade();
                hub.add_status_source(move || {
                    HubCore::from_weak(&mcp)
                        .map(|core| core.mcp_status())
                        .unwrap_or_default()
                });
            }
            let routines = core.downgrade();
            hub.add_status_source(move || {
                HubCore::from_weak(&routines)
                    .map(|core| core.routine_status().to_json())
                    .unwrap_or_default()
            });
            Ok(core)
        }
        Err(e) => {
            tracing::error!("the session service did not start: {e}");
            Err(e.to_string())
        }
    }
}

/// Adds the Telegram channel (after gRPC, so the socket it connects to exists). It runs only when
/// `[component.telegram]` is configured and the token is set; otherwise its state says why.
#[cfg(feature = "hub")]
pub fn register_telegram(registry: &mut ServiceRegistry, launch: TelegramLaunch) {
    registry.register(TELEGRAM_SERVICE, move |_| {
        Ok(Arc::new(TelegramChannelService::new(launch.clone())))
    });
}

/// Adds the web client (after gRPC, whose session service it serves). Register it only when
/// `[web] listen` is set ([`WebLaunch::from_installation`]).
#[cfg(feature = "hub")]
pub fn register_web(registry: &mut ServiceRegistry, launch: WebLaunch) {
    registry.register(WEB_SERVICE, move |_| {
        let core = Arc::new(|hub: &Hub| {
            hub.find_service_as::<GrpcService>(GRPC)
                .and_then(|grpc| grpc.core())
        });
        Ok(Arc::new(WebService::new(launch.clone(), core)))
    });
}
