//! The command line of `tau`: global options, subcommands and the context every command receives.
//!
//! Global options that change behaviour of what `tau` starts (`--lang`, `--profile`) are not written
//! into this process's environment; they are carried in [`Context`] and passed to child processes
//! (`taud`) explicitly, so nothing mutates global state.

// The doc comments here are also clap's help texts, read in a terminal: `<home>/.env` is meant
// literally there, not as an HTML tag.
#![allow(rustdoc::invalid_html_tags)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command as ProcessCommand;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// tau: a personal agent hub that never touches the physical world without your approval.
#[derive(Debug, Parser)]
#[command(name = "tau", version = tau_api::VERSION, propagate_version = true)]
pub struct Cli {
    /// UI language for this run (exported as TAU_LANG to what tau starts).
    #[arg(long, global = true, value_enum)]
    pub lang: Option<LangArg>,
    /// Installation profile for this run (exported as TAU_PROFILE to what tau starts).
    #[arg(long, global = true, value_enum)]
    pub profile: Option<ProfileArg>,
    /// Show INFO messages on stderr (default: warnings only).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `tau`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Talk to tau in the terminal (starts the hub when none answers).
    Chat(crate::chat::ChatArgs),
    /// The full-screen client: conversation, sessions, events and an approval card that a stray
    /// key cannot approve (starts the hub when none answers).
    Tui(crate::tui::TuiArgs),
    /// Run, stop, inspect or install the hub daemon.
    #[command(subcommand)]
    Hub(crate::hubctl::HubCommand),
    /// List every component with its kind, version and state.
    Components(ComponentsArgs),
    /// Check the configuration, credentials, sessions, persona and hub.
    Doctor(DoctorArgs),
    /// Create tau.toml and the persona files from the shipped templates.
    ///
    /// Never replaces tau.toml, persona.md or user.example.md without --force, and never user.md,
    /// .env.example or .env. With the global --profile, appends TAU_PROFILE to <home>/.env when
    /// that file does not set it.
    Init(InitArgs),
    /// Print the versions of tau and taud.
    Version(VersionArgs),
    /// Ask the running hub one thing: one turn, the reply on stdout.
    Ask(crate::ask::AskArgs),
    /// List MCP tool servers and their tools; print suggested tiers for a server.
    #[command(subcommand)]
    Mcp(crate::mcp::McpCommand),
    /// The Telegram channel: pair its owner, see its state.
    #[command(subcommand)]
    Telegram(crate::telegram::TelegramCommand),
    /// Routines: tau acting on a schedule (list, add, rm, pause, resume, run, log).
    #[command(subcommand)]
    Routine(crate::routine::RoutineCommand),
    /// The tier-2 questions pending across sessions; `decide ID` answers one in this terminal.
    Approvals(crate::approvals::ApprovalsArgs),
    /// Print a shell completion script for bash, zsh or fish.
    Completions(CompletionsArgs),
    /// Print the manual page of tau (roff, for man).
    Man,
    /// Print tokens and cost per model role per day (Europe/Istanbul days).
    Usage(crate::usage::UsageArgs),
    /// A plugin command: `tau NAME ARGS…` runs the executable `tau-NAME` on PATH.
    #[command(external_subcommand)]
    Plugin(Vec<OsString>),
}

/// Options of `tau completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    pub shell: ShellArg,
}

/// `tau completions` shells.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ShellArg {
    Bash,
    Zsh,
    Fish,
}

/// Options of `tau version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// Options of `tau components`.
#[derive(Debug, Args)]
pub struct ComponentsArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// Options of `tau doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// Options of `tau init`. The global `--profile` also appends TAU_PROFILE to <home>/.env when
/// that file does not set it.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The TAU_HOME to set up (default: TAU_HOME, else the current directory if it has a
    /// tau.toml, else ~/.tau).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The model provider of every role (default: bedrock, else anthropic, else fake, by the
    /// credentials in the environment or <home>/.env).
    #[arg(long, value_enum)]
    pub provider: Option<ProviderArg>,
    /// The UI language written to tau.toml (default: asked; en with --yes or without a terminal).
    #[arg(long, value_enum)]
    pub language: Option<LangArg>,
    /// Ask nothing; take the defaults.
    #[arg(short, long)]
    pub yes: bool,
    /// Replace an existing tau.toml and persona files (never user.md, .env.example or .env).
    #[arg(long)]
    pub force: bool,
}

/// `tau init --provider` values: the built-in providers.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ProviderArg {
    Bedrock,
    Anthropic,
    Fake,
    /// A local Ollama server (every role on a local model).
    Ollama,
    /// An OpenAI-compatible endpoint.
    #[value(name = "openai")]
    OpenAi,
}

/// `--lang` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LangArg {
    En,
    Tr,
}

/// `--profile` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ProfileArg {
    Home,
    Travel,
    Sport,
}

/// What every command receives: the global options, and the environment to hand to children.
#[derive(Debug, Clone)]
pub struct Context {
    pub verbose: bool,
    /// Variables exported to processes tau starts (TAU_LANG, TAU_PROFILE).
    pub child_env: Vec<(&'static str, OsString)>,
}

impl Context {
    /// Builds the context from the parsed command line.
    pub fn from_cli(cli: &Cli) -> Self {
        let mut child_env = Vec::new();
        if let Some(lang) = cli.lang {
            let value = match lang {
                LangArg::En => "en",
                LangArg::Tr => "tr",
            };
            child_env.push(("TAU_LANG", OsString::from(value)));
        }
        if let Some(profile) = cli.profile {
            let value = match profile {
                ProfileArg::Home => "home",
                ProfileArg::Travel => "travel",
                ProfileArg::Sport => "sport",
            };
            child_env.push(("TAU_PROFILE", OsString::from(value)));
        }
        Self {
            verbose: cli.verbose,
            child_env,
        }
    }

    /// Applies the exported variables to a child process about to be started.
    pub fn export_to(&self, command: &mut ProcessCommand) {
        for (key, value) in &self.child_env {
            command.env(key, value);
        }
    }
}
