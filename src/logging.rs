//! Logging set-up shared by the hub and every channel: one-line records on stderr and the full
//! record in `<logs_dir>/tau.log`, so `taud`, `tau chat`, the TUI and other channels write to the
//! same file.
//!
//! - stderr (unless `console` is false, e.g. a full-screen UI that owns the terminal): WARN and up,
//!   INFO and up with `verbose`; one line per record, no timestamp.
//! - `<logs_dir>/tau.log` (when a directory is given): INFO and up, with or without `verbose`;
//!   timestamped, no colours; an error logged as a field (`error = &err as &dyn Error`) is written
//!   with its source chain (`error=outer error.sources=[cause, root cause]`). With
//!   `TAU_LOG_FORMAT=json` ([`LogFormat::Json`]) each record is one JSON object per line, with the
//!   fields of its current span (`span`) and of every span it is in (`spans`), so a busy hub's log
//!   can be followed per session (`tau.session_id`, `tau.channel`, `tau.profile`, `turn_id`, …);
//!   a span's close is a line too (`"message": "close"`, with `time.busy` and `time.idle`).
//!
//! Invariants: the log directory is created 0700 and the file 0600 on Unix (an existing file is
//! tightened to 0600); the file is opened for appending and every record is one `write` call, so
//! several processes can share it without interleaving lines. Chatty dependencies (`h2`,
//! `hyper`, `tower`, …) are capped at INFO even with `verbose`. Nothing here keeps global mutable
//! state of its own: [`configure_logging`] installs tracing's process-wide default once and hands
//! back the only handle to it; [`scoped_logging`] installs a thread-local default for tests.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing::level_filters::LevelFilter;
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{Layer, Registry, fmt, reload};

use crate::env::Env;

/// The name of the log file inside the logs directory.
pub const LOG_FILE_NAME: &str = "tau.log";

/// The variable that picks the file log's format: `json` for JSON lines, anything else for text.
pub const LOG_FORMAT_VAR: &str = "TAU_LOG_FORMAT";

/// How records are written to the log file (the console is always one-line text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Timestamped text lines, span fields in front of the message.
    #[default]
    Text,
    /// One JSON object per line, with the fields of the record's spans.
    Json,
}

impl LogFormat {
    /// The format `TAU_LOG_FORMAT` asks for: `json` (any case) is [`LogFormat::Json`]; unset or
    /// any other value is [`LogFormat::Text`], so a typo never costs the log.
    pub fn from_env(env: &Env) -> Self {
        match env.get(LOG_FORMAT_VAR) {
            Some(value) if value.trim().eq_ignore_ascii_case("json") => Self::Json,
            _ => Self::Text,
        }
    }
}

/// Dependencies whose DEBUG output would drown tau's own; capped at INFO.
const NOISY_TARGETS: &[&str] = &[
    "h2",
    "hyper",
    "hyper_util",
    "tower",
    "tonic",
    "rustls",
    "reqwest",
    "mio",
    "tokio_util",
];

/// One layer of the process's subscriber (see [`configure_logging_with`]).
pub type BoxedLayer = Box<dyn Layer<Registry> + Send + Sync>;
type Layers = Vec<BoxedLayer>;

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    /// The logs directory could not be created.
    #[error("cannot create the log directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The log file could not be opened, or its permissions set.
    #[error("cannot open the log file {}: {source}", path.display())]
    OpenFile {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Something other than a regular file is in the log file's place.
    #[error("the log file {} is not a regular file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// This process already has a global logging subscriber (from an earlier
    /// [`configure_logging`] or another library); the earlier one stays in force.
    #[error("logging is already configured in this process")]
    AlreadyConfigured,
}

/// The process-wide logging set up by [`configure_logging`]. Keep it for as long as records
/// should be written: dropping it, or calling [`LoggingGuard::reset`], removes the stderr and
/// file handlers (later records go nowhere) and closes the file.
#[must_use = "dropping the guard removes the log handlers"]
pub struct LoggingGuard {
    handle: Option<reload::Handle<Layers, Registry>>,
    log_file: Option<PathBuf>,
}

