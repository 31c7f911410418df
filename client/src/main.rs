//! `tau`: the thin client of the tau hub. It parses the command line, renders chat, relays the user's
//! approval decisions and manages an installation; it never builds an agent and never decides an
//! approval by itself. Everything with state lives in `taud`.

mod cli;
mod components;
mod doctor;
mod environment;
mod init;
mod templates;
mod version;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = cli::Context::from_cli(&cli);
    // Console messages only; commands that own a log file (chat, hub) configure their own.
    let _logging = tau_api::logging::configure_logging(None, ctx.verbose, true);
    let result = match &cli.command {
        Command::Version(args) => version::run(args, &ctx),
        Command::Components(args) => components::run(args, &ctx),
        Command::Doctor(args) => doctor::run(args, &ctx),
        Command::Init(args) => init::run(args, &ctx, cli.profile),
        Command::Chat | Command::Hub => not_built(cli.command.name()),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("tau: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// A command whose issue has not landed yet: one line, exit 2.
fn not_built(name: &str) -> anyhow::Result<ExitCode> {
    eprintln!("tau {name}: this command is not available in this build yet");
    Ok(ExitCode::from(2))
}
