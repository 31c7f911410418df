//! The `taud` binary: reads its options, takes the hub lock (before any heavy start-up work), then
//! runs the hub in the foreground until SIGTERM or SIGINT.
//!
//! Exit codes (`tau_api::hub_files::exit`): 0 clean stop; 1 another hub is running; 73 the hub's
//! files cannot be created or locked; 70 a fatal error after start (crash.json names it); 78 a bad
//! configuration. Under `--launchd` a refused start (1, 78) exits 0 instead, since launchd's
//! KeepAlive cannot exempt exit codes the way systemd's RestartPreventExitStatus does.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tau_api::hub_files::exit;
use taud::hub::{self, HubLock, HubOptions, LockError};

/// The tau hub daemon. Normally started by `tau chat`, launchd or systemd; `tau hub run` runs it in
/// the foreground.
#[derive(Debug, Parser)]
#[command(name = "taud", version = tau_api::VERSION)]
struct Args {
    /// Log INFO and up to stderr (default: WARN and up; RUST_LOG overrides both).
    #[arg(short, long)]
    verbose: bool,
    /// Started by launchd: a refused start (already running, bad config) exits 0 so KeepAlive
    /// does not restart it in a loop. The refusal is still printed to stderr.
    #[arg(long)]
    launchd: bool,
}

/// A bad environment: the one-line configuration error.
#[derive(Debug, thiserror::Error)]
enum EnvError {
    #[error("{name} must be {expected}, got {value:?}")]
    Invalid {
        name: &'static str,
        expected: &'static str,
        value: String,
    },
    #[error("neither TAU_DATA_DIR nor HOME is set; cannot place the hub's files")]
    NoDataDir,
}

fn parse_env<T: std::str::FromStr>(
    env: &dyn Fn(&str) -> Option<String>,
    name: &'static str,
    expected: &'static str,
) -> Result<Option<T>, EnvError> {
    match env(name) {
        None => Ok(None),
        Some(value) => value
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| EnvError::Invalid {
                name,
                expected,
                value,
            }),
    }
}

/// Builds the hub options from the environment (TAU_DATA_DIR, TAU_HUB_PORT, TAU_PROFILE,
/// TAU_ROLE, TAU_HUB_HEARTBEAT_SECONDS, TAU_HUB_SERVICES).
fn options_from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<HubOptions, EnvError> {
    let data_dir = match env("TAU_DATA_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env("HOME").ok_or(EnvError::NoDataDir)?).join(".local/share/tau"),
    };
    let mut options = HubOptions::new(data_dir);
    if let Some(port) = parse_env(env, "TAU_HUB_PORT", "a port number (0-65535)")? {
        options.control_port = port;
    }
    if let Some(secs) = parse_env::<u64>(
        env,
        "TAU_HUB_HEARTBEAT_SECONDS",
        "a whole number of seconds",
    )? {
        options.heartbeat = Duration::from_secs(secs);
    }
    if let Some(profile) = env("TAU_PROFILE").filter(|p| !p.is_empty()) {
        options.profile = profile;
    }
    if let Some(role) = env("TAU_ROLE").filter(|r| !r.is_empty()) {
        options.role = role;
    }
    if let Some(services) = env("TAU_HUB_SERVICES") {
        options.services = services
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
    }
    Ok(options)
}

fn init_logging(verbose: bool) {
    let default = if verbose { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

fn main() -> ExitCode {
    let args = Args::parse();
    init_logging(args.verbose);
    let refused = |code: u8| {
        if args.launchd {
            ExitCode::from(exit::OK)
        } else {
            ExitCode::from(code)
        }
    };

    let env = |name: &str| std::env::var(name).ok();
    let options = match options_from_env(&env) {
        Ok(options) => options,
        Err(e) => {
            eprintln!("taud: configuration error: {e}");
            return refused(exit::CONFIG);
        }
    };
    if let Err(e) = options.validate() {
        eprintln!("taud: configuration error: {e}");
        return refused(exit::CONFIG);
    }

    let paths = options.paths();
    let lock = match HubLock::acquire(&paths) {
        Ok(lock) => lock,
        Err(e @ LockError::AlreadyRunning { .. }) => {
            eprintln!("{e}");
            return refused(exit::ALREADY_RUNNING);
        }
        Err(e @ LockError::Io { .. }) => {
            eprintln!("taud: {e}");
            return ExitCode::from(exit::CANT_CREATE);
        }
    };
    hub::crash::install_panic_hook(paths.crash_note());

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("taud: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FATAL);
        }
    };
    let result = runtime.block_on(async {
        let stop = hub::stop_on_signals().map_err(|e| format!("cannot handle signals: {e}"))?;
        hub::run(options, &lock, &taud::builtin::builtin_services(), stop)
            .await
            .map_err(|e| e.to_string())
    });
    drop(lock);
    match result {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => {
            eprintln!("taud: {e}");
            ExitCode::from(exit::FATAL)
        }
    }
}

/// Worker threads: the machine's cores, at most four (the hub is mostly idle).
fn worker_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_from_home() {
        let o = options_from_env(&env_of(&[("HOME", "/home/u")])).unwrap();
        assert_eq!(o.data_dir, PathBuf::from("/home/u/.local/share/tau"));
        assert_eq!(o.control_port, hub::DEFAULT_CONTROL_PORT);
        assert_eq!(o.profile, "home");
    }

    #[test]
    fn overrides_and_errors() {
        let o = options_from_env(&env_of(&[
            ("TAU_DATA_DIR", "/d"),
            ("TAU_HUB_PORT", "0"),
            ("TAU_PROFILE", "travel"),
            ("TAU_ROLE", "node"),
            ("TAU_HUB_HEARTBEAT_SECONDS", "1"),
            ("TAU_HUB_SERVICES", "grpc, control-api"),
        ]))
        .unwrap();
        assert_eq!(o.control_port, 0);
        assert_eq!(o.heartbeat, Duration::from_secs(1));
        assert_eq!((o.profile.as_str(), o.role.as_str()), ("travel", "node"));
        assert_eq!(
            o.services,
            vec!["grpc".to_owned(), "control-api".to_owned()]
        );
        let e = options_from_env(&env_of(&[("TAU_DATA_DIR", "/d"), ("TAU_HUB_PORT", "http")]))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "TAU_HUB_PORT must be a port number (0-65535), got \"http\""
        );
        assert!(options_from_env(&env_of(&[])).is_err());
    }
}
