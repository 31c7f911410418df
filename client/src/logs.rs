//! Logging for each command of `tau`, set up once in `main` before the command runs.
//!
//! `tau chat`, `tau ask` and `tau tui` log to `<TAU_DATA_DIR>/logs/tau.log` (INFO and up) as well as to
//! stderr (WARN and up, INFO with `-v`; never for `tau tui`, which owns the screen), so what happened in a conversation can be read later next
//! to the hub's own records; every other command logs to stderr only.
//!
//! Invariants: logging is configured exactly once per process (tracing's global default can be
//! set once); a chat or ask that cannot find its installation or open the file still gets console
//! logging, and the command itself reports the underlying problem; `.env` problems and `tau.toml`
//! warnings of a chat or ask are logged here once, after logging is set up (the commands do not
//! repeat them).

use std::path::Path;

use tau_api::installation::{Installation, Located};
use tau_api::logging::{LogFormat, LoggingGuard, configure_logging, configure_logging_as};

use crate::cli::Command;
use crate::context::Context;
use crate::environment;

/// The logging a command set up, and the installation found for it.
pub struct Started {
    /// Must live until the command ends.
    pub guard: Option<LoggingGuard>,
    /// The installation `tau chat`, `ask` or `tui` logs into, found once here for the command
    /// too (`None`: not found, or another command).
    pub installation: Option<Installation>,
}

/// Sets up the logging `command` uses.
pub fn start(command: &Command, ctx: &Context) -> Started {
    let console_only = || Started {
        guard: configure_logging(None, ctx.verbose, true).ok(),
        installation: None,
    };
    let name = match command {
        Command::Chat(_) => "chat",
        Command::Ask(_) => "ask",
        Command::Tui(_) => "tui",
        _ => return console_only(),
    };
    let Ok(cwd) = environment::current_dir() else {
        return console_only();
    };
    let env = environment::snapshot(ctx);
    let format = LogFormat::from_env(&env);
    let mut installation = None;
    let (logs_dir, problems, warnings) = match Installation::discover(env.clone(), &cwd) {
        Ok(mut found) => {
            let problems = std::mem::take(&mut found.dotenv_problems);
            let warnings = std::mem::take(&mut found.config.warnings);
            let logs_dir = found.paths.logs_dir.clone();
            installation = Some(found);
            (Some(logs_dir), problems, warnings)
        }
        // The command reports the error itself; the log file is still wanted when the paths
        // resolve.
        Err(_) => match Located::discover(env, &cwd) {
            Ok(located) => (
                Some(located.paths.logs_dir),
                located.dotenv_problems,
                Vec::new(),
            ),
            Err(_) => (None, Vec::new(), Vec::new()),
        },
    };
    // The TUI owns the screen: it logs to the file only.
    let console = !matches!(command, Command::Tui(_));
    let guard = with_file(logs_dir.as_deref(), ctx.verbose, console, format);
    tracing::info!(
        command = name,
        version = tau_api::VERSION,
        pid = std::process::id(),
        "tau {name} started"
    );
    for problem in &problems {
        tracing::warn!("{problem}");
    }
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    Started {
        guard,
        installation,
    }
}

/// Console and `<logs_dir>/tau.log` (in `format`); the console only (with one warning) when the
/// file cannot be opened.
fn with_file(
    logs_dir: Option<&Path>,
    verbose: bool,
    console: bool,
    format: LogFormat,
) -> Option<LoggingGuard> {
    match configure_logging_as(logs_dir, verbose, console, format) {
        Ok(guard) => Some(guard),
        Err(file_error) => {
            let guard = configure_logging(None, verbose, console).ok();
            tracing::warn!("logging to stderr only: {file_error}");
            guard
        }
    }
}
