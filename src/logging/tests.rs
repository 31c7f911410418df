//! Tests of the logging set-up: what reaches the file and the console at which level, error
//! chains, permissions, appending, and the once-per-process global install.

use std::io::Write;
use std::sync::Mutex;

use super::*;

/// A console that records what it is given.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

struct CaptureWriter(Arc<Mutex<Vec<u8>>>);

impl Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Capture {
    type Writer = CaptureWriter;

    fn make_writer(&'a self) -> Self::Writer {
        CaptureWriter(Arc::clone(&self.0))
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the model call failed")]
struct Outer(#[source] Middle);

#[derive(Debug, thiserror::Error)]
#[error("connection reset")]
struct Middle(#[source] io::Error);

fn chained_error() -> Outer {
    Outer(Middle(io::Error::other("socket closed by peer")))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap()
}

#[test]
fn file_gets_info_and_error_chains_but_not_debug() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("data").join("logs");
    let console = Capture::default();
    let path = {
        let guard = scoped_with_console(Some(&logs), false, Some(console.clone()), false).unwrap();
        tracing::debug!("debug-record-hidden");
        tracing::info!(tool = "desk_lamp", "info-record");
        let err = chained_error();
        tracing::error!(error = &err as &dyn std::error::Error, "turn failed");
        guard.log_file().unwrap().to_path_buf()
    };
    assert_eq!(path, logs.join("tau.log"));
    let text = read(&path);
    assert!(text.contains("INFO"), "{text}");
    assert!(
        text.contains("info-record") && text.contains("tool=\"desk_lamp\""),
        "{text}"
    );
    assert!(!text.contains("debug-record-hidden"), "{text}");
    let error_line = text.lines().find(|l| l.contains("turn failed")).unwrap();
    assert!(error_line.contains("ERROR"), "{error_line}");
    assert!(error_line.contains("the model call failed"), "{error_line}");
    assert!(
        error_line.contains("error.sources=[connection reset, socket closed by peer]"),
        "{error_line}"
    );
    assert!(!text.contains('\u{1b}'), "no colours in the file: {text:?}");
    // The console saw only the error, on one line, with its chain too.
    let console = console.text();
    assert_eq!(console.lines().count(), 1, "{console}");
    assert!(console.contains("turn failed") && console.contains("socket closed by peer"));
}

#[test]
fn verbose_raises_the_console_to_info_and_leaves_the_file_at_info() {
    let dir = tempfile::tempdir().unwrap();
    let console = Capture::default();
    let guard = scoped_with_console(Some(dir.path()), true, Some(console.clone()), false).unwrap();
    tracing::trace!("trace-record");
    tracing::debug!("plain-debug-record");
    tracing::info!("info-record");
    tracing::debug!(target: "h2::codec", "h2-debug-record");
    tracing::info!(target: "h2::codec", "h2-info-record");
    let text = read(guard.log_file().unwrap());
    drop(guard);
    assert!(text.contains("info-record"), "{text}");
    assert!(
        !text.contains("plain-debug-record") && !text.contains("trace-record"),
        "the file gets INFO and up, -v or not: {text}"
    );
    assert!(!text.contains("h2-debug-record"), "{text}");
    assert!(text.contains("h2-info-record"), "{text}");
    let console = console.text();
    assert!(console.contains("info-record"), "{console}");
    assert!(!console.contains("debug-record"), "{console}");
}

#[test]
fn console_shows_warnings_and_up_without_verbose() {
    let console = Capture::default();
    let guard = scoped_with_console(None, false, Some(console.clone()), false).unwrap();
    assert_eq!(guard.log_file(), None);
    tracing::info!("info-record");
    tracing::warn!("warn-record");
    tracing::error!("error-record");
    drop(guard);
    tracing::error!("after-drop");
    let console = console.text();
    assert!(
        !console.contains("after-drop"),
        "dropping the guard removes the handler: {console}"
    );
    assert!(!console.contains("info-record"), "{console}");
    assert!(
        console.contains("warn-record") && console.contains("error-record"),
        "{console}"
    );
    for line in console.lines() {
        assert!(
            line.starts_with(" WARN") || line.starts_with("ERROR"),
            "{line:?}"
        );
    }
}

#[test]
fn without_console_the_file_still_gets_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let guard = scoped_logging(Some(dir.path()), false, false).unwrap();
    tracing::warn!("warn-record");
    tracing::info!("info-record");
    let text = read(guard.log_file().unwrap());
    assert!(
        text.contains("warn-record") && text.contains("info-record"),
        "{text}"
    );
}

#[test]
fn records_are_appended_across_set_ups() {
    let dir = tempfile::tempdir().unwrap();
    {
        let _guard = scoped_logging(Some(dir.path()), false, false).unwrap();
        tracing::info!("first-run");
    }
    let guard = scoped_logging(Some(dir.path()), false, false).unwrap();
    tracing::info!("second-run");
    let text = read(guard.log_file().unwrap());
    let first = text.find("first-run").unwrap();
    let second = text.find("second-run").unwrap();
    assert!(first < second, "{text}");
    assert_eq!(text.lines().count(), 2, "{text}");
}

#[cfg(unix)]
#[test]
fn directory_is_private_and_file_is_tightened() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    {
        let guard = scoped_logging(Some(&logs), false, false).unwrap();
        assert_eq!(mode(&logs), 0o700);
        assert_eq!(mode(guard.log_file().unwrap()), 0o600);
    }
    let file = logs.join(LOG_FILE_NAME);
    fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    let _guard = scoped_logging(Some(&logs), false, false).unwrap();
    assert_eq!(mode(&file), 0o600);
}

#[test]
fn unusable_paths_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-dir");
    fs::write(&blocker, b"x").unwrap();
    let err = scoped_logging(Some(&blocker.join("logs")), false, false).unwrap_err();
    assert!(matches!(err, LoggingError::CreateDir { .. }), "{err}");
    assert!(err.to_string().contains("not-a-dir"), "{err}");

