//! What every command of `tau` receives besides its own options: the global options that change
//! what `tau` does or starts (`--verbose`; `--lang` and `--profile`, as the variables they export),
//! built once from the parsed command line (`crate::cli::Cli::context`). Imports nothing of `tau`.
//!
//! Invariant: global options are not written into this process's environment; they are carried
//! here and passed to child processes (`taud`) explicitly ([`Context::export_to`]), or applied to
//! a snapshot of the environment (`crate::environment::snapshot`), so nothing mutates global
//! state.

use std::ffi::OsString;
use std::process::Command as ProcessCommand;

/// What every command receives: the global options, and the environment to hand to children.
#[derive(Debug, Clone)]
pub struct Context {
    pub verbose: bool,
    /// Variables exported to processes tau starts (TAU_LANG, TAU_PROFILE).
    pub child_env: Vec<(&'static str, OsString)>,
}

impl Context {
    /// Applies the exported variables to a child process about to be started.
    pub fn export_to(&self, command: &mut ProcessCommand) {
        for (key, value) in &self.child_env {
            command.env(key, value);
        }
    }
}
