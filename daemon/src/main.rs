//! The `taud` binary: discovers the installation (TAU_HOME, `.env`, `tau.toml`), takes the hub lock
//! (before any heavy start-up work), then runs the hub in the foreground until SIGTERM or SIGINT.
//!
//! The soft open-files limit is raised to the hard one at start (logged at INFO).
//!
//! A hub runs on a multi-thread runtime; a node (TAU_ROLE=node) on a current-thread one (see
//! [`node_runtime`]) and builds no session service.
//!
//! The async runtime is shut down explicitly with a deadline ([`RUNTIME_SHUTDOWN`]) after the hub
//! stopped, so blocking work still running cannot hold the exit. Its blocking threads (store
//! writes, `spawn_blocking`) are at most [`MAX_BLOCKING_THREADS`]: each thread that ever ran can
//! keep an allocator arena of its own, so a burst of writes from many sessions would otherwise
//! leave the hub larger for good.
//!
//! Exit codes (`tau_api::hub_files::exit`): 0 clean stop; 1 another hub is running; 73 the hub's
//! files cannot be created or locked; 70 a fatal error after start (crash.json names it); 78 a bad
//! configuration (one line names it), also a missing, empty or unreadable persona.md next to a
//! tau.toml, MCP tools that would share a name (`taud::mcp::check_names`) and a web client's TLS
//! certificate or key that does not load (`taud::web::WebLaunch::check_tls`). Under `--launchd` a
//! refused start (1, 78) exits 0 instead, since launchd's KeepAlive cannot exempt exit codes the
//! way systemd's RestartPreventExitStatus does.
//!
//! Built without the `hub` feature (`--no-default-features`), `taud` runs only as a node: started
//! as a hub it refuses with one line (exit 78, `taud::services::HUB_LEFT_OUT`), and `--version`
//! says "node only".
//!
//! Built with the `otel` feature, the spans are also exported over OTLP HTTP/protobuf when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (module `otel_export`); the exporter is flushed at exit.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tau_api::env::Env;
use tau_api::hub_files::exit;
use tau_api::installation::Installation;
use tau_api::logging::{LogFormat, LoggingGuard, configure_logging, configure_logging_with};
use taud::host::{self, HubLock, HubOptions, LockError};

/// What `taud --version` prints after the name: the version (the word `tau version` reads), and for
/// a build without the `hub` feature, that it runs only as a node.
const VERSION_LINE: &str = if cfg!(feature = "hub") {
    tau_api::VERSION
} else {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (node only: built without the hub feature)"
    )
};

/// How long the async runtime waits for its remaining tasks when the hub has stopped.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(3);

/// `taud --help`.
const HELP: &str = "\
The tau hub daemon. Normally started by `tau chat`, launchd or systemd; `tau hub run` runs it in
the foreground.

Usage: taud [OPTIONS]

Options:
  -v, --verbose  Log INFO and up to stderr (default: WARN and up)
      --launchd  Started by launchd: a refused start (already running, bad config) exits 0 so
                 KeepAlive does not restart it in a loop. The refusal is still printed to stderr
  -h, --help     Print help
  -V, --version  Print version
";

/// The exit code of a command line `taud` does not understand (as a usage error is elsewhere).
const USAGE_ERROR: u8 = 2;

/// `taud`'s options.
#[derive(Debug, Default, PartialEq, Eq)]
struct Args {
    /// Log INFO and up to stderr.
    verbose: bool,
    /// Started by launchd: a refused start exits 0.
    launchd: bool,
}

/// What a command line asks for. It is read by hand: a daemon has four flags, and a parser
/// library's code was a good part of what a node's start-up touched.
#[derive(Debug, PartialEq, Eq)]
enum Invocation {
    Run(Args),
    Help,
    Version,
    /// An argument `taud` does not know.
    Unknown(String),
}

/// Reads the arguments after the program's name.
fn parse_args(args: impl IntoIterator<Item = std::ffi::OsString>) -> Invocation {
    let mut parsed = Args::default();
    for arg in args {
        match arg.to_str() {
            Some("-v" | "--verbose") => parsed.verbose = true,
            Some("--launchd") => parsed.launchd = true,
            Some("-h" | "--help") => return Invocation::Help,
            Some("-V" | "--version") => return Invocation::Version,
            _ => return Invocation::Unknown(arg.to_string_lossy().into_owned()),
        }
    }
    Invocation::Run(parsed)
}

