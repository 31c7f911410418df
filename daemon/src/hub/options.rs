//! [`HubOptions`]: exactly what the hub needs from the configuration, and its validation.
//!
//! Invariants: a validated `HubOptions` has a loopback bind address and a non-zero heartbeat; the
//! hub never reads the environment or `tau.toml` itself, so tests pass options explicitly.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use tau_api::hub_files::HubPaths;

/// The default TCP port of the control API and gRPC (`TAU_HUB_PORT` overrides).
pub const DEFAULT_CONTROL_PORT: u16 = 7877;

/// The default heartbeat interval (`[hub].heartbeat_seconds`).
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(30);

/// What the hub needs to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubOptions {
    /// `TAU_DATA_DIR`: the hub's files live in `<data_dir>/hub`.
    pub data_dir: PathBuf,
    /// How often `state.json` is refreshed.
    pub heartbeat: Duration,
    /// The TCP port of the control API and gRPC; 0 picks a free port (written to state.json).
    pub control_port: u16,
    /// The TCP bind address; only loopback addresses are accepted.
    pub bind_addr: IpAddr,
    /// Installation profile (home, travel, sport).
    pub profile: String,
    /// Host role (hub, node).
    pub role: String,
    /// Enabled hub services by name; empty = all.
    pub services: Vec<String>,
}

/// A [`HubOptions`] the hub refuses to start with (a configuration error: exit 78).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OptionsError {
    /// The TCP listener would be reachable from other hosts.
    #[error("hub bind address {0} is not a loopback address; the hub listens on 127.0.0.1 only")]
    NotLoopback(IpAddr),
    /// A heartbeat of zero would spin.
    #[error("[hub].heartbeat_seconds must be at least 1")]
    ZeroHeartbeat,
    /// The data directory must be absolute, so the hub does not depend on its working directory.
    #[error("TAU_DATA_DIR must be an absolute path, got {0:?}")]
    RelativeDataDir(PathBuf),
}

impl HubOptions {
    /// Options with defaults for everything but the data directory.
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            heartbeat: DEFAULT_HEARTBEAT,
            control_port: DEFAULT_CONTROL_PORT,
            bind_addr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            profile: "home".to_owned(),
            role: "hub".to_owned(),
            services: Vec::new(),
        }
    }

    /// Checks what the hub refuses to start with.
    pub fn validate(&self) -> Result<(), OptionsError> {
        if !self.bind_addr.is_loopback() {
            return Err(OptionsError::NotLoopback(self.bind_addr));
        }
        if self.heartbeat.is_zero() {
            return Err(OptionsError::ZeroHeartbeat);
        }
        if !self.data_dir.is_absolute() {
            return Err(OptionsError::RelativeDataDir(self.data_dir.clone()));
        }
        Ok(())
    }

    /// The paths of the hub's files.
    pub fn paths(&self) -> HubPaths {
        HubPaths::new(&self.data_dir)
    }

    /// Whether the service `name` is enabled (an empty list enables every service).
    pub fn service_enabled(&self, name: &str) -> bool {
        self.services.is_empty() || self.services.iter().any(|s| s == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        HubOptions::new(PathBuf::from("/d")).validate().unwrap();
    }

    #[test]
    fn non_loopback_bind_is_refused() {
        let mut o = HubOptions::new(PathBuf::from("/d"));
        o.bind_addr = "0.0.0.0".parse().unwrap();
        assert_eq!(o.validate(), Err(OptionsError::NotLoopback(o.bind_addr)));
        o.bind_addr = "192.168.1.2".parse().unwrap();
        assert!(o.validate().is_err());
        o.bind_addr = "::1".parse().unwrap();
        o.validate().unwrap();
    }

    #[test]
    fn zero_heartbeat_and_relative_dir_are_refused() {
        let mut o = HubOptions::new(PathBuf::from("/d"));
        o.heartbeat = Duration::ZERO;
        assert_eq!(o.validate(), Err(OptionsError::ZeroHeartbeat));
        let o = HubOptions::new(PathBuf::from("rel"));
        assert!(matches!(
            o.validate(),
            Err(OptionsError::RelativeDataDir(_))
        ));
    }

    #[test]
    fn empty_service_list_enables_all() {
        let mut o = HubOptions::new(PathBuf::from("/d"));
        assert!(o.service_enabled("grpc"));
        o.services = vec!["control-api".into()];
        assert!(o.service_enabled("control-api"));
        assert!(!o.service_enabled("grpc"));
    }
}