    let logs = dir.path().join("logs");
    fs::create_dir_all(logs.join(LOG_FILE_NAME)).unwrap();
    let err = scoped_logging(Some(&logs), false, false).unwrap_err();
    assert!(
        matches!(
            err,
            LoggingError::OpenFile { .. } | LoggingError::NotAFile { .. }
        ),
        "{err}"
    );
}

/// The only test that touches the process-wide default.
#[test]
fn global_set_up_happens_once_and_reset_removes_the_handlers() {
    let dir = tempfile::tempdir().unwrap();
    let guard = configure_logging(Some(dir.path()), false, false).unwrap();
    let path = guard.log_file().unwrap().to_path_buf();
    tracing::info!("global-before-reset");

    let second = tempfile::tempdir().unwrap();
    assert!(matches!(
        configure_logging(Some(second.path()), false, false),
        Err(LoggingError::AlreadyConfigured)
    ));
    tracing::info!("global-still-first");

    guard.reset();
    tracing::error!("global-after-reset");
    let text = read(&path);
    assert!(text.contains("global-before-reset"), "{text}");
    assert!(
        text.contains("global-still-first"),
        "the first set-up stays: {text}"
    );
    assert!(!text.contains("global-after-reset"), "{text}");
}

#[test]
fn the_global_guard_can_move_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<LoggingGuard>();
    assert_send_sync::<LoggingError>();
}

#[test]
fn json_lines_carry_the_fields_of_their_spans() {
    let dir = tempfile::tempdir().unwrap();
    let guard = scoped_with_console_as(
        Some(dir.path()),
        false,
        None::<Capture>,
        false,
        LogFormat::Json,
    )
    .unwrap();
    {
        let turn = tracing::info_span!(
            "turn",
            "tau.session_id" = "s-1",
            "tau.channel" = "terminal",
            "tau.profile" = "home",
            turn_id = "t-1"
        );
        let _in_turn = turn.enter();
        let tool = tracing::info_span!("tool_call", tool = "current_time");
        tool.in_scope(|| tracing::info!(tier = 0, "the tool ran"));
    }
    let path = guard.log_file().unwrap().to_path_buf();
    drop(guard);
    let text = read(&path);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // The record, then one close line per span (innermost first).
    let closed: Vec<&str> = lines[1..]
        .iter()
        .map(|line| line["span"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(closed, ["tool_call", "turn"], "{text}");
    assert_eq!(lines[1]["fields"]["message"], "close", "{text}");
    let line = &lines[0];
    assert_eq!(line["fields"]["message"], "the tool ran", "{line}");
    assert_eq!(line["level"], "INFO", "{line}");
    assert_eq!(line["span"]["name"], "tool_call", "{line}");
    assert_eq!(line["span"]["tool"], "current_time", "{line}");
    let turn = &line["spans"][0];
    assert_eq!(turn["name"], "turn", "{line}");
    assert_eq!(turn["tau.session_id"], "s-1", "{line}");
    assert_eq!(turn["tau.channel"], "terminal", "{line}");
    assert_eq!(turn["tau.profile"], "home", "{line}");
    assert_eq!(turn["turn_id"], "t-1", "{line}");
}

#[test]
fn log_format_comes_from_tau_log_format() {
    let env = |value: &str| Env::from_iter([(LOG_FORMAT_VAR.to_owned(), value.to_owned())]);
    assert_eq!(LogFormat::from_env(&Env::new()), LogFormat::Text);
    assert_eq!(LogFormat::from_env(&env("json")), LogFormat::Json);
    assert_eq!(LogFormat::from_env(&env(" JSON ")), LogFormat::Json);
    assert_eq!(LogFormat::from_env(&env("text")), LogFormat::Text);
    assert_eq!(LogFormat::from_env(&env("jsn")), LogFormat::Text);
}