/// Writes `text` to `out` (stdout) and flushes it: a reader gone (`taud --help | head -1`) is no
/// failure, another error is one line on stderr (`print!` would panic on either).
fn write_out(out: &mut impl std::io::Write, text: &str) -> ExitCode {
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("taud: writing to stdout: {error}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().skip(1)) {
        Invocation::Run(args) => args,
        Invocation::Help => return write_out(&mut std::io::stdout().lock(), HELP),
        Invocation::Version => {
            let line = format!("taud {VERSION_LINE}\n");
            return write_out(&mut std::io::stdout().lock(), &line);
        }
        Invocation::Unknown(arg) => {
            eprintln!(
                "taud: unexpected argument '{arg}'\n\nUsage: taud [OPTIONS] (see taud --help)"
            );
            return ExitCode::from(USAGE_ERROR);
        }
    };
    let refused = |code: u8| {
        if args.launchd {
            ExitCode::from(exit::OK)
        } else {
            ExitCode::from(code)
        }
    };

    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let installation = match Installation::discover(Env::from_process(), &cwd) {
        Ok(installation) => installation,
        Err(e) => {
            eprintln!("taud: {e}");
            return refused(exit::CONFIG);
        }
    };
    let options = HubOptions::from_installation(&installation);
    if let Err(e) = options.validate() {
        eprintln!("taud: {e}");
        return refused(exit::CONFIG);
    }
    let node_role = installation.settings.role == tau_api::config::NodeRole::Node;
    if !node_role && !cfg!(feature = "hub") {
        eprintln!("taud: {}", taud::services::HUB_LEFT_OUT);
        return refused(exit::CONFIG);
    }
    let core_options = taud::hub::CoreOptions::from_installation(&installation);
    // A node runs no agent, so it needs no persona.
    if let Err(e) = core_options
        .check_persona()
        .or_else(|e| if node_role { Ok(()) } else { Err(e) })
    {
        eprintln!("taud: {e}");
        return refused(exit::CONFIG);
    }
    if let Err(e) = core_options.check_mcp_names() {
        eprintln!("taud: {}: {e}", installation.paths.config_file.display());
        return refused(exit::CONFIG);
    }
    let nodes = match taud::node::NodeRegistry::open(
        &options.paths().dir,
        installation.config.nodes.clone(),
    ) {
        Ok(registry) => taud::link::NodeServices::new(
            std::sync::Arc::new(registry),
            installation.settings.role,
            installation.config.node.clone(),
        )
        .with_mcp(if node_role {
            core_options.mcp_servers.clone()
        } else {
            Vec::new()
        }),
        Err(e) => {
            eprintln!("taud: {e}");
            return refused(exit::CONFIG);
        }
    };
    // A node builds no session service (no providers, no store).
    let services = if node_role {
        taud::services::node_role_services(&nodes)
    } else {
        match hub_services(&installation, &nodes) {
            Ok(services) => services,
            Err(e) => {
                eprintln!("taud: {e}");
                return refused(exit::CONFIG);
            }
        }
    };

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
    #[cfg(feature = "otel")]
    let (exporter, extra) = match otel_export::start(&installation.env) {
        Ok(Some((provider, layer))) => (Some(provider), vec![layer]),
        Ok(None) => (None, Vec::new()),
        Err(e) => {
            eprintln!("taud: {e}");
            return refused(exit::CONFIG);
        }
    };
    #[cfg(not(feature = "otel"))]
    let extra = Vec::new();
    let _logging = start_logging(&installation, args.verbose, extra);
    for problem in &installation.dotenv_problems {
        tracing::warn!("{problem}");
    }
    for warning in &installation.config.warnings {
        tracing::warn!("{warning}");
    }
    let own_files = host::file_modes::OwnFiles::of(
        &installation.paths,
        &[taud::routine::ROUTINES_FILE_NAME, taud::spend::SPEND_FILE],
    );
    for fix in host::file_modes::make_private(&own_files) {
        tracing::warn!("{fix}");
    }
    for warning in host::file_modes::readable_config_warnings(&installation.paths) {
        tracing::warn!("{warning}");
    }
    host::crash::install_panic_hook(paths.crash_file.clone());
    raise_open_files_limit();

    let runtime = match if node_role { node_runtime() } else { runtime() } {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("taud: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FATAL);
        }
    };
    let result = runtime.block_on(async {
        let stop = host::stop_on_signals().map_err(|e| format!("cannot handle signals: {e}"))?;
        host::run(options, &lock, &services, stop)
            .await
            .map_err(|e| e.to_string())
    });
    // Tasks still running (blocking store work included) get a bounded time, then are abandoned,
    // so a clean stop never hangs on them; the lock is released after that.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    #[cfg(feature = "otel")]
    if let Some(provider) = exporter {
        // The spans still batched go out now (the exporter's own timeout bounds it).
        let _ = provider.shutdown();
    }
    drop(lock);
    match result {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => {
            eprintln!("taud: {e}");
            ExitCode::from(exit::FATAL)
        }
    }
}

