//! The `taud` binary: parses the command line and runs the hub in the foreground.

use clap::Parser;

/// The tau hub daemon. Normally started by `tau chat`, launchd or systemd; `tau hub run` runs it in
/// the foreground.
#[derive(Debug, Parser)]
#[command(name = "taud", version = tau_api::VERSION)]
struct Args {
    /// Log INFO and up to stderr (default: WARN and up).
    #[arg(short, long)]
    verbose: bool,
}

fn main() -> std::process::ExitCode {
    let _args = Args::parse();
    eprintln!("taud: the hub is not built yet");
    std::process::ExitCode::from(2)
}
