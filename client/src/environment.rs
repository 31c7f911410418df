//! The environment a command of `tau` reads: a snapshot of the process environment with the global
//! options that export a variable (`--lang`, `--profile`) applied on top, exactly as a process that
//! `tau` starts would see it.
//!
//! Invariant: the process environment is only read, never written.

use tau_api::env::Env;

use crate::cli::Context;

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
