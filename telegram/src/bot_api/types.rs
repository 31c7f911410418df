//! The few Bot API types the channel reads and writes, as serde structs. Unknown fields are
//! ignored, so a newer Bot API never breaks decoding; ids are `i64` (user ids have up to 52
//! significant bits).

use serde::{Deserialize, Serialize};

/// Every reply: `{ok, result}` or `{ok: false, error_code, description, parameters}`.
#[derive(Debug, Deserialize)]
pub struct ApiReply<T> {
    pub ok: bool,
    pub result: Option<T>,
    pub error_code: Option<i64>,
    pub description: Option<String>,
    pub parameters: Option<ReplyParameters>,
}

/// What an error reply says about how to go on.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ReplyParameters {
    /// Seconds to wait before the next request (429).
    pub retry_after: Option<u64>,
}

/// One incoming update; only the kinds the channel asks for are read.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Update {
    pub update_id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_query: Option<CallbackQuery>,
}

/// A person or a bot.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
}

/// A chat; `kind` is `private`, `group`, `supergroup` or `channel`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Chat {
    pub id: i64,
    #[serde(rename = "type")]
    pub kind: String,
}

impl Chat {
    /// Whether this is a one-to-one chat with a person.
    pub fn is_private(&self) -> bool {
        self.kind == "private"
    }
}

/// A message. An inaccessible message (in a callback) has `date == 0` and nothing but its chat
/// and id.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Message {
    pub message_id: i64,
    #[serde(default)]
    pub date: i64,
    pub chat: Chat,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<User>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A tap on an inline button. `data` is untrusted: a modified client can send anything.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CallbackQuery {
    pub id: String,
    pub from: User,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
}

/// One inline button.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineButton {
    pub text: String,
    pub callback_data: String,
}

/// Rows of inline buttons under a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InlineKeyboard {
    pub inline_keyboard: Vec<Vec<InlineButton>>,
}

/// `link_preview_options`: always sent with previews off, so Telegram never fetches a URL that a
/// model or a tool's arguments put in a message.
#[derive(Debug, Clone, Serialize)]
pub struct LinkPreviewOptions {
    pub is_disabled: bool,
}

/// The body of `sendMessage`.
#[derive(Debug, Clone, Serialize)]
pub struct SendMessage<'a> {
    pub chat_id: i64,
    pub text: &'a str,
    pub parse_mode: &'static str,
    pub link_preview_options: LinkPreviewOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<&'a InlineKeyboard>,
}

/// The body of `editMessageText`; without `reply_markup` the inline keyboard is removed.
#[derive(Debug, Clone, Serialize)]
pub struct EditMessageText<'a> {
    pub chat_id: i64,
    pub message_id: i64,
    pub text: &'a str,
    pub parse_mode: &'static str,
    pub link_preview_options: LinkPreviewOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_markup: Option<&'a InlineKeyboard>,
}

/// The body of `answerCallbackQuery`.
#[derive(Debug, Clone, Serialize)]
pub struct AnswerCallbackQuery<'a> {
    pub callback_query_id: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub text: &'a str,
    pub show_alert: bool,
}

/// The body of `getUpdates`.
#[derive(Debug, Clone, Serialize)]
pub struct GetUpdates {
    pub offset: i64,
    pub timeout: u64,
    pub limit: u32,
    pub allowed_updates: [&'static str; 2],
}
