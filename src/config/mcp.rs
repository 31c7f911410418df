//! `[mcp.servers.<key>]`: the MCP tool servers tau starts, and the tier the owner wrote for each of
//! their tools (`[mcp.servers.<key>.tools.<tool>]`).
//!
//! Invariants: a server key is 1 to 24 of `[a-z0-9_-]`, starting and ending with a letter or digit,
//! never two of `-` and `_` in a row, and no two keys differ only in `-` versus `_` (the key is part
//! of the model-visible `mcp__<server>__<tool>` names, and this makes the `<server>` part end at the
//! first `__`, so two servers never share a tool name: see [`crate::mcp_names`]); every tool entry
//! has a tier of 0, 1 or 2, and a tier-2 entry has an effect sentence; timeouts are at least one
//! second (`call_timeout_seconds` is a call's idle timeout, `call_max_seconds` its hard cap).
//! A tool the server offers without an entry here is never offered to the model (the daemon lists
//! it as untiered). Nothing here is started: this is configuration only.

use std::collections::BTreeMap;
use std::path::PathBuf;

use toml::Value;

use super::error::{ConfigError, key_segment, render_value};
use super::reader::Section;

/// `startup_timeout_seconds` default: spawn, handshake and the first `tools/list`.
pub const DEFAULT_MCP_STARTUP_TIMEOUT_SECONDS: u32 = 30;
/// `call_timeout_seconds` default: how long one `tools/call` may go without an answer or a
/// progress notification from the server.
pub const DEFAULT_MCP_CALL_TIMEOUT_SECONDS: u32 = 60;
/// `call_max_seconds` default: the hard cap of one `tools/call`, progress or not.
pub const DEFAULT_MCP_CALL_MAX_SECONDS: u32 = 600;

const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "startup_timeout_seconds",
    "call_timeout_seconds",
    "call_max_seconds",
    "tools",
];
const TOOL_KEYS: &[&str] = &["tier", "effect"];

/// `[mcp]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpConfig {
    /// `[mcp.servers.<key>]`, by server key.
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// `[mcp.servers.<key>]`: one stdio MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The program (a name looked up in PATH, or a path); no shell.
    pub command: String,
    pub args: Vec<String>,
    /// Names of variables passed through from tau's environment (nothing else is).
    pub env: Vec<String>,
    /// Working directory; `None`: tau's.
    pub cwd: Option<PathBuf>,
    pub startup_timeout_seconds: u32,
    /// A call's idle timeout: a progress notification from the server starts it over.
    pub call_timeout_seconds: u32,
    /// A call's hard cap, however much progress the server reports.
    pub call_max_seconds: u32,
    /// `[mcp.servers.<key>.tools.<tool>]`, keyed by the server's own tool name.
    pub tools: BTreeMap<String, McpToolConfig>,
}

/// `[mcp.servers.<key>.tools.<tool>]`: the owner's tier for one tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpToolConfig {
    /// 0 read, 1 digital write, 2 physical (asked every time).
    pub tier: u8,
    /// The sentence an approval prompt shows; required for tier 2.
    pub effect: Option<String>,
}

/// What a server key may be, as error messages say it.
pub const SERVER_KEY_RULE: &str = "1 to 24 lowercase letters, digits, '-' or '_', starting and ending with a letter or digit, without two of '-' and '_' in a row";

/// Whether `key` can name a server: 1 to 24 of `[a-z0-9_-]`, starting and ending with a letter or
/// digit, never two separators (`-`, `_`) in a row. Then `mcp__<key>__` ends the key at the first
/// `__`, even when `-` is read as `_`.
pub fn is_valid_server_key(key: &str) -> bool {
    let word = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    key.len() <= 24
        && key.starts_with(word)
        && key.ends_with(word)
        && key.chars().all(|c| word(c) || c == '_' || c == '-')
        && !["__", "_-", "-_", "--"]
            .iter()
            .any(|pair| key.contains(pair))
}

/// `key` with `-` read as `_`: two server keys that fold alike would give tool names that differ
/// only in `-` versus `_`, which tau counts as one name.
pub fn fold_server_key(key: &str) -> String {
    key.replace('-', "_")
}

/// Reads `[mcp]` from the document root.
pub(crate) fn mcp(doc: &Section<'_>) -> Result<McpConfig, ConfigError> {
    let mut out = McpConfig::default();
    let Some(mcp) = doc.table("mcp", &["servers"])? else {
        return Ok(out);
    };
    let Some(servers) = mcp.raw_table("servers", "tables of servers, e.g. [mcp.servers.home]")?
    else {
        return Ok(out);
    };
    for (key, value) in servers {
        if !is_valid_server_key(key) {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key: "mcp.servers".to_string(),
                value: format!("[mcp.servers.{}]", key_segment(key)),
                expected: format!("server keys of {SERVER_KEY_RULE}"),
            });
        }
        if let Some(other) = out
            .servers
            .keys()
            .find(|other| fold_server_key(other) == fold_server_key(key))
        {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key: "mcp.servers".to_string(),
                value: format!("[mcp.servers.{}]", key_segment(key)),
                expected: format!(
                    "a key that differs from [mcp.servers.{other}] in more than '-' versus '_' (their tools' names would clash)"
                ),
            });
        }
        let Value::Table(table) = value else {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key: format!("mcp.servers.{}", key_segment(key)),
                value: render_value(value),
                expected: "a table with command and tools".to_string(),
            });
        };
        let server = mcp.child(&["servers", key], table, SERVER_KEYS)?;
        out.servers.insert(key.clone(), server_config(&server)?);
    }
    Ok(out)
}