impl LoggingGuard {
    /// The log file records are appended to, when a logs directory was given.
    pub fn log_file(&self) -> Option<&Path> {
        self.log_file.as_deref()
    }

    /// Removes the handlers now (the same as dropping the guard).
    pub fn reset(mut self) {
        self.remove_handlers();
    }

    fn remove_handlers(&mut self) {
        if let Some(handle) = self.handle.take() {
            // The only error is "subscriber gone", which leaves nothing to remove.
            let _ = handle.modify(Vec::clear);
        }
    }
}

impl Drop for LoggingGuard {
    fn drop(&mut self) {
        self.remove_handlers();
    }
}

impl std::fmt::Debug for LoggingGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoggingGuard")
            .field("active", &self.handle.is_some())
            .field("log_file", &self.log_file)
            .finish()
    }
}

/// Logging installed for the current thread only by [`scoped_logging`]; dropping it restores
/// the thread's previous default.
#[must_use = "dropping the guard removes the log handlers"]
pub struct ScopedLogging {
    _default: DefaultGuard,
    log_file: Option<PathBuf>,
}

impl ScopedLogging {
    /// The log file records are appended to, when a logs directory was given.
    pub fn log_file(&self) -> Option<&Path> {
        self.log_file.as_deref()
    }
}

impl std::fmt::Debug for ScopedLogging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopedLogging")
            .field("log_file", &self.log_file)
            .finish()
    }
}

/// Sets up the process's logging (see the module docs for what goes where) and returns the guard
/// that owns it; `guard.log_file()` is `<logs_dir>/tau.log`.
///
/// It installs tracing's global default, which a process can do once: a second call, even after
/// the first guard was dropped, returns [`LoggingError::AlreadyConfigured`] and leaves the first
/// set-up in force (the refused call may still have created the directory and an empty file).
/// Tests use [`scoped_logging`] instead.
pub fn configure_logging(
    logs_dir: Option<&Path>,
    verbose: bool,
    console: bool,
) -> Result<LoggingGuard, LoggingError> {
    configure_logging_as(logs_dir, verbose, console, LogFormat::Text)
}

/// [`configure_logging`] with the log file written in `format`.
pub fn configure_logging_as(
    logs_dir: Option<&Path>,
    verbose: bool,
    console: bool,
    format: LogFormat,
) -> Result<LoggingGuard, LoggingError> {
    configure_logging_with(logs_dir, verbose, console, format, Vec::new())
}

/// [`configure_logging_as`] plus `extra` layers a binary adds (a trace exporter behind a cargo
/// feature); each brings its own filter, and the guard removes them with the others.
pub fn configure_logging_with(
    logs_dir: Option<&Path>,
    verbose: bool,
    console: bool,
    format: LogFormat,
    extra: Vec<BoxedLayer>,
) -> Result<LoggingGuard, LoggingError> {
    let stderr = console.then_some(StderrWriter);
    let ansi = io::stderr().is_terminal();
    let (mut layers, log_file) = build_layers(logs_dir, verbose, stderr, ansi, format)?;
    layers.extend(extra);
    let (layer, handle) = reload::Layer::new(layers);
    let subscriber = Registry::default().with(layer);
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|_| LoggingError::AlreadyConfigured)?;
    Ok(LoggingGuard {
        handle: Some(handle),
        log_file,
    })
}

/// The same set-up as [`configure_logging`] for the current thread only, until the returned
/// guard is dropped. Any number of these can exist, one per test thread.
pub fn scoped_logging(
    logs_dir: Option<&Path>,
    verbose: bool,
    console: bool,
) -> Result<ScopedLogging, LoggingError> {
    let stderr = console.then_some(StderrWriter);
    scoped_with_console(logs_dir, verbose, stderr, io::stderr().is_terminal())
}

/// [`scoped_logging`] with the log file written in `format`.
pub fn scoped_logging_as(
    logs_dir: Option<&Path>,
    verbose: bool,
    console: bool,
    format: LogFormat,
) -> Result<ScopedLogging, LoggingError> {
    let stderr = console.then_some(StderrWriter);
    scoped_with_console_as(
        logs_dir,
        verbose,
        stderr,
        io::stderr().is_terminal(),
        format,
    )
}

