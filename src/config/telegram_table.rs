//! `[component.telegram]`: the Telegram channel's settings, checked when `tau.toml` loads.
//!
//! Invariants: only the keys below are accepted, each of its own type and within its bounds, so a
//! typo or a bad value is a one-line error naming the file, key and value before the hub starts;
//! `api_base` is `https://` unless its host is a loopback address (the token travels in its path,
//! so it never crosses a network in clear text); `owner_user_id` and `owner_chat_id` are set
//! together or not at all (one alone would be ignored or guessed); the bot token never lives here
//! (it comes from `TELEGRAM_BOT_TOKEN`, see [`TELEGRAM_TOKEN_VAR`]).

use std::net::IpAddr;

use toml::{Table, Value};

use super::error::{ConfigError, key_segment, render_value};
use super::reader::Section;

/// The component's name, as `[component.telegram]` writes it.
pub const TELEGRAM_COMPONENT: &str = "telegram";
/// The variable (environment or `.env`) the bot token comes from.
pub const TELEGRAM_TOKEN_VAR: &str = "TELEGRAM_BOT_TOKEN";
/// The Bot API server when `api_base` is not set.
pub const DEFAULT_TELEGRAM_API_BASE: &str = "https://api.telegram.org";
/// How long an approval card waits for a tap when `approval_timeout_seconds` is not set.
pub const DEFAULT_APPROVAL_TIMEOUT_SECONDS: u64 = 600;
/// The bounds of `approval_timeout_seconds`.
pub const APPROVAL_TIMEOUT_BOUNDS: (u64, u64) = (10, 86_400);
/// The long-poll wait of `getUpdates` when `poll_timeout_seconds` is not set.
pub const DEFAULT_POLL_TIMEOUT_SECONDS: u64 = 30;
/// The bounds of `poll_timeout_seconds`.
pub const POLL_TIMEOUT_BOUNDS: (u64, u64) = (1, 50);

const KEYS: &str =
    "api_base, approval_timeout_seconds, poll_timeout_seconds, owner_user_id or owner_chat_id";

/// The checked `[component.telegram]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelegramConfig {
    /// The Bot API base URL, without a trailing `/`.
    pub api_base: String,
    /// How long a card waits for a tap before the approval is rejected, when the hub gives the
    /// question no deadline of its own (a routine's card lives until the hub's deadline).
    pub approval_timeout_seconds: u64,
    /// How long one `getUpdates` call waits for an update.
    pub poll_timeout_seconds: u64,
    /// The owner's numeric user id, when pinned in the file instead of paired.
    pub owner_user_id: Option<i64>,
    /// The chat the channel talks in, when pinned in the file instead of paired: the owner's
    /// private chat (whose id equals `owner_user_id`) or a group, where only the owner's messages
    /// and taps count.
    pub owner_chat_id: Option<i64>,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            api_base: DEFAULT_TELEGRAM_API_BASE.to_owned(),
            approval_timeout_seconds: DEFAULT_APPROVAL_TIMEOUT_SECONDS,
            poll_timeout_seconds: DEFAULT_POLL_TIMEOUT_SECONDS,
            owner_user_id: None,
            owner_chat_id: None,
        }
    }
}

impl TelegramConfig {
    /// The settings of an already checked table (see [`check`]); a key the check would refuse is
    /// read as absent.
    pub fn from_table(table: &Table) -> Self {
        let mut out = Self::default();
        if let Some(base) = table.get("api_base").and_then(Value::as_str) {
            out.api_base = base.trim_end_matches('/').to_owned();
        }
        let number = |key: &str| table.get(key).and_then(Value::as_integer);
        if let Some(n) = number("approval_timeout_seconds").and_then(|n| u64::try_from(n).ok()) {
            out.approval_timeout_seconds = n;
        }
        if let Some(n) = number("poll_timeout_seconds").and_then(|n| u64::try_from(n).ok()) {
            out.poll_timeout_seconds = n;
        }
        out.owner_user_id = number("owner_user_id");
        out.owner_chat_id = number("owner_chat_id");
        out
    }
}

/// Checks `[component.telegram]`; other component tables are left alone.
pub(crate) fn check(doc: &Section<'_>, name: &str, table: &Table) -> Result<(), ConfigError> {
    if name != TELEGRAM_COMPONENT {
        return Ok(());
    }
    for (key, value) in table {
        let dotted = format!("component.{name}.{}", key_segment(key));
        let invalid = |expected: String| ConfigError::Invalid {
            file: doc.file().to_path_buf(),
            key: dotted.clone(),
            value: render_value(value),
            expected,
        };
        match key.as_str() {
            "api_base" => match value {
                Value::String(url) if is_private_url(url) => {}
                _ => {
                    return Err(invalid(
                        "an https:// URL (http:// only for a loopback host: 127.0.0.1, ::1 or localhost)"
                            .to_owned(),
                    ));
                }
            },
            "approval_timeout_seconds" => in_bounds(value, APPROVAL_TIMEOUT_BOUNDS, invalid)?,
            "poll_timeout_seconds" => in_bounds(value, POLL_TIMEOUT_BOUNDS, invalid)?,
            "owner_user_id" | "owner_chat_id" => match value {
                Value::Integer(id) if *id != 0 => {}
                _ => {
                    return Err(invalid(
                        "a numeric Telegram id (a username is never accepted)".to_owned(),
                    ));
                }
            },
            _ => {
                return Err(ConfigError::UnknownKey {
                    file: doc.file().to_path_buf(),
                    key: dotted,
                    value: render_value(value),
                    expected: KEYS.to_owned(),
                });
            }
        }
    }
    check_owner_pair(doc, name, table)
}

/// `owner_user_id` and `owner_chat_id` pin the owner together: one without the other is refused,
/// naming both keys.
fn check_owner_pair(doc: &Section<'_>, name: &str, table: &Table) -> Result<(), ConfigError> {
    let (present, absent, value) = match (table.get("owner_user_id"), table.get("owner_chat_id")) {
        (Some(value), None) => ("owner_user_id", "owner_chat_id", value),
        (None, Some(value)) => ("owner_chat_id", "owner_user_id", value),
        _ => return Ok(()),
    };
    Err(ConfigError::Invalid {
        file: doc.file().to_path_buf(),
        key: format!("component.{name}.{present}"),
        value: render_value(value),
        expected: format!(
            "component.{name}.{absent} as well: {present} and {absent} pin the owner together \
             (or set neither and run `tau telegram pair`)"
        ),
    })
}

/// Whether `url` keeps the token off the network in clear text: `https://`, or `http://` to a
/// loopback host (an IP address that is loopback, or `localhost`).
fn is_private_url(url: &str) -> bool {
    if url.starts_with("https://") {
        return true;
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    // The authority ends where the path, query or fragment starts (a backslash counts as a slash
    // in an http URL); any user info before an `@` is not the host.
    let authority = rest.split(['/', '?', '#', '\\']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host = match host_port.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or(""),
        None => host_port.split(':').next().unwrap_or(""),
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn in_bounds(
    value: &Value,
    (low, high): (u64, u64),
    invalid: impl Fn(String) -> ConfigError,
) -> Result<(), ConfigError> {
    match value.as_integer().and_then(|n| u64::try_from(n).ok()) {
        Some(n) if (low..=high).contains(&n) => Ok(()),
        _ => Err(invalid(format!(
            "a whole number of seconds from {low} to {high}"
        ))),
    }
}
