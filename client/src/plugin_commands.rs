//! Plugin commands: like git and cargo, an executable `tau-<name>` on PATH runs as
//! `tau <name> …`, with the remaining arguments passed through, stdin/stdout/stderr inherited and
//! its exit code passed back. `tau --help` and `tau components` list the ones found.
//!
//! Invariants: a built-in command always wins (clap only hands over names it does not know, and
//! listings leave out plugins a built-in shadows); a name that is not a plain word (letters,
//! digits, `-`, `_`, not starting with `-`) or holds a path separator is never looked up; PATH is
//! read from the environment snapshot (`crate::environment`), never from the process directly; the
//! first directory of PATH holding an executable `tau-<name>` wins, as a shell would pick it.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;
use tau_api::env::Env;

use crate::context::Context;
use crate::environment;

/// What every plugin executable's file name starts with.
const PREFIX: &str = "tau-";

/// The exit code for a name that is neither a command nor a plugin (clap's usage error code).
const EXIT_UNKNOWN: u8 = 2;

/// A plugin command found on PATH.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plugin {
    /// The command name: `hello` for `tau-hello`.
    pub name: String,
    /// The executable that runs it.
    pub path: PathBuf,
}

/// Whether `name` may name a plugin: a plain word, never a path or an option.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The directories of a PATH value, in order (empty entries skipped).
fn search_dirs(path_var: Option<&str>) -> Vec<PathBuf> {
    path_var
        .map(|value| {
            std::env::split_paths(value)
                .filter(|dir| !dir.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `path` is a file someone may execute (symlinks followed).
fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The executable that runs `tau <name>`: the first `tau-<name>` on PATH; `None` for a name
/// that is not a plain word.
pub fn find(name: &str, path_var: Option<&str>) -> Option<PathBuf> {
    if !is_plain_name(name) {
        return None;
    }
    search_dirs(path_var)
        .into_iter()
        .map(|dir| dir.join(format!("{PREFIX}{name}")))
        .find(|candidate| is_executable(candidate))
}

/// Every plugin on PATH by name (the first of a name wins), leaving out those a built-in command
/// in `builtins` shadows.
pub fn discover(path_var: Option<&str>, builtins: &[String]) -> Vec<Plugin> {
    let mut found: Vec<Plugin> = Vec::new();
    for dir in search_dirs(path_var) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let file = entry.file_name().into_string().ok()?;
                let name = file.strip_prefix(PREFIX)?.to_owned();
                Some((name, entry.path()))
            })
            .collect();
        names.sort();
        for (name, path) in names {
            let known = found.iter().any(|p| p.name == name) || builtins.contains(&name);
            if !known && is_plain_name(&name) && is_executable(&path) {
                found.push(Plugin { name, path });
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// The names of `tau`'s built-in commands, with their aliases and `help`.
pub fn builtin_names() -> Vec<String> {
    let command = <crate::cli::Cli as clap::CommandFactory>::command();
    let mut names: Vec<String> = command
        .get_subcommands()
        .flat_map(|sub| {
            std::iter::once(sub.get_name().to_owned())
                .chain(sub.get_all_aliases().map(str::to_owned))
        })
        .collect();
    names.push("help".to_owned());
    names
}

/// The plugins on the PATH of `env`.
pub fn on_path(env: &Env) -> Vec<Plugin> {
    discover(env.get("PATH"), &builtin_names())
}

/// The "Plugin commands" section of `tau --help`; `None` when there are none.
pub fn help_section(plugins: &[Plugin]) -> Option<String> {
    if plugins.is_empty() {
        return None;
    }
    let width = plugins.iter().map(|p| p.name.len()).max().unwrap_or(0);
    let mut text = String::from("Plugin commands:");
    for plugin in plugins {
        let path = plugin.path.display();
        text.push_str(&format!("\n  {:<width$}  {path}", plugin.name));
    }
    Some(text)
}

/// Runs `tau <name> ARGS…` as the plugin `tau-<name>`: `args` is the name and its arguments as
/// clap handed them over.
pub fn run(args: &[OsString], ctx: &Context) -> anyhow::Result<ExitCode> {
    let Some((name, rest)) = args.split_first() else {
        return Ok(ExitCode::from(EXIT_UNKNOWN));
    };
    let env = environment::snapshot(ctx);
    let name_text = name.to_string_lossy();
    let Some(path) = name.to_str().and_then(|n| find(n, env.get("PATH"))) else {
        eprintln!(
            "tau: '{name_text}' is not a tau command, and no plugin tau-{name_text} is on PATH; see `tau --help`"
        );
        return Ok(ExitCode::from(EXIT_UNKNOWN));
    };
    let mut command = std::process::Command::new(&path);
    command.args(rest);
    ctx.export_to(&mut command);
    let status = command
        .status()
        .map_err(|e| anyhow::anyhow!("running {}: {e}", path.display()))?;
    Ok(exit_code(status))
}

/// The plugin's exit code, or 128 + the signal that ended it, as a shell reports it.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    let code = status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

#[cfg(test)]
mod plugin_command_tests {
    use super::*;

    #[test]
    fn only_plain_words_are_plugin_names() {
        for name in ["hello", "my-tool", "x_2"] {
            assert!(is_plain_name(name), "{name}");
        }
        for name in ["", "-x", "../x", "a/b", "a b", "héllo", "a.b"] {
            assert!(!is_plain_name(name), "{name}");
        }
    }

    #[test]
    fn the_first_executable_on_path_wins_and_builtins_are_left_out() {
        let first = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let second = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let write = |dir: &Path, file: &str, mode: u32| {
            let path = dir.join(file);
            std::fs::write(&path, "#!/bin/sh\n").unwrap_or_else(|e| panic!("{e}"));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .unwrap_or_else(|e| panic!("{e}"));
        };
        write(first.path(), "tau-hello", 0o755);
        write(first.path(), "tau-chat", 0o755);
        write(first.path(), "tau-notexec", 0o644);
        write(second.path(), "tau-hello", 0o755);
        write(second.path(), "tau-zed", 0o755);
        let path_var =
            std::env::join_paths([first.path(), second.path()]).unwrap_or_else(|e| panic!("{e}"));
        let path_var = path_var.to_str();
        let found = discover(path_var, &builtin_names());
        let names: Vec<&str> = found.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["hello", "zed"]);
        assert_eq!(found[0].path, first.path().join("tau-hello"));
        assert_eq!(
            find("hello", path_var),
            Some(first.path().join("tau-hello"))
        );
        assert_eq!(find("notexec", path_var), None);
        assert_eq!(find("../tau-hello", path_var), None);
    }
}
