//! `tau completions SHELL` and `tau man`: a shell completion script (clap_complete) and the
//! manual page (clap_mangen), generated from the same command-line definition that parses
//! arguments, printed on stdout for the user to install (the README says where).
//!
//! Invariants: both read only the command-line definition, never the installation or the hub.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use clap_complete::Shell;

use crate::cli::{Cli, CompletionsArgs, ShellArg};

/// The name the scripts and the page are written for.
const BIN: &str = "tau";

/// The completion script for `shell`.
pub fn completion_script(shell: ShellArg) -> Vec<u8> {
    let shell = match shell {
        ShellArg::Bash => Shell::Bash,
        ShellArg::Zsh => Shell::Zsh,
        ShellArg::Fish => Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::full_command(), BIN, &mut out);
    out
}

/// The manual page of `tau`, in roff.
pub fn man_page() -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::full_command())
        .render(&mut out)
        .context("rendering the manual page")?;
    Ok(out)
}

/// Runs `tau completions SHELL`.
pub fn run_completions(args: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    print_bytes(&completion_script(args.shell))
}

/// Runs `tau man`.
pub fn run_man() -> anyhow::Result<ExitCode> {
    print_bytes(&man_page()?)
}

fn print_bytes(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(bytes).context("writing to stdout")?;
    stdout.flush().context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}