fn scoped_with_console<W>(
    logs_dir: Option<&Path>,
    verbose: bool,
    console: Option<W>,
    ansi: bool,
) -> Result<ScopedLogging, LoggingError>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    scoped_with_console_as(logs_dir, verbose, console, ansi, LogFormat::Text)
}

fn scoped_with_console_as<W>(
    logs_dir: Option<&Path>,
    verbose: bool,
    console: Option<W>,
    ansi: bool,
    format: LogFormat,
) -> Result<ScopedLogging, LoggingError>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let (layers, log_file) = build_layers(logs_dir, verbose, console, ansi, format)?;
    let subscriber = Registry::default().with(layers);
    Ok(ScopedLogging {
        _default: tracing::subscriber::set_default(subscriber),
        log_file,
    })
}

/// Writes console records to the process's stderr.
#[derive(Debug, Clone, Copy)]
struct StderrWriter;

impl<'a> MakeWriter<'a> for StderrWriter {
    type Writer = io::Stderr;

    fn make_writer(&'a self) -> Self::Writer {
        io::stderr()
    }
}

/// Appends records to the shared log file; one `write_all` per record through the `&File`.
#[derive(Debug, Clone)]
struct LogFile(Arc<File>);

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = &'a File;

    fn make_writer(&'a self) -> Self::Writer {
        &self.0
    }
}

/// A level for everything, with the noisy dependencies capped at INFO.
fn level_filter(level: LevelFilter) -> Targets {
    let capped = level.min(LevelFilter::INFO);
    Targets::new()
        .with_default(level)
        .with_targets(NOISY_TARGETS.iter().map(|target| (*target, capped)))
}

fn build_layers<W>(
    logs_dir: Option<&Path>,
    verbose: bool,
    console: Option<W>,
    ansi: bool,
    format: LogFormat,
) -> Result<(Layers, Option<PathBuf>), LoggingError>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let mut layers: Layers = Vec::with_capacity(2);
    if let Some(writer) = console {
        let level = if verbose {
            LevelFilter::INFO
        } else {
            LevelFilter::WARN
        };
        let layer = fmt::layer()
            .compact()
            .without_time()
            .with_target(false)
            .with_ansi(ansi)
            .with_writer(writer)
            .with_filter(level_filter(level));
        layers.push(Box::new(layer));
    }
    let mut log_file = None;
    if let Some(dir) = logs_dir {
        let (file, path) = open_log_file(dir)?;
        // INFO and up whatever `verbose` says: -v changes what a person sees, not the record.
        let level = LevelFilter::INFO;
        let writer = LogFile(Arc::new(file));
        let layer: BoxedLayer = match format {
            LogFormat::Text => Box::new(
                fmt::layer()
                    .with_ansi(false)
                    .with_writer(writer)
                    .with_filter(level_filter(level)),
            ),
            // A span's close is a line of its own too, with how long it was busy: the turn, each
            // model call and each tool call then show in the log even when nothing inside logs.
            LogFormat::Json => Box::new(
                fmt::layer()
                    .json()
                    .with_current_span(true)
                    .with_span_list(true)
                    .with_span_events(fmt::format::FmtSpan::CLOSE)
                    .with_writer(writer)
                    .with_filter(level_filter(level)),
            ),
        };
        layers.push(layer);
        log_file = Some(path);
    }
    Ok((layers, log_file))
}

/// Creates `dir` (0700 for what it creates) and opens `dir/tau.log` for appending (0600).
fn open_log_file(dir: &Path) -> Result<(File, PathBuf), LoggingError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(dir)
        .map_err(|source| LoggingError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;

    let path = dir.join(LOG_FILE_NAME);
    let open_error = |source| LoggingError::OpenFile {
        path: path.clone(),
        source,
    };
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options.open(&path).map_err(open_error)?;
    let metadata = file.metadata().map_err(open_error)?;
    if !metadata.is_file() {
        return Err(LoggingError::NotAFile { path });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o077 != 0 {
            file.set_permissions(fs::Permissions::from_mode(0o600))
                .map_err(open_error)?;
        }
    }
    Ok((file, path))
}

#[cfg(test)]
mod tests;
