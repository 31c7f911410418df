//! `tau doctor`'s Telegram checks, when `[component.telegram]` is configured: the bot token is
//! set, an owner is bound, and what the running hub says of the channel (running, not paired,
//! backing off or stopped with its error).
//!
//! Invariants: the token's value is never printed (only whether it is set); the hub is asked only
//! on 127.0.0.1; nothing is written.

use std::path::Path;
use std::time::Duration;

use tau_api::config::{Config, TELEGRAM_COMPONENT, TELEGRAM_TOKEN_VAR, TelegramConfig};
use tau_api::env::Env;
use tau_telegram::state::{StatePaths, read_owner};

use super::report::Check;
use crate::hub_link::control_http as hub;

const CHECK: &str = "telegram";

/// The Telegram checks (none without `[component.telegram]`).
pub fn checks(config: &Config, env: &Env, data_dir: &Path, token_file: &Path) -> Vec<Check> {
    let Some(table) = config.component(TELEGRAM_COMPONENT) else {
        return Vec::new();
    };
    let settings = TelegramConfig::from_table(table);
    let mut out = Vec::new();
    if env.non_empty(TELEGRAM_TOKEN_VAR).is_some() {
        out.push(Check::ok(CHECK, format!("{TELEGRAM_TOKEN_VAR} is set")));
    } else {
        out.push(
            Check::fail(
                CHECK,
                format!("{TELEGRAM_TOKEN_VAR} is not set: the channel does not run"),
            )
            .fix(format!(
                "add {TELEGRAM_TOKEN_VAR}=<token from @BotFather> to the .env next to tau.toml"
            )),
        );
    }
    let paths = StatePaths::for_data_dir(data_dir);
    match (settings.owner_user_id, read_owner(&paths)) {
        (Some(id), _) => out.push(Check::ok(
            CHECK,
            format!("owner user id {id} (from tau.toml)"),
        )),
        (None, Ok(Some(owner))) => out.push(Check::ok(
            CHECK,
            format!("paired with user id {}", owner.user_id),
        )),
        (None, Ok(None)) => out.push(
            Check::warn(CHECK, "no owner is paired: the bot answers nobody")
                .fix("run `tau telegram pair` and send /start <code> to the bot in a private chat"),
        ),
        (None, Err(e)) => out.push(Check::fail(CHECK, e.to_string())),
    }
    let status = hub::status_json(config.hub.control_port, token_file, Duration::from_secs(1)).ok();
    let report = status
        .as_ref()
        .and_then(|s| s["channels"].as_array())
        .and_then(|channels| channels.iter().find(|c| c["name"] == CHECK));
    if let Some(report) = report {
        let state = report["state"].as_str().unwrap_or("unknown");
        let error = report["error"].as_str().unwrap_or("");
        let line = if error.is_empty() {
            format!("the hub reports the channel {state}")
        } else {
            format!("the hub reports the channel {state}: {error}")
        };
        out.push(match state {
            "running" => Check::ok(CHECK, line),
            "not_paired" | "starting" => Check::warn(CHECK, line),
            _ => Check::fail(CHECK, line)
                .fix("see the hub log; after fixing the cause, restart the hub (`tau hub stop`, then start it)"),
        });
    }
    out
}
