//! `tau hub install` / `uninstall` / `systemd-unit`, and the service manager's view for `status`.
//! macOS gets a launchd user agent in `~/Library/LaunchAgents`, bootstrapped into `gui/<uid>`;
//! Linux gets a systemd user unit in `$XDG_CONFIG_HOME/systemd/user`, enabled and started.
//!
//! Invariants: everything is per user (never a system unit, never root paths); the rendered file
//! names the absolute `taud`, TAU_HOME and TAU_DATA_DIR this `tau` runs with; the data and log
//! directories exist before the service starts (so `ReadWritePaths` and launchd's log file
//! resolve); the service sets TAU_ROLE when a role is named (`--role`, TAU_ROLE, or `[hub] role =
//! "node"` in tau.toml), so a node's service runs as a node.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::service_manager::{ToolError, parse_launchctl_print};
use super::status::ManagerStatus;
use super::units::{LAUNCHD_LABEL, SYSTEMD_UNIT, ServiceValues, render_launchd, render_systemd};
use super::{HubContext, Platform};
use tau_api::config::{Config, ConfigError, KnownNames, NodeRole, role_from_env};

/// The launchd agent's log file name, in `<TAU_DATA_DIR>/logs`.
const LAUNCHD_LOG: &str = "taud.launchd.log";

/// Why installing or uninstalling failed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// No `taud` next to `tau` or on PATH.
    #[error("cannot find taud next to tau or on PATH; install it alongside tau")]
    TaudNotFound,
    /// A file or directory could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// launchctl or systemctl failed.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// The service file is written but the service manager could not load or start it.
    #[error("wrote {path}, but could not start it: {source}")]
    NotStarted {
        /// The unit or plist written.
        path: PathBuf,
        /// The service manager's failure.
        source: ToolError,
    },
    /// TAU_ROLE names no role.
    #[error(transparent)]
    BadRole(ConfigError),
    /// Not macOS or Linux.
    #[error(
        "tau hub {0} supports macOS (launchd) and Linux (systemd); run `tau hub run` under your own supervisor"
    )]
    Unsupported(&'static str),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_owned(),
        source,
    }
}

/// `$XDG_CONFIG_HOME/systemd/user/taud.service`.
pub fn systemd_unit_path(ctx: &HubContext) -> PathBuf {
    ctx.config_home.join("systemd/user").join(SYSTEMD_UNIT)
}

/// `~/Library/LaunchAgents/dev.tau.taud.plist`.
pub fn launchd_plist_path(ctx: &HubContext) -> PathBuf {
    ctx.user_home
        .join("Library/LaunchAgents")
        .join(format!("{LAUNCHD_LABEL}.plist"))
}

fn gui_domain(ctx: &HubContext) -> String {
    format!("gui/{}", ctx.uid)
}

fn launchd_target(ctx: &HubContext) -> String {
    format!("{}/{LAUNCHD_LABEL}", gui_domain(ctx))
}

/// The role the service is installed with (written as TAU_ROLE): `flag` (`--role`), else TAU_ROLE
/// of the installation's environment, else `[hub] role` of tau.toml when it says `node`; `None`
/// (a hub, nothing written) otherwise. A tau.toml that does not load is reported on `out` (taud
/// will refuse to start until it is fixed) and names no role.
pub fn service_role(
    ctx: &HubContext,
    flag: Option<NodeRole>,
    out: &mut dyn Write,
) -> Result<Option<NodeRole>, InstallError> {
    if flag.is_some() {
        return Ok(flag);
    }
    if let Some(role) = role_from_env(&ctx.env).map_err(InstallError::BadRole)? {
        return Ok(Some(role));
    }
    match Config::load_with(&ctx.paths.config_file, &ctx.env, &KnownNames::builtin()) {
        Ok(config) => Ok(config.hub.role.filter(|role| *role == NodeRole::Node)),
        Err(e) => {
            let _ = writeln!(
                out,
                "warning: {e} (taud will refuse to start until it is fixed)"
            );
            Ok(None)
        }
    }
}

/// The values the templates are rendered with, for a service running as `role`.
pub fn service_values(
    ctx: &HubContext,
    role: Option<NodeRole>,
) -> Result<ServiceValues, InstallError> {
    let taud = ctx.find_taud().ok_or(InstallError::TaudNotFound)?;
    Ok(ServiceValues {
        taud,
        tau_home: ctx.paths.home.clone(),
        data_dir: ctx.paths.data_dir.clone(),
        user_home: ctx.user_home.clone(),
        launchd_log: ctx.paths.logs_dir.join(LAUNCHD_LOG),
        role,
    })
}

fn write_file(path: &Path, text: &str) -> Result<(), InstallError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    fs::write(path, text).map_err(io_err(path))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).map_err(io_err(path))
}

fn private_dir(path: &Path) -> Result<(), InstallError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(io_err(path))
}

/// When a hub already holds the lock, the service's own start is refused (exit 1, which neither
/// systemd nor launchd restarts): says so, and how to hand over to the service.
fn warn_if_running(ctx: &HubContext, out: &mut dyn Write) {
    if let Ok(Some(pid)) = super::probe::lock_holder(&ctx.paths.hub) {
        let pid = pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
        let restart = match ctx.platform {
            Platform::MacOs => format!("launchctl kickstart -k {}", launchd_target(ctx)),
            Platform::Linux | Platform::Other => {
                format!("systemctl --user restart {SYSTEMD_UNIT}")
            }
        };
        let _ = writeln!(
            out,
            "note: a hub is already running (pid {pid}), so the service's own start is refused and not retried; to run the hub under the service, run `tau hub stop`, then `{restart}`"
        );
    }
}

