//! The checks of `tau doctor` that look at files: the session store's directory (the sqlite
//! database is checked in `store`), the persona files,
//! the names in `.env` against `.env.example`, and who may read the private files.
//!
//! Invariants: nothing here writes, creates or changes a file; `.env` values are never read into a
//! message (only names); a path that does not exist yet is not a failure unless tau needs it.

use std::fs::Metadata;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use tau_api::config::Config;
use tau_api::dotenv::{Dotenv, DotenvProblem};
use tau_api::paths::Paths;

use super::report::{Check, shell_quote};
use crate::ops::shipped_files;

/// The session store: its backend and the directory it lives in (for sqlite, its database file).
pub fn sessions(config: &Config, paths: &Paths) -> Check {
    let backend = &config.sessions.backend;
    if backend == "sqlite" {
        return super::store::sqlite(paths);
    }
    let dir = &paths.sessions_dir;
    let metadata = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Check::ok(
                "sessions",
                format!(
                    "{backend} store under {} (created on first use)",
                    dir.display()
                ),
            );
        }
        Err(e) => {
            return Check::fail("sessions", format!("cannot inspect {}: {e}", dir.display()))
                .fix(format!("make {} a directory you own", dir.display()));
        }
    };
    if !metadata.is_dir() {
        return Check::fail("sessions", format!("{} is not a directory", dir.display())).fix(
            format!(
                "move {} away; the store creates the directory",
                dir.display()
            ),
        );
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            return Check::fail("sessions", format!("cannot read {}: {e}", dir.display()))
                .fix(format!("chmod 700 {}", shell_quote(dir)));
        }
    };
    let count = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .count();
    let what = if backend == "file" {
        format!(" ({count} sessions)")
    } else {
        String::new()
    };
    Check::ok(
        "sessions",
        format!("{backend} store under {}{what}", dir.display()),
    )
}

/// persona.md and user.md.
pub fn persona(paths: &Paths) -> Vec<Check> {
    let dir = &paths.persona_dir;
    if !dir.is_dir() && paths.config_file.is_file() {
        // An installation with a tau.toml must have its own persona: taud refuses to start.
        return vec![
            Check::fail(
                "persona",
                format!(
                    "no persona directory at {}: taud refuses to start an installation with a tau.toml but no persona.md",
                    dir.display()
                ),
            )
            .fix("run `tau init` to write the persona files (it keeps your tau.toml)"),
        ];
    }
    if !dir.is_dir() {
        return vec![
            Check::warn(
                "persona",
                format!(
                    "no persona directory at {}: the hub uses the shipped persona and knows nothing about you",
                    dir.display()
                ),
            )
            .fix("run `tau init` to write the persona files"),
        ];
    }
    vec![persona_file(&dir.join("persona.md")), user_file(dir)]
}

fn persona_file(path: &Path) -> Check {
    let restore = format!(
        "write tau's persona in {}, or run `tau init --force` to restore the shipped one",
        path.display()
    );
    match read_text(path) {
        Err(Unreadable::Missing) => {
            Check::fail("persona", format!("{} is missing", path.display())).fix(restore)
        }
        Err(Unreadable::Other(why)) => {
            Check::fail("persona", format!("{}: {why}", path.display())).fix(restore)
        }
        Ok(text) if visible(&text).is_empty() => Check::fail(
            "persona",
            format!("{} is empty (or holds only HTML comments)", path.display()),
        )
        .fix(restore),
        Ok(text) if text == shipped_files::PERSONA => Check::ok(
            "persona",
            format!("{} (the shipped persona)", path.display()),
        ),
        Ok(_) => Check::ok("persona", format!("{} (your own)", path.display())),
    }
}

fn user_file(dir: &Path) -> Check {
    let path = dir.join("user.md");
    let example = dir.join("user.example.md");
    let write_it = if example.is_file() {
        format!(
            "cp {} {} and edit it",
            shell_quote(&example),
            shell_quote(&path)
        )
    } else {
        "run `tau init` to write persona/user.md, then edit it".to_string()
    };
    let formal = "tau addresses you formally and knows nothing about you";
    match read_text(&path) {
        Err(Unreadable::Missing) => {
            Check::warn("user", format!("no {}: {formal}", path.display())).fix(write_it)
        }
        Err(Unreadable::Other(why)) => {
            Check::warn("user", format!("{}: {why}: {formal}", path.display())).fix(write_it)
        }
        Ok(text) if visible(&text).is_empty() => {
            Check::warn("user", format!("{} is empty: {formal}", path.display())).fix(write_it)
        }
        Ok(text) if text == shipped_files::USER_EXAMPLE => Check::warn(
            "user",
            format!(
                "{} is still the made-up example: tau believes you are someone else",
                path.display()
            ),
        )
        .fix(format!("edit {} to describe yourself", path.display())),
        Ok(_) => Check::ok("user", path.display().to_string()),
    }
}