/// A hub's services: the session service, the node services, Telegram and the web client. A web
/// client's certificate or key that does not load is a configuration error, found here, before
/// the lock.
#[cfg(feature = "hub")]
fn hub_services(
    installation: &Installation,
    nodes: &taud::link::NodeServices,
) -> Result<taud::host::ServiceRegistry, String> {
    use std::sync::Arc;
    let web = taud::web::WebLaunch::from_installation(installation);
    if let Some(Err(e)) = web.as_ref().map(taud::web::WebLaunch::check_tls) {
        return Err(format!("{}: {e}", installation.paths.config_file.display()));
    }
    let mut setup =
        taud::hub::CoreSetup::from_installation(installation).map_err(|e| e.to_string())?;
    setup.options.lenders = taud::tool::Lenders::new(Arc::new(taud::node::NodeLender(Arc::clone(
        nodes.registry(),
    ))));
    let mut services = taud::services::builtin_services_with_nodes(setup, nodes);
    let telegram = taud::host::TelegramLaunch::from_installation(installation);
    taud::services::register_telegram(&mut services, telegram);
    if let Some(web) = web {
        let web = web.with_nodes(Arc::clone(nodes.registry()));
        taud::services::register_web(&mut services, web);
    }
    Ok(services)
}

/// A `taud` built without the `hub` feature runs only as a node.
#[cfg(not(feature = "hub"))]
fn hub_services(
    _installation: &Installation,
    _nodes: &taud::link::NodeServices,
) -> Result<taud::host::ServiceRegistry, String> {
    Err(taud::services::HUB_LEFT_OUT.to_owned())
}

/// stderr plus `<TAU_DATA_DIR>/logs/tau.log` (JSON lines with `TAU_LOG_FORMAT=json`); stderr only
/// when the file cannot be opened.
fn start_logging(
    installation: &Installation,
    verbose: bool,
    extra: Vec<tau_api::logging::BoxedLayer>,
) -> Option<LoggingGuard> {
    let format = LogFormat::from_env(&installation.env);
    let logs_dir = Some(installation.paths.logs_dir.as_path());
    match configure_logging_with(logs_dir, verbose, true, format, extra) {
        Ok(guard) => Some(guard),
        Err(file_error) => {
            let guard = configure_logging(None, verbose, true).ok();
            tracing::warn!("logging to stderr only: {file_error}");
            guard
        }
    }
}

/// Raises the soft open-files limit to the hard one (connections, session files and logs need
/// more than the usual 1,024), logging both values; a refusal is logged and the hub runs on.
fn raise_open_files_limit() {
    match taud::listen::nofile::raise() {
        Ok(limits) => tracing::info!(
            soft_before = limits.before,
            soft = limits.after,
            hard = limits.hard,
            "open files limit: soft {} -> {} (hard {})",
            limits.before,
            limits.after,
            limits.hard
        ),
        Err(e) => tracing::warn!("{e}"),
    }
}

/// Worker threads: the machine's cores, at most four (the hub is mostly idle).
fn worker_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4))
}

/// The most threads the runtime runs blocking work on at once (tokio's default is 512); more
/// waits its turn. Each thread can hold a glibc arena of its own: with 100 open sessions the hub
/// took 44 MiB with 16 of them, 36 MiB with 4 (the soak benchmark, `hub_soak`), turns as fast.
const MAX_BLOCKING_THREADS: usize = 4;

/// The hub's async runtime.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .enable_all()
        .build()
}

/// The most threads a node's runtime runs blocking work on: it has no store, only the rare file
/// write (its pairing store, its state file).
const NODE_BLOCKING_THREADS: usize = 1;

/// A node's async runtime: one thread. A node holds one link and a local socket and runs a few
/// calls at a time; every worker thread would cost it a stack and an allocator arena of its own.
fn node_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(NODE_BLOCKING_THREADS)
        .enable_all()
        .build()
}

/// OTLP export of the hub's spans (the `otel` feature): on only when `OTEL_EXPORTER_OTLP_ENDPOINT`
/// is set. Only `taud`'s own spans and events at INFO and up are exported, so the exporter's HTTP
/// calls (reqwest, hyper) never trace themselves.
#[cfg(feature = "otel")]
mod otel_export {
    use std::sync::Arc;
    use std::time::Duration;

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tau_api::env::Env;
    use tau_api::logging::BoxedLayer;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::{LevelFilter, Targets};

    /// The standard variable naming the collector's base URL (`/v1/traces` is appended).
    pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

    /// The exporter could not be built.
    #[derive(Debug, thiserror::Error)]
    #[error("{ENDPOINT_VAR}={endpoint}: cannot export traces there: {reason}")]
    pub struct OtelError {
        endpoint: String,
        reason: String,
    }

