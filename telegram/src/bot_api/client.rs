//! The Bot API over reqwest: the six methods the channel calls, each a JSON POST to
//! `<api_base>/bot<token>/<method>`.
//!
//! Invariants: the token sits in the URL path, so no error made here carries a URL (reqwest errors
//! go through `without_url`, and [`BotError`]'s texts never name one) and the client's `Debug`
//! hides it; every request has a deadline (the long poll's own wait plus a margin); a 429's
//! `retry_after` is a number from outside, so it is clamped to 1 s … [`MAX_RETRY_AFTER`] as it is
//! read and again by [`BotError::retry_wait`], the one way callers turn it into a wait.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use tau_api::credentials::Secret;

use super::types::{
    AnswerCallbackQuery, ApiReply, EditMessageText, GetUpdates, InlineKeyboard, LinkPreviewOptions,
    Message, SendMessage, Update,
};

/// How long connecting to the Bot API may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The deadline of a call that is not a long poll.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// What a long poll may take beyond its own wait.
const POLL_MARGIN: Duration = Duration::from_secs(10);
/// The most of a reply body read into an error description.
const MAX_DESCRIPTION: usize = 300;
/// The longest wait a 429 can impose, whatever its `retry_after` says: the channel never sleeps
/// for ever (nor overflows a deadline) on a number from outside.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The shortest: a 429 that asks for no wait at all does not make a caller spin.
const MIN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Why a Bot API call failed. No variant ever holds the request URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BotError {
    /// The request did not complete (connect, timeout, reset); the URL was stripped.
    #[error("the Bot API could not be reached: {0}")]
    Network(String),
    /// 429: wait `retry_after` seconds before the next call (as Telegram asked, but from 1 to
    /// [`MAX_RETRY_AFTER`]; see [`BotError::retry_wait`]).
    #[error("the Bot API asks to wait {retry_after} s (too many requests)")]
    RetryAfter { retry_after: u64 },
    /// 409: another poller (or a webhook) uses this bot.
    #[error("the Bot API refused polling: {0}")]
    Conflict(String),
    /// 401/404: the token is wrong or revoked.
    #[error("the Bot API refused the bot token ({code}): {description}")]
    Unauthorized { code: i64, description: String },
    /// Any other refusal (400 and the like), with Telegram's description.
    #[error("the Bot API refused the call ({code}): {description}")]
    Refused { code: i64, description: String },
    /// The reply was not the JSON the method returns.
    #[error("the Bot API sent a reply that could not be read: {0}")]
    Decode(String),
}

impl BotError {
    /// How long a 429 asks to wait, from 1 s to [`MAX_RETRY_AFTER`]; `None` for any other
    /// failure.
    pub fn retry_wait(&self) -> Option<Duration> {
        match self {
            BotError::RetryAfter { retry_after } => {
                Some(Duration::from_secs(*retry_after).clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER))
            }
            _ => None,
        }
    }

    /// A 400 "message is not modified": the edit is already on screen, so it counts as done.
    pub fn is_not_modified(&self) -> bool {
        matches!(self, BotError::Refused { description, .. } if description.contains("message is not modified"))
    }
}

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("the Telegram HTTP client could not be built: {0}")]
pub struct ClientBuildError(String);

/// A Bot API client for one bot.
#[derive(Clone)]
pub struct BotClient {
    http: reqwest::Client,
    /// `<api_base>/bot<token>/`: never printed.
    prefix: Arc<Secret>,
    /// The token alone, to scrub from any error text as a second guard.
    token: Arc<Secret>,
}

impl fmt::Debug for BotClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BotClient { .. }")
    }
}

impl BotClient {
    /// A client of `api_base` (no trailing `/`) for the bot whose token is `token`.
    pub fn new(api_base: &str, token: &Secret) -> Result<Self, ClientBuildError> {
        use rustls_platform_verifier::BuilderVerifierExt;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_platform_verifier())
            .map_err(|e| ClientBuildError(format!("TLS set-up failed: {e}")))?
            .with_no_client_auth();
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("tau-telegram/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ClientBuildError(e.without_url().to_string()))?;
        let prefix = format!("{}/bot{}/", api_base.trim_end_matches('/'), token.expose());
        Ok(Self {
            http,
            prefix: Arc::new(Secret::new(prefix)),
            token: Arc::new(token.clone()),
        })
    }

    /// `deleteWebhook` (pending updates kept): polling fails while a webhook is set.
    pub async fn delete_webhook(&self) -> Result<bool, BotError> {
        self.call(
            "deleteWebhook",
            &serde_json::json!({"drop_pending_updates": false}),
            CALL_TIMEOUT,
        )
        .await
    }

