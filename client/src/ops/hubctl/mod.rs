//! `tau hub …`: run the hub in the foreground (by exec'ing `taud`), start it in the background
//! (`start.rs`, through `crate::hub_link::auto_start`, the way `tau chat` starts one), show its
//! status, stop it, and install or remove it as a per-user launchd agent (macOS) or systemd user
//! unit (Linux). Every `HubCommand` runs through [`run_with`].
//!
//! Invariants: the client never links the daemon: `tau hub run` execs the `taud` binary found next
//! to `tau`, else on PATH; launchctl and systemctl are reached through [`Launchctl`] and
//! [`Systemctl`] (fakes in tests); nothing here touches a path that is not in [`HubContext`].

mod install;
mod probe;
mod service_manager;
mod start;
mod status;
mod stop;
#[cfg(test)]
mod tests;
mod units;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::Context as _;
use tau_api::paths::Paths;

use crate::cli::HubCommand;

pub use service_manager::{Launchctl, SystemLaunchctl, SystemSystemctl, Systemctl};
pub use status::NOT_RUNNING;
use stop::Stopped;

/// The operating system's service manager family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// launchd.
    MacOs,
    /// systemd.
    Linux,
    /// Neither: install/uninstall refuse.
    Other,
}

impl Platform {
    /// The platform this binary was built for.
    pub fn current() -> Self {
        if cfg!(target_os = "macos") {
            Platform::MacOs
        } else if cfg!(target_os = "linux") {
            Platform::Linux
        } else {
            Platform::Other
        }
    }
}

/// Everything `tau hub` commands read: the installation's paths, where the user's service files
/// go, how to find `taud`, and the service managers.
pub struct HubContext {
    /// TAU_HOME, TAU_DATA_DIR and the hub's files.
    pub paths: Paths,
    /// The user's home directory (`~/Library/LaunchAgents` lives there).
    pub user_home: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `~/.config` (`systemd/user` lives there).
    pub config_home: PathBuf,
    /// Which service manager to use.
    pub platform: Platform,
    /// The user's uid (launchd's `gui/<uid>` domain).
    pub uid: u32,
    /// The directory holding the running `tau` (taud is looked for there first).
    pub exe_dir: Option<PathBuf>,
    /// PATH, to find taud when it is not next to tau.
    pub path_var: Option<OsString>,
    /// Variables to export to `taud` (TAU_LANG, TAU_PROFILE from the command line).
    pub child_env: Vec<(&'static str, OsString)>,
    /// Pass `--verbose` to `taud`.
    pub verbose: bool,
    /// The installation's environment (with `.env`): where `tau hub install` reads TAU_ROLE and
    /// the variables `tau.toml` refers to.
    pub env: tau_api::env::Env,
    /// launchctl (macOS).
    pub launchctl: Box<dyn Launchctl>,
    /// systemctl --user (Linux).
    pub systemctl: Box<dyn Systemctl>,
}

impl std::fmt::Debug for HubContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubContext")
            .field("paths", &self.paths)
            .field("platform", &self.platform)
            .finish_non_exhaustive()
    }
}

