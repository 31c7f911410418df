//! [`HubOptions`]: exactly what the hub needs from the configuration, and its validation.
//!
//! Invariants: a validated `HubOptions` has a loopback bind address and a non-zero heartbeat; the
//! hub never reads the environment or `tau.toml` itself, so tests pass options explicitly.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use tau_api::hub_files::HubPaths;
use tau_api::installation::Installation;

use crate::listen::ConnLimits;

/// Test knob: every connection deadline of the hub's listeners, in milliseconds (50..=15,000), so
/// tests need not wait for the defaults. Not a setting: a value that does not parse is ignored.
pub const CONNECTION_DEADLINE_ENV: &str = "TAU_HUB_CONNECTION_DEADLINE_MS";

/// The default TCP port of the control API and gRPC (`TAU_HUB_PORT` overrides).
pub const DEFAULT_CONTROL_PORT: u16 = tau_api::config::DEFAULT_CONTROL_PORT;

/// The default heartbeat interval (`[hub].heartbeat_seconds`).
pub const DEFAULT_HEARTBEAT: Duration =
    Duration::from_secs(tau_api::config::DEFAULT_HEARTBEAT_SECONDS);

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
    /// Enabled optional hub services by name; empty = all. The core services
    /// ([`tau_api::components::CORE_HUB_SERVICES`]: the control API and gRPC) run whatever this
    /// says.
    pub services: Vec<String>,
    /// The deadlines and cap of the hub's listeners (TCP and the Unix socket).
    pub connections: ConnLimits,
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
            connections: ConnLimits::default(),
        }
    }

    /// The options of a discovered installation: TAU_DATA_DIR, `[hub] heartbeat_seconds`, the hub
    /// port (TAU_HUB_PORT over `[hub] control_port`), profile, role and `[components.hub]
    /// services`; connection deadlines from [`CONNECTION_DEADLINE_ENV`] when it is set.
    pub fn from_installation(installation: &Installation) -> Self {
        let mut options = Self::new(installation.paths.data_dir.clone());
        options.heartbeat = Duration::from_secs(installation.config.hub.heartbeat_seconds);
        options.control_port = installation.settings.hub_port;
        options.profile = installation.settings.profile.as_str().to_owned();
        options.role = installation.settings.role.as_str().to_owned();
        options.services = installation.config.components.hub.services.clone();
        if let Some(limits) = installation
            .env
            .non_empty(CONNECTION_DEADLINE_ENV)
            .and_then(ConnLimits::from_deadline_ms)
        {
            options.connections = limits;
        }
        options
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
        HubPaths::in_dir(self.data_dir.join("hub"))
    }

    /// Whether the service `name` is enabled: a core service always is (without the control API
    /// and gRPC nobody could reach the hub); an optional one when the list is empty or names it.
    pub fn service_enabled(&self, name: &str) -> bool {
        tau_api::components::CORE_HUB_SERVICES.contains(&name)
            || self.services.is_empty()
            || self.services.iter().any(|s| s == name)
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
    fn built_from_an_installation() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("tau.toml"),
            "[hub]\nheartbeat_seconds = 2\ncontrol_port = 9000\n[components.hub]\nservices = [\"grpc\"]\n",
        )
        .unwrap();
        let env: tau_api::env::Env = [
            ("HOME", tmp.path().join("user").to_str().unwrap()),
            ("TAU_HOME", home.to_str().unwrap()),
            ("TAU_DATA_DIR", tmp.path().join("data").to_str().unwrap()),
            ("TAU_HUB_PORT", "9100"),
            ("TAU_ROLE", "node"),
        ]
        .into_iter()
        .collect();
        let found = Installation::discover(env, tmp.path()).unwrap();
        let o = HubOptions::from_installation(&found);
        assert_eq!(o.data_dir, tmp.path().join("data"));
        assert_eq!(o.heartbeat, Duration::from_secs(2));
        assert_eq!(o.control_port, 9100);
        assert_eq!((o.profile.as_str(), o.role.as_str()), ("home", "node"));
        assert_eq!(o.services, vec!["grpc".to_owned()]);
        assert_eq!(o.connections, ConnLimits::default());
    }

    #[test]
    fn the_connection_deadline_knob_is_read_from_the_environment() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let with = |value: &str| {
            let env: tau_api::env::Env = [
                ("HOME", tmp.path().join("user").to_str().unwrap()),
                ("TAU_HOME", home.to_str().unwrap()),
                ("TAU_DATA_DIR", tmp.path().join("data").to_str().unwrap()),
                (CONNECTION_DEADLINE_ENV, value),
            ]
            .into_iter()
            .collect();
            HubOptions::from_installation(&Installation::discover(env, tmp.path()).unwrap())
        };
        assert_eq!(
            with("750").connections,
            ConnLimits::with_deadline(Duration::from_millis(750))
        );
        assert_eq!(with("soon").connections, ConnLimits::default());
    }

    #[test]
    fn empty_service_list_enables_all() {
        let mut o = HubOptions::new(PathBuf::from("/d"));
        assert!(o.service_enabled("grpc"));
        assert!(o.service_enabled("telegram"));
        o.services = vec!["control-api".into()];
        assert!(o.service_enabled("control-api"));
        assert!(o.service_enabled("grpc"), "a core service always runs");
        assert!(
            !o.service_enabled("telegram"),
            "an optional one must be listed"
        );
    }

    #[test]
    fn naming_an_optional_service_keeps_the_core_ones() {
        let mut o = HubOptions::new(PathBuf::from("/d"));
        o.services = vec!["telegram".into()];
        assert!(o.service_enabled("telegram"));
        assert!(o.service_enabled("control-api") && o.service_enabled("grpc"));
        assert!(!o.service_enabled("relay"));
    }
}
