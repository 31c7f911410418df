//! `tau mcp list [--json]` and `tau mcp tiers SERVER`: the MCP servers of tau.toml with what the
//! running hub says about them (state, restarts, error, each tool with its tier, state and the name
//! the model sees it under, `tau_api::mcp_names`, also with no hub running), and a ready-to-edit
//! TOML block of one server's tools with suggested tiers.
//!
//! Invariants: nothing here writes tau.toml (the owner reviews and pastes); a suggested tier comes
//! from the server's own hints and is never above 1 (only the owner knows what acts on the physical
//! world), and a tier the owner already wrote is kept; the hub is asked only on 127.0.0.1.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::{Value, json};
use tau_api::config::McpConfig;
use tau_api::installation::Installation;

use crate::cli::McpCommand;
use crate::context::Context;
use crate::environment;
use crate::hub_link::control_http as hub;

const HUB_DEADLINE: Duration = Duration::from_secs(2);

/// Runs `tau mcp …`.
pub fn run(command: &McpCommand, ctx: &Context) -> anyhow::Result<ExitCode> {
    let env = environment::snapshot(ctx);
    let cwd = environment::current_dir()?;
    let installation = Installation::discover(env, &cwd)?;
    let hub = hub::status_json(
        installation.settings.hub_port,
        &installation.paths.hub.token_file,
        HUB_DEADLINE,
    );
    let servers = match &hub {
        Ok(status) => status["mcp"]["servers"].as_array().cloned(),
        Err(_) => None,
    };
    let hub_line = match &hub {
        Ok(_) => "as the running hub reports them".to_owned(),
        Err(None) => "hub not running: tau.toml only".to_owned(),
        Err(Some(why)) => format!("no answer from the hub ({why}): tau.toml only"),
    };
    match command {
        McpCommand::List(args) => {
            let listing = listing(&installation.config.mcp, servers.as_deref());
            if args.json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"hub": hub_line, "servers": listing}))?
                );
            } else {
                outln!("{hub_line}");
                out!("{}", render_list(&listing));
            }
            Ok(ExitCode::SUCCESS)
        }
        McpCommand::Tiers(args) => {
            let Some(config) = installation.config.mcp.servers.get(&args.server) else {
                eprintln!(
                    "tau mcp tiers: no [mcp.servers.{}] in tau.toml",
                    args.server
                );
                return Ok(ExitCode::FAILURE);
            };
            let reported = servers
                .iter()
                .flatten()
                .find(|s| s["name"] == args.server.as_str());
            let Some(reported) = reported.filter(|s| s["generation"].as_u64() > Some(0)) else {
                eprintln!(
                    "tau mcp tiers: the hub has not listed the tools of '{}' ({hub_line}); start the hub and check `tau mcp list`",
                    args.server
                );
                return Ok(ExitCode::FAILURE);
            };
            out!("{}", tiers_block(&args.server, config, reported));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Every configured server, merged with the hub's report of it when there is one.
fn listing(config: &McpConfig, reported: Option<&[Value]>) -> Vec<Value> {
    config
        .servers
        .iter()
        .map(|(name, server)| {
            let report = reported
                .into_iter()
                .flatten()
                .find(|s| s["name"] == name.as_str());
            let tools: Vec<Value> = match report {
                Some(report) => report["tools"].as_array().cloned().unwrap_or_default(),
                None => server
                    .tools
                    .iter()
                    .map(|(tool, t)| {
                        json!({
                            "tool": tool,
                            "name": tau_api::mcp_names::model_name(name, tool),
                            "tier": t.tier,
                            "effect": t.effect,
                            "state": "configured",
                        })
                    })
                    .collect(),
            };
            json!({
                "name": name,
                "command": server.command,
                "state": report.map_or(Value::Null, |r| r["state"].clone()),
                "restarts": report.map_or(Value::Null, |r| r["restarts"].clone()),
                "pid": report.map_or(Value::Null, |r| r["pid"].clone()),
                "error": report.map_or(Value::Null, |r| r["error"].clone()),
                "tools": tools,
            })
        })
        .collect()
}

fn render_list(listing: &[Value]) -> String {
    let mut out = String::new();
    if listing.is_empty() {
        out.push_str("no [mcp.servers.*] in tau.toml\n");
    }
    for server in listing {
        let state = server["state"].as_str().unwrap_or("unknown");
        let _ = write!(
            out,
            "{}  {}  {state}",
            server["name"].as_str().unwrap_or_default(),
            server["command"].as_str().unwrap_or_default()
        );
        if let Some(n) = server["restarts"].as_u64().filter(|n| *n > 0) {
            let _ = write!(out, "  restarts {n}");
        }
        if let Some(error) = server["error"].as_str() {
            let _ = write!(out, "  error: {error}");
        }
        out.push('\n');
        for tool in server["tools"].as_array().into_iter().flatten() {
            let tier = tool["tier"]
                .as_u64()
                .map_or_else(|| "no tier".to_owned(), |t| format!("tier {t}"));
            let name = tool["name"].as_str().filter(|n| !n.is_empty());
            let _ = write!(
                out,
                "  {:<28} {:<8} {}",
                tool["tool"].as_str().unwrap_or_default(),
                tier,
                tool["state"].as_str().unwrap_or_default()
            );
            if let Some(name) = name {
                let _ = write!(out, "  as {name}");
            }
            if let Some(warning) = tool["warning"].as_str() {
                let _ = write!(out, "  warning: {warning}");
            }
            out.push('\n');
        }
    }
    out
}

/// The TOML block of `reported`'s tools: the owner's tier where tau.toml has one, else a
/// suggestion from the server's hints (0 for read-only, else 1), with the hints as comments.
fn tiers_block(
    server: &str,
    config: &tau_api::config::McpServerConfig,
    reported: &Value,
) -> String {
    let mut out = format!(
        "# Tools of MCP server '{server}'. Review every tier, then paste into tau.toml (nothing was written).\n\
         # Suggestions come from the server's own hints and are never 2: only you know whether a tool\n\
         # acts on the physical world; give such a tool tier 2 and an effect sentence.\n"
    );
    for tool in reported["tools"].as_array().into_iter().flatten() {
        let name = tool["tool"].as_str().unwrap_or_default();
        if tool["state"] == "missing" {
            continue;
        }
        let read_only = tool["read_only_hint"] == true;
        let destructive = tool["destructive_hint"] == true;
        let _ = writeln!(out, "\n[mcp.servers.{server}.tools.{}]", toml_key(name));
        if let Some(description) = tool["description"].as_str().filter(|d| !d.is_empty()) {
            let line: String = description
                .replace(['\n', '\r'], " ")
                .chars()
                .take(100)
                .collect();
            let _ = writeln!(out, "# server says: {line}");
        }
        let hints = match (read_only, destructive) {
            (true, _) => "read-only",
            (false, true) => "changes things, destructive",
            (false, false) => "changes things, not destructive",
        };
        match config.tools.get(name) {
            Some(configured) => {
                let _ = writeln!(
                    out,
                    "tier = {}   # yours (server hints: {hints})",
                    configured.tier
                );
                if let Some(effect) = &configured.effect {
                    let _ = writeln!(out, "effect = {}", toml::Value::String(effect.clone()));
                }
            }
            None => {
                let suggested = u8::from(!read_only);
                let _ = writeln!(
                    out,
                    "tier = {suggested}   # suggested from server hints: {hints}"
                );
                let _ = writeln!(
                    out,
                    "# effect = \"One sentence saying what it does (required for tier 2).\""
                );
            }
        }
    }
    out
}

fn toml_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        name.to_owned()
    } else {
        toml::Value::String(name.to_owned()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_config(toml_text: &str) -> tau_api::config::McpServerConfig {
        let config = tau_api::config::Config::from_toml_str(
            toml_text,
            std::path::Path::new("/t/tau.toml"),
            &tau_api::env::Env::new(),
            &tau_api::config::KnownNames::builtin(),
        )
        .unwrap();
        config.mcp.servers["home"].clone()
    }

    #[test]
    fn tiers_keep_the_owners_and_never_suggest_2() {
        let config = server_config(
            "[mcp.servers.home]\ncommand = \"x\"\n[mcp.servers.home.tools.lamp]\ntier = 2\neffect = \"Switches the lamp.\"\n",
        );
        let reported = json!({"tools": [
            {"tool": "lamp", "state": "offered", "read_only_hint": false, "destructive_hint": true, "description": "Lamp."},
            {"tool": "read.state", "state": "untiered", "read_only_hint": true, "destructive_hint": false, "description": ""},
            {"tool": "wipe", "state": "untiered", "read_only_hint": false, "destructive_hint": true, "description": "Wipes\nall."},
            {"tool": "ghost", "state": "missing"},
        ]});
        let block = tiers_block("home", &config, &reported);
        assert!(block.contains("[mcp.servers.home.tools.lamp]\n# server says: Lamp.\ntier = 2   # yours (server hints: changes things, destructive)\neffect = \"Switches the lamp.\"\n"), "{block}");
        assert!(block.contains("[mcp.servers.home.tools.\"read.state\"]\ntier = 0   # suggested from server hints: read-only\n"), "{block}");
        assert!(
            block.contains(
                "[mcp.servers.home.tools.wipe]\n# server says: Wipes all.\ntier = 1   # suggested"
            ),
            "{block}"
        );
        assert!(!block.contains("ghost"));
        assert!(!block.contains("tier = 2   # suggested"));
        // The block is valid TOML once pasted.
        let pasted: toml::Table = block.parse().unwrap();
        assert_eq!(
            pasted["mcp"]["servers"]["home"]["tools"]["wipe"]["tier"].as_integer(),
            Some(1)
        );
    }

    #[test]
    fn every_reported_tool_shows_the_name_the_model_sees() {
        let listing = vec![json!({
            "name": "a", "command": "a-mcp", "state": "ready", "restarts": 0, "pid": 7, "error": null,
            "tools": [
                {"tool": "__b", "name": "mcp__a____b", "tier": 2, "state": "offered"},
                {"tool": "a.b", "name": "mcp__a__a_b_1b0ae59f", "tier": 0, "state": "offered"},
                {"tool": "ghost", "name": "mcp__a__ghost", "tier": 0, "state": "missing"},
                {"tool": "x", "name": "mcp__a__x", "tier": 1, "state": "refused",
                 "warning": "its name mcp__a__x belongs to MCP server 'b' tool 'y'"},
            ],
        })];
        let text = render_list(&listing);
        for name in [
            "mcp__a____b",
            "mcp__a__a_b_1b0ae59f",
            "mcp__a__ghost",
            "mcp__a__x",
        ] {
            assert!(text.contains(&format!("  as {name}")), "{name}: {text}");
        }
        assert!(
            text.contains("refused  as mcp__a__x  warning: its name mcp__a__x belongs to"),
            "{text}"
        );
    }

    #[test]
    fn the_list_falls_back_to_tau_toml() {
        let config = tau_api::config::Config::from_toml_str(
            "[mcp.servers.home]\ncommand = \"home-mcp\"\n[mcp.servers.home.tools.lamp]\ntier = 2\neffect = \"e\"\n[mcp.servers.home.tools.\"read.state\"]\ntier = 0\n",
            std::path::Path::new("/t/tau.toml"),
            &tau_api::env::Env::new(),
            &tau_api::config::KnownNames::builtin(),
        )
        .unwrap();
        let listing = listing(&config.mcp, None);
        let text = render_list(&listing);
        assert!(text.starts_with("home  home-mcp  unknown\n"), "{text}");
        assert!(text.contains("lamp"), "{text}");
        assert!(
            text.contains("tier 2   configured  as mcp__home__lamp\n"),
            "{text}"
        );
        assert!(
            text.contains("tier 0   configured  as mcp__home__read_state_0d336513\n"),
            "{text}"
        );
        assert_eq!(
            listing[0]["tools"][1]["name"],
            "mcp__home__read_state_0d336513"
        );
    }
}
