//! [`CoreSetup`]: everything needed to start a [`HubCore`] inside the hub: the core's options, the
//! session backend and where it keeps sessions, and the model factory. Built from the discovered
//! installation by `taud`, or explicitly by tests.
//!
//! Invariants: opening the store and expiring approvals left pending by an earlier hub happen on
//! start, in that order, before the core serves anything.

use std::sync::Arc;

use tau_api::installation::Installation;

use super::core::HubCore;
use super::error::CoreError;
use super::options::{CoreOptions, DemoModelFactory, ModelFactory, ProviderModelFactory};
use crate::provider::ProviderError;
use crate::store::{SessionBackends, SessionStoreConfig, open_session_store};

/// How to start the hub's session service.
#[derive(Clone)]
pub struct CoreSetup {
    pub options: CoreOptions,
    /// `[sessions].backend`.
    pub backend: String,
    pub store: SessionStoreConfig,
    pub backends: SessionBackends,
    pub factory: Arc<dyn ModelFactory>,
}

impl std::fmt::Debug for CoreSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreSetup")
            .field("backend", &self.backend)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl CoreSetup {
    /// The setup of a discovered installation, with `factory` serving the model roles.
    pub fn with_factory(installation: &Installation, factory: Arc<dyn ModelFactory>) -> Self {
        Self {
            options: CoreOptions::from_installation(installation),
            backend: installation.config.sessions.backend.clone(),
            store: SessionStoreConfig::under(&installation.paths.data_dir),
            backends: SessionBackends::builtin(),
            factory,
        }
    }

    /// The setup of a discovered installation on the offline demo model.
    pub fn demo(installation: &Installation) -> Self {
        Self::with_factory(installation, Arc::new(DemoModelFactory))
    }

    /// The setup of a discovered installation, each role served by its configured provider.
    pub fn from_installation(installation: &Installation) -> Result<Self, ProviderError> {
        let factory = ProviderModelFactory::from_installation(installation)?;
        Ok(Self::with_factory(installation, Arc::new(factory)))
    }

    /// Opens the store, builds the core and starts it (expiring stale approvals).
    pub async fn start(self) -> Result<HubCore, CoreError> {
        let Self {
            options,
            backend,
            store,
            backends,
            factory,
        } = self;
        let store =
            tokio::task::spawn_blocking(move || open_session_store(&backends, &backend, &store))
                .await
                .map_err(|e| CoreError::Unavailable(e.to_string()))?
                .map_err(|e| {
                    CoreError::Unavailable(format!("cannot open the session store: {e}"))
                })?;
        let core = HubCore::new(store, options, factory)?;
        core.start().await?;
        Ok(core)
    }
}
