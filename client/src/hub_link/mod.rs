//! How `tau` reaches the hub: the gRPC API through the client library's one connect
//! (`tau_client::connect`, re-exported here), starting a hub in the background when none answers
//! ([`auto_start`]: `tau chat`, `tau tui` and `tau hub start` all start one there), and the JSON
//! control API (`GET /health`, `GET /status`) on the loopback port ([`control_http`]).
//!
//! Invariants: every connection attempt and every wait for a started hub has a deadline (the JSON
//! probes take theirs from the caller); a hub is started only by [`auto_start`], and only the
//! `taud` its caller found; the token is read through `tau_client::connect::token` and never
//! printed. See ARCHITECTURE.md.

pub mod auto_start;
pub mod control_http;

use std::time::Duration;

pub use tau_client::connect::{HubAddress, HubClient, connect};

/// The exit code of a command that needs a hub when none answers (EX_UNAVAILABLE).
pub const EXIT_NO_HUB: u8 = 69;

/// [`connect`] for the one-shot command `command` (`tau routine`, `tau approvals`) within
/// `deadline`; when no hub answers, prints one line saying so and gives [`EXIT_NO_HUB`].
pub async fn connect_or_report(
    command: &str,
    address: &HubAddress,
    deadline: Duration,
) -> Result<HubClient, std::process::ExitCode> {
    match tokio::time::timeout(deadline, connect(address)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(not_running)) => {
            eprintln!("{command}: {not_running}. Start one with `tau hub start`.");
            Err(std::process::ExitCode::from(EXIT_NO_HUB))
        }
        Err(_) => {
            eprintln!("{command}: the hub did not answer within {deadline:?}");
            Err(std::process::ExitCode::from(EXIT_NO_HUB))
        }
    }
}