    /// `getUpdates` from `offset`, waiting up to `timeout`.
    pub async fn get_updates(
        &self,
        offset: i64,
        timeout: Duration,
    ) -> Result<Vec<Update>, BotError> {
        let body = GetUpdates {
            offset,
            timeout: timeout.as_secs(),
            limit: 100,
            allowed_updates: ["message", "callback_query"],
        };
        self.call("getUpdates", &body, timeout.saturating_add(POLL_MARGIN))
            .await
    }

    /// `sendMessage` in HTML, previews off, with optional buttons.
    pub async fn send_message(
        &self,
        chat_id: i64,
        html: &str,
        keyboard: Option<&InlineKeyboard>,
    ) -> Result<Message, BotError> {
        let body = SendMessage {
            chat_id,
            text: html,
            parse_mode: "HTML",
            link_preview_options: LinkPreviewOptions { is_disabled: true },
            reply_markup: keyboard,
        };
        self.call("sendMessage", &body, CALL_TIMEOUT).await
    }

    /// `editMessageText` in HTML, previews off; without `keyboard` the buttons go. "Not modified"
    /// counts as done.
    pub async fn edit_message(
        &self,
        chat_id: i64,
        message_id: i64,
        html: &str,
        keyboard: Option<&InlineKeyboard>,
    ) -> Result<(), BotError> {
        let body = EditMessageText {
            chat_id,
            message_id,
            text: html,
            parse_mode: "HTML",
            link_preview_options: LinkPreviewOptions { is_disabled: true },
            reply_markup: keyboard,
        };
        match self
            .call::<serde_json::Value, _>("editMessageText", &body, CALL_TIMEOUT)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_modified() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `answerCallbackQuery`: stops the spinner on the person's button.
    pub async fn answer_callback(&self, id: &str, text: &str, alert: bool) -> Result<(), BotError> {
        let body = AnswerCallbackQuery {
            callback_query_id: id,
            text,
            show_alert: alert,
        };
        self.call::<bool, _>("answerCallbackQuery", &body, CALL_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// `leaveChat`: the bot does not stay in groups.
    pub async fn leave_chat(&self, chat_id: i64) -> Result<(), BotError> {
        self.call::<bool, _>(
            "leaveChat",
            &serde_json::json!({"chat_id": chat_id}),
            CALL_TIMEOUT,
        )
        .await
        .map(|_| ())
    }

    async fn call<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        method: &str,
        body: &B,
        deadline: Duration,
    ) -> Result<T, BotError> {
        let url = format!("{}{method}", self.prefix.expose());
        let response = self
            .http
            .post(url)
            .json(body)
            .timeout(deadline)
            .send()
            .await
            .map_err(|e| network(e, &self.token))?;
        let status = response.status().as_u16();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| network(e, &self.token))?;
        let reply: ApiReply<T> = match serde_json::from_slice(&bytes) {
            Ok(reply) => reply,
            Err(e) if status == 200 => return Err(BotError::Decode(e.to_string())),
            Err(_) => {
                return Err(BotError::Refused {
                    code: i64::from(status),
                    description: clip(&String::from_utf8_lossy(&bytes)),
                });
            }
        };
        if reply.ok {
            return reply
                .result
                .ok_or_else(|| BotError::Decode(format!("{method}: ok without a result")));
        }
        let code = reply.error_code.unwrap_or(i64::from(status));
        let description = clip(reply.description.as_deref().unwrap_or(""));
        Err(match code {
            429 => BotError::RetryAfter {
                retry_after: reply
                    .parameters
                    .and_then(|p| p.retry_after)
                    .unwrap_or(1)
                    .clamp(MIN_RETRY_AFTER.as_secs(), MAX_RETRY_AFTER.as_secs()),
            },
            409 => BotError::Conflict(description),
            401 | 404 => BotError::Unauthorized { code, description },
            _ => BotError::Refused { code, description },
        })
    }
}

fn network(e: reqwest::Error, token: &Secret) -> BotError {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    // `without_url` drops the URL, and with it the token in its path.
    let e = e.without_url();
    let mut text = format!("{kind}: {e}");
    let mut source = std::error::Error::source(&e);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    if !token.expose().is_empty() {
        text = text.replace(token.expose(), "<token>");
    }
    BotError::Network(clip(&text))
}

fn clip(text: &str) -> String {
    text.chars().take(MAX_DESCRIPTION).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_wait_is_never_zero_nor_longer_than_the_cap() {
        let wait = |retry_after| BotError::RetryAfter { retry_after }.retry_wait();
        assert_eq!(wait(u64::MAX), Some(MAX_RETRY_AFTER));
        assert_eq!(wait(61), Some(MAX_RETRY_AFTER));
        assert_eq!(wait(2), Some(Duration::from_secs(2)));
        assert_eq!(wait(0), Some(MIN_RETRY_AFTER));
        assert_eq!(BotError::Network("x".into()).retry_wait(), None);
    }
}