fn server_config(server: &Section<'_>) -> Result<McpServerConfig, ConfigError> {
    let expected = "the server's program, a name in PATH or a path (no shell)";
    let command = server.string("command", expected)?;
    let command = server.require("command", command, expected)?.to_string();
    let args = server
        .string_list("args", "a list of strings, e.g. [\"--stdio\"]")?
        .unwrap_or_default();
    let env = server
        .string_list(
            "env",
            "a list of environment variable names passed through, e.g. [\"HOME_TOKEN\"]",
        )?
        .unwrap_or_default();
    if let Some(bad) = env.iter().find(|name| !is_env_name(name)) {
        let value = Value::String(bad.clone());
        return Err(server.invalid(
            "env",
            &value,
            "environment variable names (letters, digits and '_', not starting with a digit)",
        ));
    }
    let cwd = server.string("cwd", "a directory path")?.map(PathBuf::from);
    let seconds = "a whole number of seconds from 1 to 86400";
    let startup = server.int("startup_timeout_seconds", 1, 86_400, seconds)?;
    let call = server.int("call_timeout_seconds", 1, 86_400, seconds)?;
    let call_max = server.int("call_max_seconds", 1, 86_400, seconds)?;
    let mut tools = BTreeMap::new();
    if let Some(table) = server.raw_table(
        "tools",
        "tables of tool tiers, e.g. [mcp.servers.home.tools.lamp]",
    )? {
        for (name, value) in table {
            let Value::Table(t) = value else {
                return Err(ConfigError::Invalid {
                    file: server.file().to_path_buf(),
                    key: server.key(&format!("tools.{}", key_segment(name))),
                    value: render_value(value),
                    expected: "a table with tier (0, 1 or 2) and effect".to_string(),
                });
            };
            let tool = server.child(&["tools", name], t, TOOL_KEYS)?;
            tools.insert(name.clone(), tool_config(&tool)?);
        }
    }
    Ok(McpServerConfig {
        command,
        args,
        env,
        cwd,
        startup_timeout_seconds: startup
            .and_then(|s| u32::try_from(s).ok())
            .unwrap_or(DEFAULT_MCP_STARTUP_TIMEOUT_SECONDS),
        call_timeout_seconds: call
            .and_then(|s| u32::try_from(s).ok())
            .unwrap_or(DEFAULT_MCP_CALL_TIMEOUT_SECONDS),
        call_max_seconds: call_max
            .and_then(|s| u32::try_from(s).ok())
            .unwrap_or(DEFAULT_MCP_CALL_MAX_SECONDS),
        tools,
    })
}

pub(crate) fn tool_config(tool: &Section<'_>) -> Result<McpToolConfig, ConfigError> {
    let expected = "0 (read), 1 (digital write) or 2 (physical, asked every time)";
    let tier = tool.int("tier", 0, 2, expected)?;
    let tier = tool.require("tier", tier, expected)?;
    let effect = tool
        .string("effect", "one sentence saying what the tool does")?
        .map(str::to_string);
    if tier == 2 && effect.is_none() {
        return Err(ConfigError::Missing {
            file: tool.file().to_path_buf(),
            key: tool.key("effect"),
            expected: "the sentence a tier-2 approval prompt shows".to_string(),
        });
    }
    Ok(McpToolConfig {
        tier: u8::try_from(tier).unwrap_or(2),
        effect,
    })
}

fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError, KnownNames};
    use crate::env::Env;

    const FILE: &str = "/home/u/.tau/tau.toml";

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(text, Path::new(FILE), &Env::new(), &KnownNames::builtin())
    }

    fn err(text: &str) -> String {
        match load(text) {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn servers_and_tool_tiers_are_read() {
        let config = load(
            r#"
[mcp.servers.home]
command = "home-mcp"
args = ["--stdio"]
env = ["HOME_TOKEN"]
cwd = "/var/lib/home"
startup_timeout_seconds = 5
call_timeout_seconds = 7
call_max_seconds = 120

[mcp.servers.home.tools.lamp]
tier = 2
effect = "Switches the living-room lamp on or off."

[mcp.servers.home.tools."read.state"]
tier = 0

[mcp.servers.time]
command = "mcp-server-time"
"#,
        )
        .unwrap();
        let home = &config.mcp.servers["home"];
        assert_eq!(home.command, "home-mcp");
        assert_eq!(home.args, vec!["--stdio"]);
        assert_eq!(home.env, vec!["HOME_TOKEN"]);
        assert_eq!(home.cwd.as_deref(), Some(Path::new("/var/lib/home")));
        assert_eq!(
            (
                home.startup_timeout_seconds,
                home.call_timeout_seconds,
                home.call_max_seconds
            ),
            (5, 7, 120)
        );
        assert_eq!(home.tools["lamp"].tier, 2);
        assert_eq!(
            home.tools["lamp"].effect.as_deref(),
            Some("Switches the living-room lamp on or off.")
        );
        assert_eq!(home.tools["read.state"].tier, 0);
        let time = &config.mcp.servers["time"];
        assert_eq!(
            (
                time.startup_timeout_seconds,
                time.call_timeout_seconds,
                time.call_max_seconds
            ),
            (30, 60, 600)
        );
        assert!(time.tools.is_empty());
    }

    #[test]
    fn bad_entries_are_one_line_errors_naming_the_key() {
        let cases = [
            (
                "[mcp.servers.home]\nargs = []\n",
                "/home/u/.tau/tau.toml: mcp.servers.home.command is missing: expected the server's program, a name in PATH or a path (no shell)",
            ),
            (
                "[mcp.servers.home]\ncommand = \"x\"\n[mcp.servers.home.tools.lamp]\neffect = \"e\"\n",
                "/home/u/.tau/tau.toml: mcp.servers.home.tools.lamp.tier is missing: expected 0 (read), 1 (digital write) or 2 (physical, asked every time)",
            ),
            (
                "[mcp.servers.home]\ncommand = \"x\"\n[mcp.servers.home.tools.lamp]\ntier = 3\n",
                "/home/u/.tau/tau.toml: mcp.servers.home.tools.lamp.tier = 3: expected 0 (read), 1 (digital write) or 2 (physical, asked every time)",
            ),
            (
                "[mcp.servers.home]\ncommand = \"x\"\n[mcp.servers.home.tools.lamp]\ntier = 2\n",
                "/home/u/.tau/tau.toml: mcp.servers.home.tools.lamp.effect is missing: expected the sentence a tier-2 approval prompt shows",
            ),
            (
                "[mcp.servers.home]\ncommand = \"x\"\n[mcp.servers.home.tools.lamp]\ntier = 0\nreadOnly = true\n",
                "/home/u/.tau/tau.toml: mcp.servers.home.tools.lamp.readOnly = true: unknown key (expected tier or effect)",
            ),
            (
                "[mcp.servers.Home]\ncommand = \"x\"\n",
                "/home/u/.tau/tau.toml: mcp.servers = [mcp.servers.Home]: expected server keys of 1 to 24 lowercase letters, digits, '-' or '_', starting and ending with a letter or digit, without two of '-' and '_' in a row",
            ),
            (
                "[mcp.servers.a__b]\ncommand = \"x\"\n",
                "/home/u/.tau/tau.toml: mcp.servers = [mcp.servers.a__b]: expected server keys of 1 to 24 lowercase letters, digits, '-' or '_', starting and ending with a letter or digit, without two of '-' and '_' in a row",
            ),
            (
                // `a` with tool `__b` and `a_` with tool `_b` would both be `mcp__a____b`.
                "[mcp.servers.a]\ncommand = \"x\"\n[mcp.servers.a_]\ncommand = \"y\"\n",
                "/home/u/.tau/tau.toml: mcp.servers = [mcp.servers.a_]: expected server keys of 1 to 24 lowercase letters, digits, '-' or '_', starting and ending with a letter or digit, without two of '-' and '_' in a row",
            ),
            (
                "[mcp.servers.home-lab]\ncommand = \"x\"\n[mcp.servers.home_lab]\ncommand = \"y\"\n",
                "/home/u/.tau/tau.toml: mcp.servers = [mcp.servers.home_lab]: expected a key that differs from [mcp.servers.home-lab] in more than '-' versus '_' (their tools' names would clash)",
            ),
            (
                "[mcp.servers.home]\ncommand = \"x\"\ncall_timeout_seconds = 0\n",
                "/home/u/.tau/tau.toml: mcp.servers.home.call_timeout_seconds = 0: expected a whole number of seconds from 1 to 86400",
            ),
            (
                "[mcp.servers.home]\ncommand = \"x\"\nenv = [\"A=B\"]\n",
                "/home/u/.tau/tau.toml: mcp.servers.home.env = \"A=B\": expected environment variable names (letters, digits and '_', not starting with a digit)",
            ),
        ];
        for (text, want) in cases {
            let got = err(text);
            assert_eq!(got, want);
            assert!(!got.contains('\n'));
        }
    }

    #[test]
    fn server_keys() {
        assert!(super::is_valid_server_key("home"));
        assert!(super::is_valid_server_key("a-b_9"));
        assert!(!super::is_valid_server_key(""));
        assert!(!super::is_valid_server_key("_x"));
        assert!(!super::is_valid_server_key("a__b"));
        assert!(!super::is_valid_server_key(&"a".repeat(25)));
        assert!(super::is_valid_server_key(&"a".repeat(24)));
        for bad in ["a_", "a-", "-a", "a-_b", "a_-b", "a--b", "é"] {
            assert!(!super::is_valid_server_key(bad), "{bad}");
        }
        assert_eq!(super::fold_server_key("home-lab"), "home_lab");
    }
}
