//! Which session backend `[sessions].backend` names: a `SessionBackends` registry value holding the
//! two built-ins (`file`, `sqlite`) plus whatever code registers, and `open_session_store`.
//!
//! Invariants: the registry is a plain value passed to whoever opens stores (no global state);
//! `register_session_backend` replaces a backend of the same name, built-ins included, since it is
//! explicit code; an unknown name is `SessionError::UnknownBackend` listing the known ones.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::store::contract::{Durability, SessionStore};
use crate::store::file::FileSessionStore;
#[cfg(feature = "hub")]
use crate::store::sqlite::SqliteSessionStore;
use crate::store::store_error::SessionError;

/// The backend used when `[sessions].backend` is not set.
pub const DEFAULT_SESSION_BACKEND: &str = "file";

/// Where and how a backend keeps sessions; built from TAU_DATA_DIR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStoreConfig {
    /// The file backend's directory (`<TAU_DATA_DIR>/sessions`).
    pub sessions_dir: PathBuf,
    /// The sqlite backend's database (`<TAU_DATA_DIR>/sessions.db`).
    pub sqlite_path: PathBuf,
    pub durability: Durability,
}

impl SessionStoreConfig {
    /// The standard places under `data_dir`, fully durable.
    pub fn under(data_dir: &Path) -> Self {
        Self {
            sessions_dir: data_dir.join("sessions"),
            sqlite_path: data_dir.join(tau_api::paths::SQLITE_FILE_NAME),
            durability: Durability::Full,
        }
    }
}

/// Builds a store from the configuration.
pub type SessionBackendFactory =
    Arc<dyn Fn(&SessionStoreConfig) -> Result<Arc<dyn SessionStore>, SessionError> + Send + Sync>;

/// The session backends known to this process, by name.
#[derive(Clone)]
pub struct SessionBackends {
    factories: BTreeMap<String, SessionBackendFactory>,
}

impl Default for SessionBackends {
    fn default() -> Self {
        Self::builtin()
    }
}

impl SessionBackends {
    /// A registry with nothing in it.
    pub fn empty() -> Self {
        Self {
            factories: BTreeMap::new(),
        }
    }

    /// The built-ins: `file` and `sqlite` (`sqlite` only with the `hub` feature).
    pub fn builtin() -> Self {
        let mut backends = Self::empty();
        backends.register_session_backend("file", |config: &SessionStoreConfig| {
            let store = FileSessionStore::open(&config.sessions_dir, config.durability)?;
            Ok(Arc::new(store) as Arc<dyn SessionStore>)
        });
        #[cfg(feature = "hub")]
        backends.register_session_backend("sqlite", |config: &SessionStoreConfig| {
            let store = SqliteSessionStore::open(&config.sqlite_path, config.durability)?;
            Ok(Arc::new(store) as Arc<dyn SessionStore>)
        });
        backends
    }

    /// Registers (or replaces) the backend `name`.
    pub fn register_session_backend<F>(&mut self, name: impl Into<String>, factory: F)
    where
        F: Fn(&SessionStoreConfig) -> Result<Arc<dyn SessionStore>, SessionError>
            + Send
            + Sync
            + 'static,
    {
        self.factories.insert(name.into(), Arc::new(factory));
    }

    /// Whether `name` is registered (for validating a config without opening anything).
    pub fn contains(&self, name: &str) -> bool {
        self.factories.contains_key(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.factories.keys().map(String::as_str).collect()
    }

    /// Opens a store with the backend `name`.
    pub fn open(
        &self,
        name: &str,
        config: &SessionStoreConfig,
    ) -> Result<Arc<dyn SessionStore>, SessionError> {
        let factory = self
            .factories
            .get(name)
            .ok_or_else(|| SessionError::UnknownBackend {
                name: name.to_owned(),
                known: self.names().join(", "),
            })?;
        factory(config)
    }
}

impl std::fmt::Debug for SessionBackends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

/// Opens the session store `[sessions].backend` names.
pub fn open_session_store(
    backends: &SessionBackends,
    backend_name: &str,
    config: &SessionStoreConfig,
) -> Result<Arc<dyn SessionStore>, SessionError> {
    backends.open(backend_name, config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_open_in_their_places() {
        let dir = tempfile::tempdir().unwrap();
        let config = SessionStoreConfig::under(dir.path());
        let backends = SessionBackends::builtin();
        assert_eq!(backends.names(), vec!["file", "sqlite"]);
        let file = open_session_store(&backends, "file", &config).unwrap();
        assert_eq!(file.backend_name(), "file");
        assert!(dir.path().join("sessions").is_dir());
        let sqlite = open_session_store(&backends, "sqlite", &config).unwrap();
        assert_eq!(sqlite.backend_name(), "sqlite");
        assert!(dir.path().join("sessions.db").is_file());
    }

    #[test]
    fn unknown_backends_name_the_known_ones() {
        let dir = tempfile::tempdir().unwrap();
        let err = open_session_store(
            &SessionBackends::builtin(),
            "cloud",
            &SessionStoreConfig::under(dir.path()),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown session backend \"cloud\" (known: file, sqlite)"
        );
    }

    #[test]
    fn registered_backends_are_used_and_replace_builtins() {
        let dir = tempfile::tempdir().unwrap();
        let mut backends = SessionBackends::builtin();
        backends.register_session_backend("cloud", |config: &SessionStoreConfig| {
            let store =
                FileSessionStore::open(config.sessions_dir.join("cloud"), config.durability)?;
            Ok(Arc::new(store) as Arc<dyn SessionStore>)
        });
        backends.register_session_backend("file", |_config: &SessionStoreConfig| {
            Err(SessionError::Backend {
                backend: "file".into(),
                source: "replaced".into(),
            })
        });
        let config = SessionStoreConfig::under(dir.path());
        assert!(backends.contains("cloud"));
        backends.open("cloud", &config).unwrap();
        assert!(dir.path().join("sessions/cloud").is_dir());
        let err = backends.open("file", &config).unwrap_err();
        assert!(err.to_string().contains("replaced"), "{err}");
        assert!(SessionBackends::empty().names().is_empty());
    }
}
