//! `tau`: the thin client of the tau hub. It parses the command line, renders chat, relays the user's
//! approval decisions and manages an installation; it never builds an agent and never decides an
//! approval by itself. Everything with state lives in `taud`.

mod approve;
mod ask;
mod chat;
mod cli;
mod components;
mod doctor;
mod environment;
mod event_json;
mod feed;
mod http_get;
mod hub_link;
mod hubctl;
mod init;
mod logs;
mod mcp;
mod relay;
mod shipped_files;
mod tui;
mod version;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = cli::Context::from_cli(&cli);
    // chat and ask also log to <TAU_DATA_DIR>/logs/tau.log; the other commands to stderr only.
    let _logging = logs::start(&cli.command, &ctx);
    let result = match &cli.command {
        Command::Version(args) => version::run(args, &ctx),
        Command::Ask(args) => ask::run(args, &ctx),
        Command::Components(args) => components::run(args, &ctx),
        Command::Doctor(args) => doctor::run(args, &ctx),
        Command::Init(args) => init::run(args, &ctx, cli.profile),
        Command::Hub(command) => run_hub(command, &ctx),
        Command::Chat(args) => chat::run(args, &ctx),
        Command::Mcp(command) => mcp::run(command, &ctx),
        Command::Tui(args) => tui::run(args, &ctx),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("tau: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// `tau hub …`: needs the installation's paths, not a valid `tau.toml`, so that a hub can be
/// inspected and stopped even while its configuration is broken.
fn run_hub(command: &hubctl::HubCommand, ctx: &cli::Context) -> anyhow::Result<ExitCode> {
    let located = tau_api::installation::Located::discover(
        environment::snapshot(ctx),
        &environment::current_dir()?,
    )?;
    let mut hub_ctx = hubctl::HubContext::new(located.paths, &located.env)?;
    hub_ctx.child_env = ctx.child_env.clone();
    hub_ctx.verbose = ctx.verbose;
    hubctl::run(command.clone(), &hub_ctx)
}