enum Unreadable {
    Missing,
    Other(String),
}

fn read_text(path: &Path) -> Result<String, Unreadable> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| Unreadable::Other("not UTF-8".into())),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(Unreadable::Missing),
        Err(e) => Err(Unreadable::Other(format!("cannot read: {e}"))),
    }
}

/// The text a model would see: HTML comments removed (an unclosed one runs to the end), trimmed.
fn visible(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        match rest[start + 4..].find("-->") {
            Some(end) => rest = &rest[start + 4 + end + 3..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

/// The lines of `.env` that were skipped, and the names `.env` sets against `.env.example`.
pub fn env_names(paths: &Paths, dotenv: Option<&Dotenv>, problems: &[DotenvProblem]) -> Vec<Check> {
    let mut checks: Vec<Check> = problems
        .iter()
        .map(|p| {
            Check::warn(".env", format!("{p} (line skipped)")).fix(format!(
                "fix line {} of {}",
                p.line,
                p.path.display()
            ))
        })
        .collect();
    let Some(dotenv) = dotenv else {
        checks.push(Check::ok(
            ".env",
            format!(
                "no {} (variables come from the environment)",
                paths.env_file.display()
            ),
        ));
        return checks;
    };
    let example_path = paths.home.join(".env.example");
    let listed = match std::fs::read_to_string(&example_path) {
        Ok(text) => shipped_files::listed_names(&text),
        Err(_) => {
            checks.push(
                Check::warn(
                    ".env",
                    format!(
                        "no readable {}: the names in .env cannot be checked",
                        example_path.display()
                    ),
                )
                .fix("run `tau init` to write .env.example"),
            );
            return checks;
        }
    };
    let unknown: Vec<&str> = dotenv
        .vars
        .iter()
        .map(|(name, _)| name.as_str())
        .filter(|name| !listed.iter().any(|l| l == name))
        .collect();
    if unknown.is_empty() {
        checks.push(Check::ok(
            ".env",
            format!(
                "{}: {} names, all listed in .env.example",
                paths.env_file.display(),
                dotenv.vars.len()
            ),
        ));
    } else {
        checks.push(
            Check::warn(
                ".env",
                format!(
                    "{} sets names that .env.example does not list: {}",
                    paths.env_file.display(),
                    unknown.join(", ")
                ),
            )
            .fix(format!(
                "check their spelling, or add them to {}",
                example_path.display()
            )),
        );
    }
    checks
}

/// Who may read the data directory, `hub/`, the hub token and `.env`: only the owner.
pub fn permissions(paths: &Paths) -> Vec<Check> {
    let targets: [(&Path, bool); 4] = [
        (&paths.data_dir, true),
        (&paths.hub.dir, true),
        (&paths.hub.token_file, false),
        (&paths.env_file, false),
    ];
    let mut checks = Vec::new();
    let mut present = 0;
    for (path, is_dir) in targets {
        let metadata: Metadata = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => {
                checks.push(
                    Check::warn(
                        "permissions",
                        format!("cannot inspect {}: {e}", path.display()),
                    )
                    .fix(format!("check the ownership of {}", path.display())),
                );
                continue;
            }
        };
        present += 1;
        let mode = metadata.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            let want = if is_dir { "700" } else { "600" };
            checks.push(
                Check::fail(
                    "permissions",
                    format!(
                        "{} is open to group or others (mode {:04o})",
                        path.display(),
                        mode
                    ),
                )
                .fix(format!("chmod {want} {}", shell_quote(path))),
            );
        }
    }
    if checks.is_empty() {
        checks.push(Check::ok(
            "permissions",
            format!(
                "the data directory, hub/, hub/token and .env are private ({present} of 4 exist)"
            ),
        ));
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_text_drops_html_comments() {
        assert_eq!(visible("<!-- only -->\n \n"), "");
        assert_eq!(visible("a <!-- x --> b"), "a  b");
        assert_eq!(visible("keep <!-- never closed\nsecret"), "keep");
        assert!(!visible(shipped_files::USER_EXAMPLE).is_empty());
    }
}
