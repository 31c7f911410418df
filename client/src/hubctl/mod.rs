//! `tau hub …`: run the hub in the foreground (by exec'ing `taud`), show its status, stop it, and
//! install or remove it as a per-user launchd agent (macOS) or systemd user unit (Linux).
//!
//! Invariants: the client never links the daemon: `tau hub run` execs the `taud` binary found next
//! to `tau`, else on PATH; launchctl and systemctl are reached through [`Launchctl`] and
//! [`Systemctl`] (fakes in tests); nothing here touches a path that is not in [`HubContext`].

mod install;
mod probe;
mod service_manager;
mod status;
mod stop;
#[cfg(test)]
mod tests;
mod units;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::Context as _;
use clap::Subcommand;
use tau_api::paths::Paths;

pub use service_manager::{Launchctl, SystemLaunchctl, SystemSystemctl, Systemctl};
pub use status::NOT_RUNNING;
use stop::Stopped;

/// `tau hub` subcommands.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum HubCommand {
    /// Run the hub in the foreground (Ctrl-C or `tau hub stop` stops it).
    Run,
    /// Start the hub in the background and wait until it answers (nothing to do when one does).
    Start {
        /// Give up waiting after this many seconds (at most 600).
        #[arg(long, value_name = "SECONDS", default_value_t = 30)]
        timeout: u64,
        /// Print JSON for scripts: started, pid, socket, log.
        #[arg(long)]
        json: bool,
    },
    /// Is the hub running? pid, heartbeat, last crash and the launchd/systemd state.
    Status {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Stop the running hub (SIGTERM) and wait until it is gone.
    Stop {
        /// Give up waiting after this many seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 15)]
        timeout: u64,
    },
    /// Install the hub as a per-user service: a launchd agent (macOS) or a systemd user unit
    /// (Linux), restarted after a crash or a kill.
    Install,
    /// Remove the per-user service.
    Uninstall,
    /// Print the systemd user unit for this installation.
    SystemdUnit,
}

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
            launchctl: Box::new(SystemLaunchctl),
            systemctl: Box::new(SystemSystemctl),
        })
    }

    /// The absolute path of `taud`: next to `tau`, else the first on PATH.
    pub fn find_taud(&self) -> Option<PathBuf> {
        find_taud(self.exe_dir.as_deref(), self.path_var.as_deref())
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

/// The absolute path of `taud`: in `exe_dir` (the directory of the running `tau`), else the first
/// executable `taud` in an absolute directory of `path_var`.
pub fn find_taud(exe_dir: Option<&Path>, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let beside = exe_dir.map(|d| d.join("taud"));
    let on_path = path_var
        .into_iter()
        .flat_map(std::env::split_paths)
        .filter(|d| d.is_absolute())
        .map(|d| d.join("taud"));
    beside
        .into_iter()
        .chain(on_path)
        .find(|p| is_executable(p))
        .map(|p| p.canonicalize().unwrap_or(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
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
        // Started by `crate::hub_start`, which needs the chat's attach; never routed here.
        HubCommand::Start { .. } => anyhow::bail!("tau hub start is run by the client's main"),
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
        HubCommand::Install => {
            install::install(ctx, out)?;
            Ok(ExitCode::SUCCESS)
        }
        HubCommand::Uninstall => {
            install::uninstall(ctx, out)?;
            Ok(ExitCode::SUCCESS)
        }
        HubCommand::SystemdUnit => {
            write!(out, "{}", install::systemd_unit(ctx)?)?;
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
