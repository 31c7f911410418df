//! `tau`: the thin client of the tau hub. It parses the command line, renders chat, relays the user's
//! approval decisions and manages an installation; it never builds an agent and never decides an
//! approval by itself. Everything with state lives in `taud`.

// Every line to stdout goes through `out.rs` (`outln!`, `out!`), which ends a broken pipe quietly.
#![deny(clippy::print_stdout)]

// First: its printing macros are then in scope in every module below.
#[macro_use]
mod out;

mod approvals;
mod approve;
mod ask;
mod chat;
mod cli;
#[cfg(test)]
mod cli_tests;
mod context;
mod environment;
mod http_get;
mod hub_link;
mod logs;
mod node;
mod ops;
mod plugin_commands;
#[cfg(test)]
mod present_tests;
mod routine;
mod routine_approval;
mod tui;
mod usage;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory as _, FromArgMatches as _, Parser as _};

use crate::cli::{Cli, Command};
use crate::ops::{components, doctor, hubctl, init, mcp, shell_docs, telegram, version, web};

fn main() -> ExitCode {
    let cli = parse_command_line();
    let ctx = cli.context();
    // chat and ask also log to <TAU_DATA_DIR>/logs/tau.log; the other commands to stderr only.
    let logging = logs::start(&cli.command, &ctx);
    let _guard = logging.guard;
    let result = match &cli.command {
        Command::Version(args) => version::run(args, &ctx),
        Command::Ask(args) => ask::run(args, &ctx, logging.installation),
        Command::Components(args) => components::run(args, &ctx),
        Command::Doctor(args) => doctor::run(args, &ctx),
        Command::Init(args) => init::run(args, &ctx, cli.profile),
        Command::Hub(command) => hubctl::run_command(command, &ctx),
        Command::Chat(args) => chat::run(args, &ctx),
        Command::Mcp(command) => mcp::run(command, &ctx),
        Command::Telegram(command) => telegram::run(command, &ctx),
        Command::Web(command) => web::run(command, &ctx),
        Command::Routine(command) => routine::run(command, &ctx),
        Command::Approvals(args) => approvals::run(args, &ctx),
        Command::Node(command) => node::run(command, &ctx),
        Command::Tui(args) => tui::run(args, &ctx),
        Command::Completions(args) => shell_docs::run_completions(args),
        Command::Man => shell_docs::run_man(),
        Command::Usage(args) => usage::run(args, &ctx),
        Command::Plugin(args) => plugin_commands::run(args, &ctx),
    };
    match result {
        Ok(code) => code,
        // The reader of the output went away (`| head`): nothing is wrong with the command.
        Err(error) if out::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tau: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// The command line, parsed. When it asks for help, the help is printed again with the plugin
/// commands found on PATH (only then is PATH searched).
fn parse_command_line() -> Cli {
    let error = match Cli::try_parse() {
        Ok(cli) => return cli,
        Err(error) => error,
    };
    if !matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        error.exit();
    }
    let plugins = plugin_commands::on_path(&environment::process_only());
    let Some(section) = plugin_commands::help_section(&plugins) else {
        error.exit();
    };
    let matches = Cli::command()
        .after_help(section)
        .try_get_matches()
        .unwrap_or_else(|e| e.exit());
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}
