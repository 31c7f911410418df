//! `tau telegram pair` and `tau telegram status [--json]`: pairing the Telegram channel with its
//! owner, and what the channel's files and the running hub say about it.
//!
//! Invariants: `pair` writes only the one-time code (0600, versioned, the format of
//! `tau_telegram::state`) and never the owner: the channel binds the owner when the code comes
//! back in a private chat; the token's value is never printed; the hub is asked only on 127.0.0.1.

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;
use tau_api::config::{TELEGRAM_COMPONENT, TELEGRAM_TOKEN_VAR, TelegramConfig};
use tau_api::installation::Installation;
use tau_telegram::state::{
    PAIRING_TTL_SECONDS, StatePaths, issue_pairing_code, read_owner, read_session,
};

use crate::cli::TelegramCommand;
use crate::context::Context;
use crate::environment;
use crate::hub_link::control_http as hub;

const HUB_DEADLINE: Duration = Duration::from_secs(2);

/// Runs `tau telegram …`.
pub fn run(command: &TelegramCommand, ctx: &Context) -> anyhow::Result<ExitCode> {
    let env = environment::snapshot(ctx);
    let cwd = environment::current_dir()?;
    let installation = Installation::discover(env, &cwd)?;
    let paths = StatePaths::for_data_dir(&installation.paths.data_dir);
    match command {
        TelegramCommand::Pair => pair(&installation, &paths),
        TelegramCommand::Status(args) => status(&installation, &paths, args.json),
    }
}

fn pair(installation: &Installation, paths: &StatePaths) -> anyhow::Result<ExitCode> {
    if installation.config.component(TELEGRAM_COMPONENT).is_none() {
        eprintln!(
            "tau: note: {} has no [component.telegram]; add it so the hub runs the channel",
            installation.paths.config_file.display()
        );
    }
    let now = jiff::Timestamp::now().as_second();
    let code = issue_pairing_code(paths, now)?;
    outln!(
        "Send this to your bot in a private chat within {} minutes:",
        PAIRING_TTL_SECONDS / 60
    );
    outln!();
    outln!("    /start {}", code.code);
    outln!();
    outln!("The code works once; the chat that sends it becomes the owner's.");
    Ok(ExitCode::SUCCESS)
}

fn status(
    installation: &Installation,
    paths: &StatePaths,
    as_json: bool,
) -> anyhow::Result<ExitCode> {
    let configured = installation.config.component(TELEGRAM_COMPONENT);
    let settings = configured.map(TelegramConfig::from_table);
    let owner = match settings.as_ref().and_then(|s| s.owner_user_id) {
        Some(id) => Some(
            json!({"user_id": id, "chat_id": settings.as_ref().and_then(|s| s.owner_chat_id).unwrap_or(id), "source": "tau.toml"}),
        ),
        None => read_owner(paths)?
            .map(|o| json!({"user_id": o.user_id, "chat_id": o.chat_id, "source": "paired"})),
    };
    let session = read_session(paths)?;
    let hub_state = hub::status_json(
        installation.settings.hub_port,
        &installation.paths.hub.token_file,
        HUB_DEADLINE,
    )
    .ok()
    .and_then(|s| {
        s["channels"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "telegram").cloned())
    });
    let token_set = installation.env.non_empty(TELEGRAM_TOKEN_VAR).is_some();
    if as_json {
        let out = json!({
            "configured": configured.is_some(),
            "token_set": token_set,
            "owner": owner,
            "session_id": session,
            "state_dir": paths.dir,
            "hub": hub_state,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    outln!("configured:  {}", yes_no(configured.is_some()));
    outln!("token set:   {} ({TELEGRAM_TOKEN_VAR})", yes_no(token_set));
    match &owner {
        Some(o) => outln!(
            "owner:       user {} in chat {} ({})",
            o["user_id"],
            o["chat_id"],
            o["source"].as_str().unwrap_or("")
        ),
        None => outln!("owner:       none (run `tau telegram pair`)"),
    }
    outln!("session:     {}", session.as_deref().unwrap_or("-"));
    match &hub_state {
        Some(h) => {
            let error = h["error"].as_str().unwrap_or("");
            let restarts = h["restarts"].as_u64().unwrap_or(0);
            outln!(
                "hub:         {} (restarts {restarts}){}",
                h["state"].as_str().unwrap_or("?"),
                if error.is_empty() {
                    String::new()
                } else {
                    format!(": {error}")
                }
            );
        }
        None => outln!("hub:         not running, or it does not run the channel"),
    }
    Ok(ExitCode::SUCCESS)
}
