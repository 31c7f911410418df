//! `tau components`: every component in every group with its kind, distribution, version,
//! enabled/disabled, why, and its load error; the clients and the plugin commands on PATH; then
//! the names in `[components]` that nothing provides. `--json` prints the same for scripts.
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

use serde::Serialize;
use tau_api::components::{
    ComponentKind, ComponentState, UnknownName, component_states, merge_hub_report, unknown_names,
};
use tau_api::config::{KnownNames, PLANNED_PROVIDERS};
use tau_api::installation::Installation;

use crate::cli::ComponentsArgs;
use crate::context::Context;
use crate::environment;
use crate::hub_link::control_http::{self as hub, HubServices};
use crate::plugin_commands::{self, Plugin};

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
    /// The plugin commands on PATH (`tau NAME` runs `tau-NAME`).
    plugins: &'a [Plugin],
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

/// Adds what the hub says of each channel it runs (Telegram: running, not paired, backing off,
/// stopped) to that service's row: the state as its note, an error as its `load_error`.
fn channel_states(states: &mut [ComponentState], port: u16, token_file: &Path) {
    let Ok(status) = hub::status_json(port, token_file, HUB_DEADLINE) else {
        return;
    };
    for channel in status["channels"].as_array().into_iter().flatten() {
        let Some(row) = states
            .iter_mut()
            .find(|s| s.kind == ComponentKind::HubService && channel["name"] == s.name.as_str())
        else {
            continue;
        };
        let state = channel["state"].as_str().unwrap_or("unknown");
        let restarts = channel["restarts"].as_u64().unwrap_or(0);
        row.note = Some(format!("channel {state}, restarts {restarts}"));
        let error = channel["error"].as_str().unwrap_or("");
        if !error.is_empty() && matches!(state, "backing_off" | "stopped") {
            row.load_error = Some(error.to_owned());
        }
    }
}