/// `tau hub install`, as `role` when given (`--role`), else as [`service_role`] finds.
pub fn install(
    ctx: &HubContext,
    role: Option<NodeRole>,
    out: &mut dyn Write,
) -> Result<(), InstallError> {
    let role = service_role(ctx, role, out)?;
    let values = service_values(ctx, role)?;
    private_dir(&ctx.paths.data_dir)?;
    private_dir(&ctx.paths.logs_dir)?;
    match ctx.platform {
        Platform::Linux => {
            let unit = systemd_unit_path(ctx);
            write_file(&unit, &render_systemd(&values))?;
            warn_if_running(ctx, out);
            let not_started = |source| InstallError::NotStarted {
                path: unit.clone(),
                source,
            };
            ctx.systemctl.daemon_reload().map_err(not_started)?;
            ctx.systemctl
                .enable_now(SYSTEMD_UNIT)
                .map_err(not_started)?;
            let _ = writeln!(
                out,
                "installed {} and started {SYSTEMD_UNIT}",
                unit.display()
            );
            let _ = writeln!(
                out,
                "on a machine without a login session, run `sudo loginctl enable-linger $USER` once so the hub keeps running"
            );
        }
        Platform::MacOs => {
            let plist = launchd_plist_path(ctx);
            write_file(&plist, &render_launchd(&values))?;
            warn_if_running(ctx, out);
            let target = launchd_target(ctx);
            // An agent loaded from an earlier install must go first; "not loaded" is fine.
            let _ = ctx.launchctl.bootout(&target);
            let not_started = |source| InstallError::NotStarted {
                path: plist.clone(),
                source,
            };
            ctx.launchctl.enable(&target).map_err(not_started)?;
            ctx.launchctl
                .bootstrap(&gui_domain(ctx), &plist)
                .map_err(not_started)?;
            let _ = writeln!(out, "installed {} and loaded {target}", plist.display());
        }
        Platform::Other => return Err(InstallError::Unsupported("install")),
    }
    if let Some(role) = role {
        let _ = writeln!(out, "the service runs taud as a {role} (TAU_ROLE={role})");
    }
    Ok(())
}

/// `tau hub uninstall`.
pub fn uninstall(ctx: &HubContext, out: &mut dyn Write) -> Result<(), InstallError> {
    match ctx.platform {
        Platform::Linux => {
            let unit = systemd_unit_path(ctx);
            if !unit.exists() {
                let _ = writeln!(out, "{SYSTEMD_UNIT} is not installed ({})", unit.display());
                return Ok(());
            }
            if let Err(e) = ctx.systemctl.disable_now(SYSTEMD_UNIT) {
                let _ = writeln!(out, "warning: {e}");
            }
            fs::remove_file(&unit).map_err(io_err(&unit))?;
            ctx.systemctl.daemon_reload()?;
            let _ = writeln!(out, "stopped {SYSTEMD_UNIT} and removed {}", unit.display());
        }
        Platform::MacOs => {
            let plist = launchd_plist_path(ctx);
            let target = launchd_target(ctx);
            let was_loaded = ctx.launchctl.bootout(&target).is_ok();
            match fs::remove_file(&plist) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound && !was_loaded => {
                    let _ = writeln!(
                        out,
                        "{LAUNCHD_LABEL} is not installed ({})",
                        plist.display()
                    );
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&plist)(e)),
            }
            let _ = writeln!(out, "unloaded {target} and removed {}", plist.display());
        }
        Platform::Other => return Err(InstallError::Unsupported("uninstall")),
    }
    Ok(())
}

/// `tau hub systemd-unit`: the unit for this installation, as `tau hub install` writes it.
pub fn systemd_unit(
    ctx: &HubContext,
    role: Option<NodeRole>,
    out: &mut dyn Write,
) -> Result<String, InstallError> {
    let role = service_role(ctx, role, out)?;
    Ok(render_systemd(&service_values(ctx, role)?))
}

/// What the platform's service manager says, for `tau hub status`.
pub fn manager_status(ctx: &HubContext) -> ManagerStatus {
    match ctx.platform {
        Platform::Linux => {
            let installed = systemd_unit_path(ctx).exists();
            let (enabled, active, error) = if installed {
                match (
                    ctx.systemctl.is_enabled(SYSTEMD_UNIT),
                    ctx.systemctl.is_active(SYSTEMD_UNIT),
                ) {
                    (Ok(e), Ok(a)) => (Some(e), Some(a), None),
                    (Err(e), _) | (_, Err(e)) => (None, None, Some(e.message)),
                }
            } else {
                (None, None, None)
            };
            ManagerStatus::Systemd {
                unit: SYSTEMD_UNIT.to_owned(),
                installed,
                enabled,
                active,
                error,
            }
        }
        Platform::MacOs => {
            let installed = launchd_plist_path(ctx).exists();
            let (loaded, state, error) = match ctx.launchctl.print(&launchd_target(ctx)) {
                Ok(Some(text)) => (true, parse_launchctl_print(&text), None),
                Ok(None) => (false, Default::default(), None),
                Err(e) => (false, Default::default(), Some(e.message)),
            };
            ManagerStatus::Launchd {
                label: LAUNCHD_LABEL.to_owned(),
                installed,
                loaded,
                state,
                error,
            }
        }
        Platform::Other => ManagerStatus::None,
    }
}
