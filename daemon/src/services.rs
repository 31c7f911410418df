//! The hub services built into `taud`, in start order: the control API (the TCP port, JSON), then
//! the gRPC server (the Unix socket, and gRPC on the control API's port), then the channels that
//! are clients of it (Telegram).
//!
//! Invariant: the control API starts first, so gRPC over TCP is reachable as soon as gRPC starts;
//! a channel starts after gRPC (its socket exists) and stops before it.

use std::sync::Arc;

use crate::host::{
    CONTROL_API, ControlApi, ServiceRegistry, TELEGRAM_SERVICE, TelegramChannelService,
    TelegramLaunch,
};
use crate::hub::CoreSetup;
use crate::rpc::{GRPC, GrpcService};

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
    registry.register(GRPC, move |_| {
        Ok(Arc::new(GrpcService::with_core(setup.clone())))
    });
    registry
}

/// Adds the Telegram channel (after gRPC, so the socket it connects to exists). It runs only when
/// `[component.telegram]` is configured and the token is set; otherwise its state says why.
pub fn register_telegram(registry: &mut ServiceRegistry, launch: TelegramLaunch) {
    registry.register(TELEGRAM_SERVICE, move |_| {
        Ok(Arc::new(TelegramChannelService::new(launch.clone())))
    });
}
