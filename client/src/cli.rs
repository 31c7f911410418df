//! The command line of `tau`: global options, subcommands and the options of every subcommand
//! (the `*Args` and `*Command` types, parsed by clap), and the [`Context`] the global options make
//! for every command ([`Cli::context`]).
//!
//! Invariants: parsing reads no environment variable (no option takes a default from it) and
//! imports no other module of `tau` but `context`; every command's options are here, so a command
//! imports this module and this module imports no command.

// The doc comments here are also clap's help texts, read in a terminal: `<home>/.env` is meant
// literally there, not as an HTML tag.
#![allow(rustdoc::invalid_html_tags)]

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, CommandFactory as _, Parser, Subcommand, ValueEnum};

use crate::context::Context;

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

impl Cli {
    /// The whole command tree, for completions and the manual. Building the root copies the
    /// subcommands into its `help` subcommand before their deferred parts run, so a subcommand
    /// whose own subcommands come with its options (`approvals decide`) has them added here
    /// first, and its deferred part emptied.
    pub fn full_command() -> clap::Command {
        let mut command = Cli::command();
        // In place, so the subcommands keep their order.
        for sub in command.get_subcommands_mut() {
            if sub.get_name() == "approvals" {
                *sub = ApprovalsArgs::augment_args(std::mem::take(sub)).defer(|done| done);
            }
        }
        command
    }

    /// The context every command receives, from the global options.
    pub fn context(&self) -> Context {
        let mut child_env = Vec::new();
        if let Some(lang) = self.lang {
            let value = match lang {
                LangArg::En => "en",
                LangArg::Tr => "tr",
            };
            child_env.push(("TAU_LANG", OsString::from(value)));
        }
        if let Some(profile) = self.profile {
            let value = match profile {
                ProfileArg::Home => "home",
                ProfileArg::Travel => "travel",
                ProfileArg::Sport => "sport",
            };
            child_env.push(("TAU_PROFILE", OsString::from(value)));
        }
        Context {
            verbose: self.verbose,
            child_env,
        }
    }
}

/// The subcommands of `tau`.
// `defer` (here and on every nested subcommand enum): a subcommand's arguments are built only
// when it is the one parsed, or when help, completions or the manual need them all, so a
// one-shot `tau ask` does not build the whole command tree first. A deferred subcommand's
// `Args` struct is applied after its variant's attributes, so its doc comment would replace the
// variant's description: those structs carry plain comments (checked by
// `cli_tests::variants_keep_their_about`).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Talk to tau in the terminal (starts the hub when none answers).
    Chat(ChatArgs),
    /// The full-screen client: conversation, sessions, events and an approval card that a stray
    /// key cannot approve (starts the hub when none answers).
    Tui(TuiArgs),
    /// Run, stop, inspect or install the hub daemon.
    #[command(subcommand)]
    Hub(HubCommand),
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
    Ask(AskArgs),
    /// List MCP tool servers and their tools; print suggested tiers for a server.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// The Telegram channel: pair its owner, see its state.
    #[command(subcommand)]
    Telegram(TelegramCommand),
    /// Routines: tau acting on a schedule (list, add, rm, pause, resume, run, log).
    #[command(subcommand)]
    Routine(RoutineCommand),
    /// The web client's browsers: enroll one with a one-time link, list them, revoke one.
    #[command(subcommand)]
    Web(WebCommand),
    /// The tier-2 questions pending across sessions; `decide ID` answers one in this terminal.
    Approvals(ApprovalsArgs),
    /// Machines that lend the hub their tools: pair, join, list, revoke.
    #[command(subcommand)]
    Node(crate::node::NodeCommand),
    /// Print a shell completion script for bash, zsh or fish.
    Completions(CompletionsArgs),
    /// Print the manual page of tau (roff, for man).
    Man,
    /// Print tokens and cost per model role per day (Europe/Istanbul days).
    Usage(UsageArgs),
    /// A plugin command: `tau NAME ARGS…` runs the executable `tau-NAME` on PATH.
    #[command(external_subcommand)]
    Plugin(Vec<OsString>),
}

// Options of `tau chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Resume a session at start: the most recent one, or the one with this id.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "", conflicts_with = "session")]
    pub resume: Option<String>,
    /// Continue the session with this id.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Run on this model role for the whole run (wins over the session's stored role, and is
    /// recorded with it).
    #[arg(long, value_name = "ROLE")]
    pub role: Option<String>,
    /// Do not start a hub when none answers; say how to start one and exit.
    #[arg(long)]
    pub no_start: bool,
    /// Connect over TCP 127.0.0.1 with the hub's token instead of the Unix socket.
    #[arg(long)]
    pub tcp: bool,
}

