//! What a command of `tau` reads from its process: the environment as a snapshot of the process
//! environment with the global options that export a variable (`--lang`, `--profile`) applied on
//! top, exactly as a process that `tau` starts would see it; the current directory; the directory
//! of the running `tau` (where `taud` is looked for first).
//!
//! Invariants: the process environment is only read, never written, and only here; commands read
//! variables from the [`snapshot`] (or the `Installation` built from it), never with
//! `std::env::var`. The command line is parsed before any snapshot exists and reads no variable
//! (no option takes a default from the environment).

use std::path::PathBuf;

use anyhow::Context as _;
use tau_api::env::Env;

use crate::context::Context;

/// The process environment plus the variables the global options export.
pub fn snapshot(ctx: &Context) -> Env {
    let mut env = Env::from_process();
    for (name, value) in &ctx.child_env {
        if let Some(value) = value.to_str() {
            env.set(*name, value);
        }
    }
    env
}

/// The process environment alone, for what runs before the command line is parsed (the plugin
/// commands `tau --help` lists): no global option changes PATH.
pub fn process_only() -> Env {
    Env::from_process()
}

/// The current directory, which every command resolves TAU_HOME against.
pub fn current_dir() -> anyhow::Result<PathBuf> {
    std::env::current_dir().context("reading the current directory")
}

/// The directory of the running `tau`, when it can be told.
pub fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(std::path::Path::to_path_buf))
}
