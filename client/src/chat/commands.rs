//! The slash commands of `tau chat`: parsing a typed line into a command or a message for tau, and
//! the commands about the chat itself (`/help`, `/tools`, `/model`, `/lang`, `/clear`). Session
//! commands live in [`super::sessions`], `/status` in [`super::status_report`].
//!
//! Invariants: commands are resolved by the shared table (`tau_api::commands`, Turkish aliases
//! included); a command that takes no argument refuses one; a failed `/model` switch leaves the
//! current role and says why; `/lang` changes this run's chrome only.

use tau_api::commands::{command_hint, find_command, help_text, split_command};
use tau_api::lang::Lang;
use tau_api::proto::v1 as pb;
use tau_client::call::{CallError, call};

use super::render;
use super::sessions;
use super::state::Chat;
use super::status_report::{self, role_line};
use super::turn;

/// ANSI: clear the screen and move the cursor home.
const CLEAR_SCREEN: &str = "\x1b[2J\x1b[H";

/// Handles one typed line: a slash command, or a message for tau. `false`: `/quit`, leave.
pub async fn handle_line(chat: &mut Chat, line: &str) -> bool {
    if line.trim().is_empty() {
        return true;
    }
    // A Ctrl-C pressed before this line was typed is not meant for it.
    chat.interrupts.forget_earlier();
    let Some((name, argument)) = split_command(line) else {
        turn::run_turn(chat, line.trim()).await;
        return true;
    };
    let Some(command) = find_command(name) else {
        let command = format!("/{}", render::one_line(name, 40));
        let text = chat.t(
            "command.unknown",
            &[("command", &command), ("hint", &command_hint())],
        );
        chat.printer.red(&text);
        return true;
    };
    let takes_argument = matches!(command.name, "resume" | "model" | "compact" | "lang");
    if !takes_argument && !argument.is_empty() {
        let name = format!("/{}", command.name);
        let text = chat.t("command.no_argument", &[("command", &name)]);
        chat.printer.red(&text);
        return true;
    }
    match command.name {
        "help" => help(chat),
        "tools" => tools(chat).await,
        "sessions" => sessions::list(chat).await,
        "resume" => sessions::resume(chat, argument).await,
        "new" => sessions::new_session(chat).await,
        "session" => sessions::show(chat).await,
        "clear" => clear(chat),
        "status" => status_report::show(chat).await,
        "model" => model(chat, argument).await,
        "compact" => sessions::compact(chat, argument).await,
        "lang" => lang(chat, argument),
        "quit" => return false,
        other => {
            let name = format!("/{other}");
            let text = chat.t("command.unavailable", &[("command", &name)]);
            chat.printer.red(&text);
        }
    }
    true
}

/// The ready banner: version, profile, session, and the command hint.
pub fn banner(chat: &mut Chat) {
    let session = chat.session_id().to_owned();
    let ready = chat.t(
        "banner.ready",
        &[
            ("version", &tau_api::VERSION),
            ("profile", &chat.info.profile),
            ("session", &session),
        ],
    );
    let style = chat.printer.style();
    chat.printer.line(&style.bold(&ready));
    let commands = chat.t("banner.commands", &[("hint", &command_hint())]);
    chat.printer.dim(&commands);
}

fn help(chat: &mut Chat) {
    let text = help_text(&chat.messages, chat.lang).unwrap_or_else(|e| e.to_string());
    for line in text.lines() {
        chat.printer.line(line);
    }
}

fn clear(chat: &mut Chat) {
    if chat.stdout_terminal {
        chat.printer.control(CLEAR_SCREEN);
    }
    banner(chat);
}

fn lang(chat: &mut Chat, argument: &str) {
    let available = Lang::codes();
    if argument.is_empty() {
        let current = chat.lang.as_str();
        let text = chat.t(
            "lang.current",
            &[("lang", &current), ("available", &available)],
        );
        chat.printer.line(&text);
        return;
    }
    match Lang::parse(argument) {
        Some(lang) => {
            chat.lang = lang;
            let name = lang.native_name();
            let text = chat.t("lang.switched", &[("lang", &name)]);
            chat.printer.line(&text);
        }
        None => {
            let typed = render::one_line(argument, 20);
            let text = chat.t(
                "lang.unknown",
                &[("lang", &typed), ("available", &available)],
            );
            chat.printer.red(&text);
        }
    }
}

async fn tools(chat: &mut Chat) {
    let request = chat.hub.list_tools(pb::ListToolsRequest {});
    let tools = match call(&mut chat.interrupts, chat.deadlines.call, request).await {
        Ok(response) => response.tools,
        Err(error) => return chat.report(&error),
    };
    if tools.is_empty() {
        let text = chat.t("tools.empty", &[]);
        chat.printer.line(&text);
        return;
    }
    let header = chat.t("tools.header", &[]);
    chat.printer.line(&header);
    let translate = |key: &str, args: &tau_api::i18n::Args<'_>| chat.t(key, args);
    let lines: Vec<String> = tools
        .iter()
        .flat_map(|tool| super::tool_list::tool_lines(&translate, tool))
        .collect();
    for line in lines {
        chat.printer.line(&format!("  {line}"));
    }
}

async fn model(chat: &mut Chat, argument: &str) {
    let request = chat.hub.list_model_roles(pb::ListModelRolesRequest {});
    let roles = match call(&mut chat.interrupts, chat.deadlines.call, request).await {
        Ok(roles) => roles,
        Err(error) => return chat.report(&error),
    };
    if argument.is_empty() {
        let header = chat.t("model.header", &[]);
        chat.printer.line(&header);
        for role in &roles.roles {
            let mut line = role_line(chat, role);
            if role.name == chat.role {
                line.push_str(&format!(" {}", chat.t("model.current", &[])));
            }
            chat.printer.line(&format!("  {line}"));
        }
        return;
    }
    let wanted = argument.to_owned();
    if wanted == chat.role {
        let text = chat.t("model.already", &[("role", &wanted)]);
        chat.printer.line(&text);
        return;
    }
    let Some(role) = roles.roles.iter().find(|r| r.name == wanted) else {
        let names: Vec<&str> = roles.roles.iter().map(|r| r.name.as_str()).collect();
        let typed = render::one_line(&wanted, 40);
        let text = chat.t(
            "model.unknown_role",
            &[("role", &typed), ("roles", &names.join(", "))],
        );
        chat.printer.red(&text);
        return;
    };
    let request = pb::SwitchRoleRequest {
        session_id: chat.session_id().to_owned(),
        role: wanted.clone(),
    };
    match call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.switch_role(request),
    )
    .await
    {
        Ok(response) => {
            chat.role = response.role;
            let text = chat.t(
                "model.switched",
                &[
                    ("role", &render::one_line(&chat.role, 40)),
                    ("provider", &render::one_line(&role.provider, 40)),
                    ("model_id", &render::one_line(&role.model_id, 80)),
                ],
            );
            chat.printer.line(&text);
        }
        Err(CallError::Hub(status)) => {
            let reason = render::one_line(status.message(), 200);
            let text = chat.t(
                "model.switch_failed",
                &[("role", &wanted), ("reason", &reason)],
            );
            chat.printer.red(&text);
        }
        Err(error) => chat.report(&error),
    }
}