    /// The tracer provider (kept to flush at exit) and the layer feeding it; `None` when the
    /// variable is unset or empty.
    pub fn start(env: &Env) -> Result<Option<(SdkTracerProvider, BoxedLayer)>, OtelError> {
        let Some(endpoint) = env
            .get(ENDPOINT_VAR)
            .map(str::trim)
            .filter(|e| !e.is_empty())
        else {
            return Ok(None);
        };
        let failed = |reason: String| OtelError {
            endpoint: endpoint.to_owned(),
            reason,
        };
        let traces = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        let exporter = SpanExporter::builder()
            .with_http()
            .with_http_client(http_client().map_err(failed)?)
            .with_endpoint(traces)
            .build()
            .map_err(|e| failed(e.to_string()))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name("taud").build())
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("taud"))
            .with_filter(Targets::new().with_target("taud", LevelFilter::INFO));
        Ok(Some((provider, Box::new(layer))))
    }

    /// The exporter's HTTP client (the exporter runs on its own thread, so a blocking one), with
    /// rustls over `ring` and platform roots as the providers' client, never a process-wide
    /// crypto provider; each export gives up after [`EXPORT_TIMEOUT`].
    fn http_client() -> Result<reqwest::blocking::Client, String> {
        use rustls_platform_verifier::BuilderVerifierExt;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_platform_verifier())
            .map_err(|e| format!("TLS set-up failed: {e}"))?
            .with_no_client_auth();
        reqwest::blocking::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| e.to_string())
    }

    /// How long one export may take.
    const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    fn parsed(args: &[&str]) -> Invocation {
        parse_args(args.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn the_command_line_reads_each_flag_and_stops_at_help_version_or_an_unknown_one() {
        assert_eq!(parsed(&[]), Invocation::Run(Args::default()));
        let both = Args {
            verbose: true,
            launchd: true,
        };
        assert_eq!(parsed(&["--verbose", "--launchd"]), Invocation::Run(both));
        let verbose = Args {
            verbose: true,
            launchd: false,
        };
        assert_eq!(parsed(&["-v"]), Invocation::Run(verbose));
        assert_eq!(parsed(&["--launchd", "--help"]), Invocation::Help);
        assert_eq!(parsed(&["-V"]), Invocation::Version);
        assert_eq!(
            parsed(&["--verbose", "--port"]),
            Invocation::Unknown("--port".into())
        );
        assert!(HELP.contains("Usage: taud") && HELP.contains("--launchd"));
    }

    /// A writer whose reader has gone, or that fails otherwise.
    struct Failing(std::io::ErrorKind);

    impl std::io::Write for Failing {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(self.0.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn help_to_a_reader_gone_succeeds_and_another_write_error_fails() {
        let mut written = Vec::new();
        assert_eq!(write_out(&mut written, HELP), ExitCode::SUCCESS);
        assert_eq!(written, HELP.as_bytes());
        let gone = &mut Failing(std::io::ErrorKind::BrokenPipe);
        assert_eq!(write_out(gone, HELP), ExitCode::SUCCESS);
        let full = &mut Failing(std::io::ErrorKind::StorageFull);
        assert_eq!(write_out(full, HELP), ExitCode::FAILURE);
    }

    #[test]
    fn blocking_work_runs_on_at_most_max_blocking_threads() -> Result<(), String> {
        let runtime = runtime().map_err(|e| e.to_string())?;
        let running = Arc::new(AtomicUsize::new(0));
        let released = Arc::new(AtomicBool::new(false));
        let threads = Arc::new(Mutex::new(HashSet::new()));
        let tasks = 4 * MAX_BLOCKING_THREADS;
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (running, released, threads) = (
                    Arc::clone(&running),
                    Arc::clone(&released),
                    Arc::clone(&threads),
                );
                runtime.spawn_blocking(move || {
                    running.fetch_add(1, Ordering::SeqCst);
                    if let Ok(mut seen) = threads.lock() {
                        seen.insert(std::thread::current().id());
                    }
                    while !released.load(Ordering::SeqCst) {
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        // Without a bound every task would start at once, each on a thread of its own.
        let deadline = Instant::now() + Duration::from_secs(30);
        while running.load(Ordering::SeqCst) < MAX_BLOCKING_THREADS {
            if Instant::now() > deadline {
                return Err("the blocking tasks did not start".into());
            }
            std::thread::yield_now();
        }
        released.store(true, Ordering::SeqCst);
        for handle in handles {
            runtime.block_on(handle).map_err(|e| e.to_string())?;
        }
        assert_eq!(running.load(Ordering::SeqCst), tasks);
        let used = threads.lock().map_err(|e| e.to_string())?.len();
        assert!(
            used <= MAX_BLOCKING_THREADS,
            "{used} threads ran blocking work (at most {MAX_BLOCKING_THREADS})"
        );
        Ok(())
    }
}
