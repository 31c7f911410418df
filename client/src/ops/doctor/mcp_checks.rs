//! `tau doctor`'s MCP checks: each server's command can be found, every tool a running hub saw
//! the server offer has a tier in tau.toml, a tier that looks too low for a tool the server
//! marks destructive is flagged, and so is a tool the hub refused (a name another owns).
//!
//! Invariants: nothing is started here (the command is only looked up); the hub is asked only on
//! 127.0.0.1; a server's hints never change a tier, they only produce warnings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tau_api::config::Config;
use tau_api::env::Env;

use super::report::Check;
use crate::hub_link::control_http as hub;

/// The MCP checks of `config` (none when it has no `[mcp.servers.*]`).
pub fn checks(config: &Config, env: &Env, token_file: &Path) -> Vec<Check> {
    if config.mcp.servers.is_empty() {
        return Vec::new();
    }
    let status = hub::status_json(config.hub.control_port, token_file, Duration::from_secs(1)).ok();
    let mut out = Vec::new();
    for (name, server) in &config.mcp.servers {
        let check = format!("mcp {name}");
        match resolve(&server.command, env.get("PATH"), server.cwd.as_deref()) {
            Some(path) => out.push(Check::ok(
                &check,
                format!("command {} found ({})", server.command, path.display()),
            )),
            None => out.push(
                Check::fail(&check, format!("command {:?} not found", server.command)).fix(
                    format!("install it, or set mcp.servers.{name}.command to its full path"),
                ),
            ),
        }
        let report = status
            .as_ref()
            .and_then(|s| s["mcp"]["servers"].as_array())
            .and_then(|servers| servers.iter().find(|s| s["name"] == name.as_str()));
        let Some(report) = report else {
            continue;
        };
        if let Some(error) = report["error"].as_str() {
            out.push(
                Check::warn(&check, format!("the hub reports: {error}")).fix(format!(
                    "see `tau mcp list`; the server's stderr is in the hub log (server={name})"
                )),
            );
        }
        for tool in report["tools"].as_array().into_iter().flatten() {
            let raw = tool["tool"].as_str().unwrap_or_default();
            match tool["state"].as_str() {
                Some("untiered") => out.push(
                    Check::warn(
                        &check,
                        format!("tool {raw:?} has no tier in tau.toml: it is never offered"),
                    )
                    .fix(format!(
                        "add [mcp.servers.{name}.tools.{raw}] with a tier (`tau mcp tiers {name}` suggests one)"
                    )),
                ),
                Some("missing") => out.push(Check::warn(
                    &check,
                    format!("tool {raw:?} is tiered in tau.toml but the server does not offer it"),
                )),
                Some("refused") => {
                    let why = tool["warning"].as_str().unwrap_or("its name is taken");
                    out.push(
                        Check::warn(&check, format!("tool {raw:?} is refused: {why}")).fix(
                            "a tool the server lists twice is offered once; tools that would share a name need a server renamed or one of them untiered",
                        ),
                    );
                    continue;
                }
                _ => {}
            }
            if let Some(warning) = tool["warning"].as_str() {
                out.push(
                    Check::warn(&check, format!("tool {raw:?}: {warning}")).fix(format!(
                        "check mcp.servers.{name}.tools.{raw}.tier: 1 for digital changes, 2 for the physical world"
                    )),
                );
            }
        }
    }
    out
}

/// Where `command` runs from: a path with a `/` as it is (relative to `cwd`), else the first
/// executable file of that name in `path`.
pub fn resolve(command: &str, path: Option<&str>, cwd: Option<&Path>) -> Option<PathBuf> {
    if command.contains('/') {
        let candidate = match cwd {
            Some(cwd) if !Path::new(command).is_absolute() => cwd.join(command),
            _ => PathBuf::from(command),
        };
        return is_executable(&candidate).then_some(candidate);
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(command))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::doctor::report::Status;

    #[test]
    fn commands_are_looked_up_in_path() {
        assert!(resolve("sh", Some("/nonexistent:/bin:/usr/bin"), None).is_some());
        assert_eq!(
            resolve("no-such-mcp-server", Some("/bin:/usr/bin"), None),
            None
        );
        assert_eq!(
            resolve("/bin/sh", None, None),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(resolve("./nope", None, Some(Path::new("/"))), None);
    }

    #[test]
    fn a_missing_command_fails() {
        let config = Config::from_toml_str(
            "[hub]\ncontrol_port = 0\n[mcp.servers.home]\ncommand = \"no-such-mcp-server\"\n[mcp.servers.sh]\ncommand = \"sh\"\n",
            Path::new("/t/tau.toml"),
            &Env::new(),
            &tau_api::config::KnownNames::builtin(),
        )
        .unwrap();
        let env: Env = [("PATH", "/bin:/usr/bin")].into_iter().collect();
        let checks = checks(&config, &env, Path::new("/nonexistent/token"));
        let got: Vec<(&str, Status)> = checks
            .iter()
            .map(|c| (c.check.as_str(), c.status))
            .collect();
        assert_eq!(
            got,
            vec![("mcp home", Status::Fail), ("mcp sh", Status::Ok)]
        );
        assert!(
            checks[0]
                .fix
                .as_deref()
                .unwrap()
                .contains("mcp.servers.home.command")
        );
    }
}