// Options of `tau tui`.
#[derive(Debug, Args)]
pub struct TuiArgs {
    /// The same options as `tau chat` (the UI language is the global `--lang`).
    #[command(flatten)]
    pub chat: ChatArgs,
}

/// `tau hub` subcommands.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
#[command(defer = true)]
pub enum HubCommand {
    /// Run the hub in the foreground (Ctrl-C or `tau hub stop` stops it).
    Run,
    /// Start the hub in the background and wait until it answers (nothing to do when one does).
    Start {
        /// Give up waiting after this many seconds (at most 600).
        #[arg(long, value_name = "SECONDS", default_value_t = 30)]
        timeout: u64,
        /// Print JSON for scripts: started, pid, socket, log.
        #[arg(long)]
        json: bool,
    },
    /// Is the hub running? pid, heartbeat, last crash and the launchd/systemd state.
    Status {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Stop the running hub (SIGTERM) and wait until it is gone.
    Stop {
        /// Give up waiting after this many seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 15)]
        timeout: u64,
    },
    /// Install the hub as a per-user service: a launchd agent (macOS) or a systemd user unit
    /// (Linux), restarted after a crash or a kill.
    ///
    /// On a node the service gets TAU_ROLE=node: the role is --role, else TAU_ROLE (the
    /// environment or TAU_HOME/.env), else `[hub] role` in tau.toml.
    Install {
        /// Run the service as this role (written into the service as TAU_ROLE).
        #[arg(long, value_enum)]
        role: Option<RoleArg>,
    },
    /// Remove the per-user service.
    Uninstall,
    /// Print the systemd user unit for this installation (with TAU_ROLE as `install` writes it).
    SystemdUnit {
        /// Run the service as this role (written into the unit as TAU_ROLE).
        #[arg(long, value_enum)]
        role: Option<RoleArg>,
    },
}

/// `--role` values: what a `taud` is in a tau mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RoleArg {
    /// The hub: runs the model and the agents.
    Hub,
    /// A node: no model, no agent; lends its tools to one hub.
    Node,
}

impl RoleArg {
    /// The role this names.
    pub fn role(self) -> tau_api::config::NodeRole {
        match self {
            RoleArg::Hub => tau_api::config::NodeRole::Hub,
            RoleArg::Node => tau_api::config::NodeRole::Node,
        }
    }
}

// Options of `tau completions`.
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

// Options of `tau version`.
#[derive(Debug, Args)]
pub struct VersionArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

// Options of `tau components`.
#[derive(Debug, Args)]
pub struct ComponentsArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

// Options of `tau doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

// Options of `tau init`. The global `--profile` also appends TAU_PROFILE to <home>/.env when
// that file does not set it.
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

/// The channel the one-shot commands speak for (`tau ask`, and `tau routine add` and `run` by
/// default).
pub const CLI_CHANNEL: &str = "cli";

// Options of `tau ask`.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// What to ask (the words are joined with spaces).
    #[arg(required = true, value_name = "TEXT")]
    pub text: Vec<String>,
    /// Print the turn's events as JSON lines instead of the reply.
    #[arg(long)]
    pub json: bool,
    /// Continue this session instead of opening a new one.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Ask on the terminal before each tier-2 action (without it they are rejected).
    #[arg(long)]
    pub approve: bool,
}

