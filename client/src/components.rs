//! `tau components`: every component in every group with its kind, distribution, version,
//! enabled/disabled, why, and its load error; then the names in `[components]` that nothing
//! provides. `--json` prints the same for scripts.
//!
//! When a hub answers on the loopback control port (`GET /status`, one second in all), what it says
//! about its services (started, skipped, failed with the error) is merged into the listing;
//! otherwise one line says `hub not running: built-in table only`.
//!
//! Invariants: it reads the configuration and asks nothing but 127.0.0.1; the listing comes from
//! `tau_api::components`, the one description of what taud ships; a planned provider named in
//! `tau.toml` does not stop the listing (it is shown as planned).

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;
use tau_api::components::{
    ComponentKind, ComponentState, UnknownName, component_states, merge_hub_report, unknown_names,
};
use tau_api::config::{KnownNames, PLANNED_PROVIDERS};
use tau_api::installation::Installation;

use crate::cli::{ComponentsArgs, Context};
use crate::doctor::hub::{self, HubServices};
use crate::environment;

/// How long asking the hub may take in all.
const HUB_DEADLINE: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Serialize)]
struct Listing<'a> {
    version: &'static str,
    /// The tau.toml read, or null for the built-in defaults.
    config: Option<String>,
    /// What the hub said: `answered` when a hub's services report was merged in, and the line
    /// shown to a person.
    hub: HubLine,
    components: &'a [ComponentState],
    unknown: &'a [UnknownName],
    /// The clients this `tau` ships (commands, not components of the hub).
    clients: &'static [Client],
}

/// A client command of `tau`.
#[derive(Serialize)]
struct Client {
    command: &'static str,
    channel: &'static str,
    what: &'static str,
}

/// The clients of this `tau`.
const CLIENTS: &[Client] = &[
    Client {
        command: "tau chat",
        channel: "terminal",
        what: "line-based chat",
    },
    Client {
        command: "tau tui",
        channel: "terminal",
        what: "full-screen client: conversation, sessions, events, approval card",
    },
    Client {
        command: "tau ask",
        channel: "cli",
        what: "one turn from the command line",
    },
];

#[derive(Serialize)]
struct HubLine {
    answered: bool,
    message: String,
}

/// Asks the hub on `port` for its services and merges them into `states`.
fn merge_from_hub(states: &mut Vec<ComponentState>, port: u16, token_file: &Path) -> HubLine {
    let not_running = |message: String| HubLine {
        answered: false,
        message,
    };
    if port == 0 {
        return not_running(format!("{} (the control port is 0)", hub::NO_HUB));
    }
    match hub::services(port, token_file, HUB_DEADLINE) {
        HubServices::Answered(reports) => {
            merge_hub_report(states, &reports);
            HubLine {
                answered: true,
                message: format!("hub services as the hub on 127.0.0.1:{port} reports them"),
            }
        }
        HubServices::NotRunning => not_running(hub::NO_HUB.to_string()),
        HubServices::Unexpected(why) => not_running(format!(
            "no services report from 127.0.0.1:{port} ({why}): built-in table only"
        )),
    }
}

/// Runs `tau components`.
pub fn run(args: &ComponentsArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let env = environment::snapshot(ctx);
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let known = PLANNED_PROVIDERS
        .iter()
        .fold(KnownNames::builtin(), |k, p| k.with_provider(*p));
    let installation = match Installation::discover_with(env, &cwd, &known) {
        Ok(installation) => installation,
        Err(e) => {
            eprintln!("tau components: {e}");
            eprintln!("next: correct it, then run `tau doctor` to check the rest");
            return Ok(ExitCode::FAILURE);
        }
    };
    for problem in &installation.dotenv_problems {
        tracing::warn!("{problem}");
    }
    for warning in &installation.config.warnings {
        tracing::warn!("{warning}");
    }
    let config = &installation.config;
    let mut states = component_states(config);
    let hub_line = merge_from_hub(
        &mut states,
        installation.settings.hub_port,
        &installation.paths.hub.token_file,
    );
    let unknown = unknown_names(&config.components);
    let config_file = config.source().file().map(|f| f.display().to_string());
    if args.json {
        let listing = Listing {
            version: tau_api::VERSION,
            config: config_file,
            hub: hub_line,
            components: &states,
            unknown: &unknown,
            clients: CLIENTS,
        };
        println!("{}", serde_json::to_string_pretty(&listing)?);
    } else {
        println!("{}", hub_line.message);
        print!("{}", render(&states, &unknown, config_file.as_deref()));
    }
    Ok(ExitCode::SUCCESS)
}

/// The listing for a person: one heading per group, one line per component.
fn render(states: &[ComponentState], unknown: &[UnknownName], config_file: Option<&str>) -> String {
    let width = states.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for kind in ComponentKind::ALL {
        let _ = writeln!(out, "{}", kind.group());
        let mut any = false;
        for state in states.iter().filter(|s| s.kind == kind) {
            any = true;
            let enabled = if state.enabled { "enabled" } else { "disabled" };
            let _ = write!(
                out,
                "  {:<width$}  {:<15} {:<8}  {} {}",
                state.name,
                state.kind.as_str(),
                enabled,
                state.distribution,
                state.version
            );
            if let Some(tier) = state.tier {
                let _ = write!(out, "  tier {tier}");
            }
            if let Some(note) = &state.note {
                let _ = write!(out, "  ({note})");
            }
            if let Some(error) = &state.load_error {
                let _ = write!(out, "  load error: {error}");
            }
            out.push('\n');
        }
        if !any {
            out.push_str("  (none built in)\n");
        }
    }
    out.push_str("clients\n");
    for client in CLIENTS {
        let _ = writeln!(
            out,
            "  {:<8}  {:<9} {}",
            client.command, client.channel, client.what
        );
    }
    if !unknown.is_empty() {
        out.push_str("unknown names in [components]\n");
        for u in unknown {
            let _ = writeln!(out, "  {}: '{}' (no component provides it)", u.key, u.name);
        }
        let _ = writeln!(
            out,
            "next: check the spelling of those names in {}",
            config_file.unwrap_or("tau.toml")
        );
    }
    out
}
