//! `tau chat`: talk to tau in the terminal. Attaches to the hub (starting `taud` in the background
//! when none answers, unless `--no-start`), opens or resumes a session, then reads lines: slash
//! commands run here, anything else is a turn whose reply streams back and whose tier-2 calls are
//! asked on this terminal.
//!
//! - Attaching (connect, start the hub, wait for its health) is `crate::hub_link::auto_start`;
//!   [`turn`]: one turn, its events and
//!   approvals (answers are read by `crate::approve`); [`render`] and [`style`]: what is
//!   printed and how; [`history`]: a stored conversation as `/resume` shows it; [`commands`],
//!   [`sessions`], [`status_report`]: the slash commands; [`editor`]: the input line and its
//!   history; [`state`]: what one run holds.
//!
//! Invariants: the chat decides nothing by itself (the hub owns sessions, turns and approvals);
//! Ctrl-C during a reply cancels the turn, during a slash command abandons it (back to the
//! prompt), at the prompt it quits; Ctrl-D at the prompt quits; every one-shot hub call has a
//! deadline ([`tau_client::call`]).

pub(crate) mod commands;
mod editor;
pub(crate) mod history;
pub(crate) mod render;
mod sessions;
pub(crate) mod state;
mod status_report;
pub(crate) mod style;
mod tool_list;
pub(crate) mod turn;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tau_api::i18n::Messages;
use tau_api::installation::Installation;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, open_session_request::Target};
use tau_client::call::{self, CallError};
use tau_client::present::Limits;

use self::editor::{Input, LineEditor};
use self::render::Printer;
use self::state::{Chat, LocalInfo};
use self::style::Style;
use crate::cli::ChatArgs;
use crate::context::Context;
use crate::environment;
use crate::hub_link::auto_start::{self as attach, AttachError, StartOptions};
use crate::hub_link::{EXIT_NO_HUB, HubAddress};

/// How long a hub started by `tau chat` may take to answer.
const START_DEADLINE: Duration = Duration::from_secs(20);

/// The input prompt.
const PROMPT: &str = "> ";

/// A chat attached to the hub on its first session, with the runtime it runs on and its history
/// file, or the exit code when it could not get that far (what went wrong was printed). `out`
/// replaces stdout (plain, no colour) for a front that draws the chat's lines itself.
pub(crate) fn open(
    args: &ChatArgs,
    ctx: &Context,
    out: Option<Box<dyn std::io::Write + Send>>,
) -> anyhow::Result<Result<(tokio::runtime::Runtime, Chat, std::path::PathBuf), ExitCode>> {
    let installation =
        Installation::discover(environment::snapshot(ctx), &environment::current_dir()?)?;
    let stdout_terminal = std::io::stdout().is_terminal();
    let mut printer = match out {
        Some(out) => Printer::new(out, Style::new(false)),
        None => Printer::stdout(Style::detect(&installation.env, stdout_terminal)),
    };
    let messages = Messages::builtin();
    let lang = installation.settings.lang;

    let address = hub_address(args, &installation);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;

    let start = (!args.no_start).then(|| start_options(ctx, &installation));
    let attached = match runtime.block_on(attach::attach(&address, start.as_ref())) {
        Ok(attached) => attached,
        Err(error) => {
            eprintln!("{}", attach_failure(&messages, lang, &error));
            return Ok(Err(ExitCode::from(EXIT_NO_HUB)));
        }
    };
    if let Some(pid) = attached.started {
        printer.dim(&messages.t_or_key("hub.started", lang, &[("pid", &pid)]));
    }

    let mut chat = Chat {
        hub: attached.client,
        printer,
        messages,
        lang,
        session: pb::SessionInfo::default(),
        role: String::new(),
        pinned_role: args.role.clone(),
        listing: None,
        info: local_info(&installation),
        interactive: crate::approve::stdin_is_terminal(),
        stdout_terminal,
        turns_started: 0,
        deadlines: call::Deadlines::from_var(installation.env.get(call::DEADLINE_VAR)),
        interrupts: {
            let _runtime = runtime.enter();
            call::Interrupts::listen()
        },
    };
    if !runtime.block_on(start_session(&mut chat, args)) {
        return Ok(Err(ExitCode::FAILURE));
    }
    let history_file = installation.paths.data_dir.join("chat_history");
    Ok(Ok((runtime, chat, history_file)))
}

/// The hub's Unix socket, or its loopback port with `--tcp`.
fn hub_address(args: &ChatArgs, installation: &Installation) -> HubAddress {
    if args.tcp {
        HubAddress::Tcp {
            port: installation.settings.hub_port,
            token_file: installation.paths.hub.token_file.clone(),
        }
    } else {
        HubAddress::Unix(installation.paths.hub.socket.clone())
    }
}

/// How to start a hub when none answers: `taud` next to `tau` or on PATH, its output appended to
/// `<logs>/taud.out`, the global options exported to it.
fn start_options(ctx: &Context, installation: &Installation) -> StartOptions {
    let path_var = installation.env.get("PATH").map(std::ffi::OsStr::new);
    StartOptions {
        taud: crate::hub_link::auto_start::find_taud(environment::exe_dir().as_deref(), path_var),
        log_file: installation.paths.logs_dir.join("taud.out"),
        child_env: ctx.child_env.clone(),
        deadline: START_DEADLINE,
    }
}