// `tau approvals`.
#[derive(Debug, Clone, Args)]
pub struct ApprovalsArgs {
    #[command(subcommand)]
    pub command: Option<ApprovalsCommand>,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

// `tau approvals …` (a plain comment: see `Command`).
#[derive(Debug, Clone, Subcommand)]
#[command(defer = true)]
pub enum ApprovalsCommand {
    /// Show one pending question in this terminal and answer it (y approves; anything else
    /// rejects).
    Decide(DecideArgs),
}

// Options of `tau approvals decide`.
#[derive(Debug, Clone, Args)]
pub struct DecideArgs {
    /// The approval's id, as `tau approvals` lists it.
    pub id: String,
}

/// `tau mcp …`.
#[derive(Debug, Clone, Subcommand)]
#[command(defer = true)]
pub enum McpCommand {
    /// List the MCP servers of tau.toml and their tools, with what the running hub says.
    List(McpListArgs),
    /// Print a TOML block of a server's tools with suggested tiers, to review and paste into
    /// tau.toml (nothing is written). Needs a running hub that started the server.
    Tiers(McpTiersArgs),
}

// Options of `tau mcp list`.
#[derive(Debug, Clone, Args)]
pub struct McpListArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

// Options of `tau mcp tiers`.
#[derive(Debug, Clone, Args)]
pub struct McpTiersArgs {
    /// The server's key in `[mcp.servers.<key>]`.
    pub server: String,
}

/// `tau routine …`.
#[derive(Debug, Clone, Subcommand)]
#[command(defer = true)]
pub enum RoutineCommand {
    /// List the routines with their schedule, next firing and last outcome.
    List(RoutineListArgs),
    /// Add a routine (a tier-2 tool action is asked here first: answer y to register it).
    Add(RoutineAddArgs),
    /// Remove a routine (no approval needed).
    Rm(RoutineNameArgs),
    /// Pause a routine: it does not fire until resumed.
    Pause(RoutineNameArgs),
    /// Resume a routine; what it missed while paused does not fire.
    Resume(RoutineNameArgs),
    /// Fire a routine now, outside its schedule (a tier-2 tool routine is asked here first, every
    /// time: answer y to run it).
    Run(RoutineRunArgs),
    /// Show a routine's firings and their outcomes.
    Log(RoutineNameArgs),
}

// `--json`.
#[derive(Debug, Clone, Args)]
pub struct RoutineListArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

// A routine's name and `--json`.
#[derive(Debug, Clone, Args)]
pub struct RoutineNameArgs {
    /// The routine's name.
    pub name: String,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

// Options of `tau routine run`.
#[derive(Debug, Clone, Args)]
pub struct RoutineRunArgs {
    /// The routine's name.
    pub name: String,
    /// The session a tier-2 run is asked in (default: a new one).
    #[arg(long)]
    pub session: Option<String>,
    /// The channel this command speaks for (a tier-2 run is asked on it).
    #[arg(long, default_value = CLI_CHANNEL)]
    pub channel: String,
    /// Print JSON for scripts (a tier-2 routine is then refused: nobody can be asked).
    #[arg(long)]
    pub json: bool,
}

/// What happens to a firing missed while the hub was down.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CatchUpArg {
    /// Fire once at start.
    RunOnce,
    /// Record it as skipped.
    Skip,
}

// Options of `tau routine add`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("schedule").required(true).args(["cron", "every", "at"])))]
#[command(group(clap::ArgGroup::new("action").required(true).args(["prompt", "tool"])))]
pub struct RoutineAddArgs {
    /// The routine's name: 1-64 characters of a-z, 0-9, - and _.
    pub name: String,
    /// A cron expression in Europe/Istanbul time, e.g. "0 7 * * 1-5".
    #[arg(long)]
    pub cron: Option<String>,
    /// An interval, e.g. 90m, 2h, 1d (at least 1m).
    #[arg(long)]
    pub every: Option<String>,
    /// Once, at a local time: "YYYY-MM-DD HH:MM" (Europe/Istanbul).
    #[arg(long)]
    pub at: Option<String>,
    /// A prompt run as a turn on the routine's own session.
    #[arg(long)]
    pub prompt: Option<String>,
    /// One fixed tool call: the tool's name (see `--args`).
    #[arg(long)]
    pub tool: Option<String>,
    /// The tool's arguments as a JSON object.
    #[arg(long = "args", default_value = "{}", requires = "tool")]
    pub arguments: String,
    /// What happens to a firing missed while the hub was down.
    #[arg(long, value_enum, default_value = "run-once")]
    pub catch_up: CatchUpArg,
    /// Replace a routine of the same name (a changed action is asked again).
    #[arg(long)]
    pub replace: bool,
    /// The session a tool routine is registered from (default: a new one); its tier-2
    /// registration question is asked here, in this terminal.
    #[arg(long)]
    pub session: Option<String>,
    /// The channel this command speaks for (the registration question is asked on it).
    #[arg(long, default_value = CLI_CHANNEL)]
    pub channel: String,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// `tau telegram …`.
#[derive(Debug, Clone, Subcommand)]
#[command(defer = true)]
pub enum TelegramCommand {
    /// Print a one-time code (valid 10 minutes); send `/start <code>` to the bot in a private chat
    /// to become its owner.
    Pair,
    /// Show the channel's owner, session and the state the running hub reports.
    Status(TelegramStatusArgs),
}

// Options of `tau telegram status`.
#[derive(Debug, Clone, Args)]
pub struct TelegramStatusArgs {
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

// Options of `tau usage`.
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// How many days back, today included (1 to 400).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=400))]
    pub days: u32,
    /// Print JSON for scripts.
    #[arg(long)]
    pub json: bool,
}

/// `tau web …`.
#[derive(Debug, Clone, Subcommand)]
#[command(defer = true)]
pub enum WebCommand {
    /// Print a one-time link (valid 10 minutes) that enrolls one browser under NAME.
    Pair {
        /// The browser's name (letters, digits, '-', '_', '.'); `browser-N` when not given.
        #[arg(long)]
        name: Option<String>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// List the enrolled browsers: name, when enrolled, when last signed in.
    Devices {
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Remove a browser: its sessions and open streams end at once.
    Revoke {
        /// The browser's name, as `tau web devices` lists it.
        name: String,
    },
}
