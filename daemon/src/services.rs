//! The hub services built into `taud`, in start order: the control API (the TCP port, JSON), then
//! the gRPC server (the Unix socket, and gRPC on the control API's port).
//!
//! Invariant: the control API starts first, so gRPC over TCP is reachable as soon as gRPC starts.

use std::sync::Arc;

use crate::host::{CONTROL_API, ControlApi, ServiceRegistry};
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
