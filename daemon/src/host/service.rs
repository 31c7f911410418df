//! The registry of hub services: which long-lived parts of the hub (the control API, the gRPC
//! server, the Telegram channel) are built from the hub options, in start order. The
//! [`HubService`] contract itself lives with the [`Hub`](super::handle::Hub) handle it is started with.
//!
//! Invariants: a service that fails to build is logged and skipped, and the hub runs on, with a
//! report saying why; an enabled name nobody registered is warned about once.

use std::sync::Arc;

use tau_api::components::HubServiceReport;

use super::handle::{HubService, ServiceError};
use super::settings::HubOptions;

/// Builds a service from the hub options.
pub type ServiceFactory =
    Box<dyn Fn(&HubOptions) -> Result<Arc<dyn HubService>, ServiceError> + Send + Sync>;

/// The known services, in start order.
#[derive(Default)]
pub struct ServiceRegistry {
    entries: Vec<(String, ServiceFactory)>,
}

impl std::fmt::Debug for ServiceRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(n, _)| n))
            .finish()
    }
}

impl ServiceRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a service factory under `name` (started after those registered before it).
    pub fn register<F>(&mut self, name: impl Into<String>, factory: F) -> &mut Self
    where
        F: Fn(&HubOptions) -> Result<Arc<dyn HubService>, ServiceError> + Send + Sync + 'static,
    {
        self.entries.push((name.into(), Box::new(factory)));
        self
    }

    /// The registered names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Builds the services enabled in `options`, logging and skipping those that fail to build,
    /// and warning about enabled names nobody registered.
    pub fn build(&self, options: &HubOptions) -> Vec<Arc<dyn HubService>> {
        self.build_all(options)
            .into_iter()
            .filter_map(|outcome| match outcome {
                BuildOutcome::Built(service) => Some(service),
                BuildOutcome::NotBuilt(_) => None,
            })
            .collect()
    }

    /// As [`ServiceRegistry::build`], one outcome per registered service in registration order:
    /// the service, or the report of why it was not built (skipped by `[components.hub]
    /// services`, or failed to build).
    pub fn build_all(&self, options: &HubOptions) -> Vec<BuildOutcome> {
        for wanted in &options.services {
            if !self.entries.iter().any(|(n, _)| n == wanted) {
                tracing::warn!(
                    service = %wanted,
                    known = ?self.names(),
                    "[components.hub] services names an unknown hub service; ignored"
                );
            }
        }
        let mut outcomes = Vec::with_capacity(self.entries.len());
        for (name, factory) in &self.entries {
            if !options.service_enabled(name) {
                tracing::info!(service = %name, "hub service disabled by [components.hub] services");
                outcomes.push(BuildOutcome::NotBuilt(HubServiceReport::skipped(
                    name.clone(),
                    "not in [components.hub] services",
                )));
                continue;
            }
            match factory(options) {
                Ok(service) => outcomes.push(BuildOutcome::Built(service)),
                Err(e) => {
                    tracing::error!(service = %name, "hub service failed to build and is skipped: {e}");
                    outcomes.push(BuildOutcome::NotBuilt(HubServiceReport::failed(
                        name.clone(),
                        format!("failed to build: {e}"),
                    )));
                }
            }
        }
        outcomes
    }
}

/// What [`ServiceRegistry::build_all`] made of one registered service.
pub enum BuildOutcome {
    /// Built, ready to start.
    Built(Arc<dyn HubService>),
    /// Not built: skipped or failed, with the report the hub shows in `/status`.
    NotBuilt(HubServiceReport),
}

impl std::fmt::Debug for BuildOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildOutcome::Built(service) => f.debug_tuple("Built").field(&service.name()).finish(),
            BuildOutcome::NotBuilt(report) => f.debug_tuple("NotBuilt").field(report).finish(),
        }
    }
}