/// Runs `tau components`.
pub fn run(args: &ComponentsArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let env = environment::snapshot(ctx);
    let plugins = plugin_commands::on_path(&env);
    let cwd = environment::current_dir()?;
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
    // Asked only when a channel is configured, so a plain listing costs one request.
    if hub_line.answered && config.component("telegram").is_some() {
        channel_states(
            &mut states,
            installation.settings.hub_port,
            &installation.paths.hub.token_file,
        );
    }
    let mcp_report = if config.mcp.servers.is_empty() || !hub_line.answered {
        None
    } else {
        hub::status_json(
            installation.settings.hub_port,
            &installation.paths.hub.token_file,
            HUB_DEADLINE,
        )
        .ok()
    };
    states.extend(mcp_rows(config, mcp_report.as_ref()));
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
            plugins: &plugins,
        };
        outln!("{}", serde_json::to_string_pretty(&listing)?);
    } else {
        outln!("{}", hub_line.message);
        out!(
            "{}",
            render(&states, &unknown, &plugins, config_file.as_deref())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One row per MCP tool: the tools tau.toml tiers, with their server's state when a hub reported
/// it, and the tools a server offers without a tier (never offered, so shown disabled).
fn mcp_rows(
    config: &tau_api::config::Config,
    status: Option<&serde_json::Value>,
) -> Vec<ComponentState> {
    let mut rows = Vec::new();
    for (server, server_config) in &config.mcp.servers {
        let report = status
            .and_then(|s| s["mcp"]["servers"].as_array())
            .and_then(|servers| servers.iter().find(|s| s["name"] == server.as_str()));
        let server_state = report
            .and_then(|r| r["state"].as_str())
            .unwrap_or("not reported");
        let disabled = |name: &str| {
            config.components.tools.disabled.iter().any(|item| {
                item == name || item.strip_prefix("dist:") == Some(&format!("mcp:{server}"))
            })
        };
        let reported_tools = report.and_then(|r| r["tools"].as_array());
        let mut push = |name: String, tier: Option<u8>, enabled: bool, note: String| {
            rows.push(ComponentState {
                group: ComponentKind::Tool.group(),
                kind: ComponentKind::Tool,
                name,
                distribution: format!("mcp:{server}"),
                version: String::new(),
                enabled,
                tier,
                note: Some(note),
                load_error: report.and_then(|r| r["error"].as_str()).map(str::to_owned),
            });
        };
        match reported_tools {
            Some(tools) => {
                for tool in tools {
                    let raw = tool["tool"].as_str().unwrap_or_default();
                    let name = tool["name"]
                        .as_str()
                        .filter(|n| !n.is_empty())
                        .unwrap_or(raw);
                    let tier = tool["tier"].as_u64().and_then(|t| u8::try_from(t).ok());
                    let (enabled, note) = match tool["state"].as_str() {
                        Some("offered") => (
                            !disabled(name),
                            format!("MCP server {server} ({server_state})"),
                        ),
                        Some("untiered") => (
                            false,
                            format!("MCP server {server}: no tier in tau.toml, never offered"),
                        ),
                        Some("refused") => (
                            false,
                            format!(
                                "MCP server {server}: refused, {}",
                                tool["warning"].as_str().unwrap_or("its name is taken")
                            ),
                        ),
                        _ => (
                            false,
                            format!("MCP server {server}: tiered but not offered by the server"),
                        ),
                    };
                    push(name.to_owned(), tier, enabled, note);
                }
            }
            None => {
                for (tool, tier) in &server_config.tools {
                    let name = tau_api::mcp_names::model_name(server, tool);
                    let enabled = !disabled(&name);
                    push(
                        name,
                        Some(tier.tier),
                        enabled,
                        format!("MCP server {server} ({server_state})"),
                    );
                }
            }
        }
    }
    rows
}

/// The listing for a person: one heading per group, one line per component.
fn render(
    states: &[ComponentState],
    unknown: &[UnknownName],
    plugins: &[Plugin],
    config_file: Option<&str>,
) -> String {
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
    out.push_str("plugin commands\n");
    if plugins.is_empty() {
        out.push_str("  (none on PATH)\n");
    }
    for plugin in plugins {
        let command = format!("tau {}", plugin.name);
        let _ = writeln!(out, "  {command:<8}  {}", plugin.path.display());
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

#[cfg(test)]
mod mcp_tests {
    use super::*;

    #[test]
    fn mcp_tools_are_listed_with_server_tier_and_state() {
        let config = tau_api::config::Config::from_toml_str(
            "[mcp.servers.home]\ncommand = \"home-mcp\"\n[mcp.servers.home.tools.lamp]\ntier = 2\neffect = \"e\"\n[mcp.servers.home.tools.state]\ntier = 0\n[components.tools]\ndisabled = [\"mcp__home__state\"]\n",
            Path::new("/t/tau.toml"),
            &tau_api::env::Env::new(),
            &KnownNames::builtin(),
        )
        .unwrap();
        let rows = mcp_rows(&config, None);
        let got: Vec<(&str, Option<u8>, bool)> = rows
            .iter()
            .map(|r| (r.name.as_str(), r.tier, r.enabled))
            .collect();
        assert_eq!(
            got,
            vec![
                ("mcp__home__lamp", Some(2), true),
                ("mcp__home__state", Some(0), false)
            ]
        );
        let status = serde_json::json!({"mcp": {"servers": [{"name": "home", "state": "ready", "error": null, "tools": [
            {"tool": "lamp", "name": "mcp__home__lamp", "tier": 2, "state": "offered"},
            {"tool": "other", "name": "mcp__home__other", "tier": null, "state": "untiered"},
        ]}]}});
        let rows = mcp_rows(&config, Some(&status));
        assert_eq!(rows[0].note.as_deref(), Some("MCP server home (ready)"));
        assert!(rows[0].enabled);
        assert_eq!(
            (rows[1].name.as_str(), rows[1].tier, rows[1].enabled),
            ("mcp__home__other", None, false)
        );
        assert!(rows[1].note.as_deref().unwrap().contains("no tier"));
        assert_eq!(rows[0].distribution, "mcp:home");
    }
}
