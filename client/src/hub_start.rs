//! `tau hub start`: starts the hub in the background, as `tau chat` does when none answers, and
//! waits until it answers a status call on its socket (or says why it did not).
//!
//! Invariants: a hub that already answers is left alone (success, "already running"); the started
//! `taud` is detached from this command (`crate::chat::attach`), so it outlives it; the wait has a
//! deadline (`--timeout`, at most [`MAX_TIMEOUT_SECONDS`]).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tau_api::installation::Installation;

use crate::chat::attach::{self, AttachError};
use crate::context::Context;
use crate::environment;
use crate::hub_link::{EXIT_NO_HUB, HubAddress};

/// The longest `--timeout` taken, in seconds.
pub const MAX_TIMEOUT_SECONDS: u64 = 600;

/// Runs `tau hub start`.
pub fn run(timeout: u64, json: bool, ctx: &Context) -> anyhow::Result<ExitCode> {
    let installation =
        Installation::discover(environment::snapshot(ctx), &environment::current_dir()?)?;
    let socket = installation.paths.hub.socket.clone();
    let address = HubAddress::Unix(socket.clone());
    let mut start = crate::chat::start_options(ctx, &installation);
    start.deadline = Duration::from_secs(timeout.clamp(1, MAX_TIMEOUT_SECONDS));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let attached = runtime.block_on(attach::attach(&address, Some(&start)));
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match attached {
        Ok(attached) => {
            report(
                &mut out,
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
