//! `tau version`: the versions of `tau` and of the `taud` binary it would start.
//!
//! taud's version is asked from the binary itself (`taud --version`), so a stale daemon binary next
//! to a new client shows up here instead of being assumed.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use serde::Serialize;

use crate::cli::VersionArgs;
use crate::context::Context;
use crate::environment;

#[derive(Debug, Serialize)]
struct Versions {
    tau: &'static str,
    /// None when no taud binary was found or it did not answer.
    taud: Option<String>,
    taud_path: Option<PathBuf>,
}

/// Prints the versions; exit 0 even when taud is missing (that is information, not an error).
pub fn run(args: &VersionArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let taud_path = find_taud(ctx);
    let taud = taud_path.as_ref().and_then(|path| taud_version(path, ctx));
    let versions = Versions {
        tau: tau_api::VERSION,
        taud,
        taud_path,
    };
    if args.json {
        println!("{}", serde_json::to_string(&versions)?);
    } else {
        println!("tau  {}", versions.tau);
        match (&versions.taud, &versions.taud_path) {
            (Some(version), _) => println!("taud {version}"),
            (None, Some(path)) => println!("taud did not report a version ({})", path.display()),
            (None, None) => println!("taud not found (next to tau or on PATH)"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The `taud` binary `tau` would start: next to this executable, else on PATH (the same lookup as
/// `tau hub run` and `tau chat`).
fn find_taud(ctx: &Context) -> Option<PathBuf> {
    let env = environment::snapshot(ctx);
    crate::hubctl::find_taud(
        environment::exe_dir().as_deref(),
        env.get("PATH").map(std::ffi::OsStr::new),
    )
}

fn taud_version(path: &PathBuf, ctx: &Context) -> Option<String> {
    let mut command = Command::new(path);
    command
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    ctx.export_to(&mut command);
    let output = command.output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    // clap prints "taud 0.1.0".
    text.split_whitespace().nth(1).map(str::to_owned)
}
