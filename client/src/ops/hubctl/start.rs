//! `tau hub start`: starts the hub in the background, as `tau chat` does when none answers (the
//! one way: `crate::hub_link::auto_start`), and waits until it answers a status call on its socket
//! (or says why it did not).
//!
//! Invariants: a hub that already answers is left alone (success, "already running"); the started
//! `taud` is detached from this command, so it outlives it; the wait has a deadline (`--timeout`,
//! at most [`MAX_TIMEOUT_SECONDS`]); it needs the installation's paths only, not a valid
//! `tau.toml` (a hub that refuses its configuration is reported with its last log line).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;

use super::HubContext;
use crate::hub_link::auto_start::{self, AttachError, StartOptions};
use crate::hub_link::{EXIT_NO_HUB, HubAddress};

/// The longest `--timeout` taken, in seconds.
pub const MAX_TIMEOUT_SECONDS: u64 = 600;

/// Runs `tau hub start` for the hub of `ctx`, reporting to `out`.
pub(super) fn start(
    ctx: &HubContext,
    timeout: u64,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let socket = ctx.paths.hub.socket.clone();
    let address = HubAddress::Unix(socket.clone());
    let start = StartOptions {
        taud: ctx.find_taud(),
        log_file: ctx.paths.logs_dir.join("taud.out"),
        child_env: ctx.child_env.clone(),
        deadline: Duration::from_secs(timeout.clamp(1, MAX_TIMEOUT_SECONDS)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match runtime.block_on(auto_start::attach(&address, Some(&start))) {
        Ok(attached) => {
            report(
                out,
                json,
                attached.started,
                &socket.display().to_string(),
                &start.log_file.display().to_string(),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("tau hub start: {}", failure(&error));
            Ok(ExitCode::from(EXIT_NO_HUB))
        }
    }
}

/// What a started (or already running) hub looks like to a person or a script.
fn report(
    out: &mut dyn Write,
    json: bool,
    started: Option<u32>,
    socket: &str,
    log: &str,
) -> std::io::Result<()> {
    if json {
        let value = serde_json::json!({
            "started": started.is_some(),
            "pid": started,
            "socket": socket,
            "log": started.map(|_| log),
        });
        return writeln!(out, "{value}");
    }
    match started {
        Some(pid) => writeln!(
            out,
            "tau hub started (pid {pid}); it answers on {socket}; its output goes to {log}"
        ),
        None => writeln!(out, "tau hub is already running; it answers on {socket}"),
    }
}

/// Why no hub answers, in one line.
fn failure(error: &AttachError) -> String {
    match error {
        AttachError::NoTaud => {
            format!("{error} (build it with `cargo build --release`, or install it beside tau)")
        }
        error => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_the_pid_the_socket_and_the_log() {
        let mut text = Vec::new();
        report(
            &mut text,
            false,
            Some(42),
            "/d/hub/taud.sock",
            "/d/logs/taud.out",
        )
        .unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("pid 42") && text.contains("/d/hub/taud.sock"),
            "{text}"
        );
        let mut json = Vec::new();
        report(
            &mut json,
            true,
            None,
            "/d/hub/taud.sock",
            "/d/logs/taud.out",
        )
        .unwrap();
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(value["started"], false);
        assert_eq!(value["pid"], serde_json::Value::Null);
        assert_eq!(value["log"], serde_json::Value::Null);
    }
}