/// The line that says why no hub could be attached.
fn attach_failure(messages: &Messages, lang: Lang, error: &AttachError) -> String {
    match error {
        AttachError::NotRunning(_) => messages.t_or_key("hub.not_running", lang, &[]),
        error => {
            let reason = error.to_string();
            messages.t_or_key("hub.start_failed", lang, &[("reason", &reason)])
        }
    }
}

/// What `/status` shows about this installation without asking the hub.
fn local_info(installation: &Installation) -> LocalInfo {
    let agent = &installation.config.agent;
    LocalInfo {
        profile: installation.settings.profile.as_str().to_owned(),
        context: agent.context.as_str().to_owned(),
        window: agent.window_size,
        limits: Limits {
            max_turns: agent.max_turns,
            max_total_tokens: agent.max_total_tokens,
        },
        hub_port: installation.settings.hub_port,
        defaults: installation.config.source().is_defaults(),
    }
}

/// Runs `tau chat`.
pub fn run(args: &ChatArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let (runtime, mut chat, history_file) = match open(args, ctx, None)? {
        Ok(opened) => opened,
        Err(code) => return Ok(code),
    };
    let mut editor = LineEditor::new(Some(history_file))?;
    loop {
        if chat.printer.broken() {
            return Ok(ExitCode::FAILURE);
        }
        match editor.read(PROMPT)? {
            Input::Line(line) => {
                editor.remember(&line);
                if !runtime.block_on(commands::handle_line(&mut chat, &line)) {
                    let text = chat.t("chat.goodbye", &[]);
                    chat.printer.dim(&text);
                    return Ok(ExitCode::SUCCESS);
                }
            }
            Input::Interrupted | Input::Eof => {
                let text = chat.t("chat.goodbye", &[]);
                chat.printer.dim(&text);
                return Ok(ExitCode::SUCCESS);
            }
        }
    }
}

/// Opens the first session (`--resume`, `--session`, else a new one) and prints the banner.
/// `false` when not even a new session could be opened.
async fn start_session(chat: &mut Chat, args: &ChatArgs) -> bool {
    if chat.info.defaults {
        let text = chat.t("banner.no_config", &[]);
        chat.printer.dim(&text);
    }
    if let Some(role) = chat.pinned_role.clone()
        && !role_exists(chat, &role).await
    {
        return false;
    }
    let earlier = match (&args.resume, &args.session) {
        (Some(id), _) if id.is_empty() => Some((Target::MostRecent(true), String::new())),
        (Some(id), _) | (None, Some(id)) => Some((Target::SessionId(id.clone()), id.clone())),
        (None, None) => None,
    };
    let mut resumed = false;
    if let Some((target, typed)) = earlier {
        resumed = sessions::resume_target(chat, target, &typed).await;
    }
    if !resumed {
        match sessions::open(chat, Target::NewSession(true)).await {
            Ok(opened) => sessions::switch_to(chat, opened),
            Err(error) => {
                chat.report(&error);
                return false;
            }
        }
    }
    fake_model_notice(chat).await;
    adopt_hub_profile(chat).await;
    commands::banner(chat);
    true
}

/// Whether `role` is a role of the hub's tau.toml; when it is not, says so with the roles there
/// are.
async fn role_exists(chat: &mut Chat, role: &str) -> bool {
    let request = chat.hub.list_model_roles(pb::ListModelRolesRequest {});
    let roles = match call::call(&mut chat.interrupts, chat.deadlines.call, request).await {
        Ok(response) => response.roles,
        Err(error) => {
            chat.report(&error);
            return false;
        }
    };
    if roles.iter().any(|r| r.name == role) {
        return true;
    }
    let names: Vec<&str> = roles.iter().map(|r| r.name.as_str()).collect();
    let typed = render::one_line(role, 40);
    let text = chat.t(
        "model.unknown_role",
        &[("role", &typed), ("roles", &names.join(", "))],
    );
    chat.printer.red(&text);
    false
}

/// Says once when the current role runs on the offline fake model.
async fn fake_model_notice(chat: &mut Chat) {
    let request = chat.hub.list_model_roles(pb::ListModelRolesRequest {});
    let roles = match call::call(&mut chat.interrupts, chat.deadlines.call, request).await {
        Ok(roles) => roles,
        Err(CallError::Hub(_)) => return,
        Err(error) => return chat.report(&error),
    };
    let fake = roles
        .roles
        .iter()
        .any(|role| role.name == chat.role && role.provider == "fake");
    if fake {
        let text = chat.t("banner.fake_model", &[]);
        chat.printer.dim(&text);
    }
}

/// Takes the profile of the hub (`GetStatus`) when it differs from this installation's, and says
/// so once: the hub's is the profile the model is told. A hub that will not say leaves it as is.
async fn adopt_hub_profile(chat: &mut Chat) {
    let request = chat.hub.get_status(pb::GetStatusRequest {});
    let status = match call::call(&mut chat.interrupts, chat.deadlines.call, request).await {
        Ok(status) => status,
        Err(CallError::Hub(_)) => return,
        Err(error) => return chat.report(&error),
    };
    if status.profile.is_empty() || status.profile == chat.info.profile {
        return;
    }
    chat.info.profile = render::one_line(&status.profile, 40);
    let text = chat.t("banner.hub_profile", &[("profile", &chat.info.profile)]);
    chat.printer.dim(&text);
}