impl HubContext {
    /// A context for this process: the real launchctl/systemctl, this platform, this uid, the
    /// home and XDG_CONFIG_HOME from `env`, taud searched next to the current executable and on
    /// `env`'s PATH.
    pub fn new(paths: Paths, env: &tau_api::env::Env) -> anyhow::Result<Self> {
        let user_home = env
            .user_home()
            .context("HOME is not set to an absolute path; tau hub needs it")?;
        let config_home = env
            .non_empty("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| user_home.join(".config"));
        let exe_dir = crate::environment::exe_dir();
        Ok(Self {
            paths,
            config_home,
            user_home,
            platform: Platform::current(),
            uid: nix::unistd::geteuid().as_raw(),
            exe_dir,
            path_var: env.get("PATH").map(OsString::from),
            child_env: Vec::new(),
            verbose: false,
            env: env.clone(),
            launchctl: Box::new(SystemLaunchctl),
            systemctl: Box::new(SystemSystemctl),
        })
    }

    /// The absolute path of `taud`: next to `tau`, else the first on PATH.
    pub fn find_taud(&self) -> Option<PathBuf> {
        crate::hub_link::auto_start::find_taud(self.exe_dir.as_deref(), self.path_var.as_deref())
    }

    /// The `taud` command `tau hub run` execs.
    pub fn taud_command(&self) -> Option<Command> {
        let mut command = Command::new(self.find_taud()?);
        if self.verbose {
            command.arg("--verbose");
        }
        for (key, value) in &self.child_env {
            command.env(key, value);
        }
        Some(command)
    }
}

/// `tau hub …` as the command line gave it: needs the installation's paths, not a valid
/// `tau.toml`, so that a hub can be inspected, started and stopped even while its configuration
/// is broken.
pub fn run_command(
    command: &HubCommand,
    ctx: &crate::context::Context,
) -> anyhow::Result<ExitCode> {
    let located = tau_api::installation::Located::discover(
        crate::environment::snapshot(ctx),
        &crate::environment::current_dir()?,
    )?;
    let mut hub_ctx = HubContext::new(located.paths, &located.env)?;
    hub_ctx.child_env = ctx.child_env.clone();
    hub_ctx.verbose = ctx.verbose;
    run(command.clone(), &hub_ctx)
}

/// Runs a `tau hub` command, printing to stdout.
pub fn run(cmd: HubCommand, ctx: &HubContext) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    run_with(cmd, ctx, &mut out)
}

/// [`run`] with an explicit output (tests read it back).
pub fn run_with(
    cmd: HubCommand,
    ctx: &HubContext,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    match cmd {
        HubCommand::Run => run_foreground(ctx),
        HubCommand::Start { timeout, json } => start::start(ctx, timeout, json, out),
        HubCommand::Status { json } => show_status(ctx, json, out),
        HubCommand::Stop { timeout } => {
            let stopped = stop::stop(
                &ctx.paths.hub,
                Duration::from_secs(timeout),
                &stop::sigterm,
                out,
            )?;
            match stopped {
                Stopped::NotRunning => writeln!(out, "tau hub is not running")?,
                Stopped::Stopped(pid) => writeln!(out, "tau hub stopped (pid {pid})")?,
            }
            Ok(ExitCode::SUCCESS)
        }
        HubCommand::Install { role } => {
            install::install(ctx, role.map(crate::cli::RoleArg::role), out)?;
            Ok(ExitCode::SUCCESS)
        }
        HubCommand::Uninstall => {
            install::uninstall(ctx, out)?;
            Ok(ExitCode::SUCCESS)
        }
        HubCommand::SystemdUnit { role } => {
            let role = role.map(crate::cli::RoleArg::role);
            // A warning goes to stderr: stdout is the unit, often redirected to a file.
            let unit = install::systemd_unit(ctx, role, &mut std::io::stderr())?;
            write!(out, "{unit}")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn show_status(ctx: &HubContext, json: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let probe = probe::probe(&ctx.paths.hub)
        .with_context(|| format!("reading {}", ctx.paths.hub.dir.display()))?;
    let now = jiff::Timestamp::now();
    let report = status::report(
        probe,
        ctx.paths.hub.socket.display().to_string(),
        install::manager_status(ctx),
        now,
    );
    if json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
    } else {
        status::write_text(&report, now, out)?;
    }
    Ok(if report.running {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(NOT_RUNNING)
    })
}

/// Replaces this process with `taud` (its exit code becomes ours); returns only on failure.
fn run_foreground(ctx: &HubContext) -> anyhow::Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let mut command = ctx
        .taud_command()
        .context("cannot find taud next to tau or on PATH")?;
    let err = command.exec();
    Err(anyhow::Error::new(err).context(format!("cannot run {:?}", command.get_program())))
}
