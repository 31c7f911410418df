//! A local fake of the Telegram Bot API (axum on 127.0.0.1:0): scripted updates, long polls held
//! until an update arrives or their timeout passes, message ids it assigns itself, a log of every
//! request, and failure scripts per method (429 with retry_after, 409, 400, 500, a hang).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Notify;

pub const TEST_TOKEN: &str = "123456:TEST-token-SECRET-xyz";
pub const OWNER: i64 = 4242;
pub const STRANGER: i64 = 6666;
pub const DEADLINE: Duration = Duration::from_secs(20);

/// How a scripted call fails.
#[derive(Debug, Clone)]
pub enum Failure {
    TooMany { retry_after: u64 },
    Conflict,
    Bad(&'static str),
    Server,
    Hang(Duration),
}

/// A message the bot sent, as it stands now.
#[derive(Debug, Clone)]
pub struct Sent {
    pub message_id: i64,
    pub chat_id: i64,
    pub text: String,
    pub keyboard: Option<Value>,
    pub edits: usize,
}

#[derive(Default)]
struct Inner {
    updates: VecDeque<Value>,
    next_update_id: i64,
    next_message_id: i64,
    sent: Vec<Sent>,
    log: Vec<(String, Value, Instant)>,
    failures: HashMap<String, VecDeque<Failure>>,
    polling: bool,
}

#[derive(Clone)]
pub struct FakeBot {
    inner: Arc<Mutex<Inner>>,
    notify: Arc<Notify>,
    pub base: String,
}

impl FakeBot {
    pub async fn start() -> Self {
        let bot = FakeBot {
            inner: Arc::new(Mutex::new(Inner {
                next_update_id: 1000,
                next_message_id: 1,
                ..Inner::default()
            })),
            notify: Arc::new(Notify::new()),
            base: String::new(),
        };
        let app = axum::Router::new()
            .route("/{segment}/{method}", axum::routing::post(handle))
            .with_state(bot.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeBot {
            base: format!("http://{addr}"),
            ..bot
        }
    }

    fn push(&self, mut update: Value) -> i64 {
        let id = {
            let mut inner = self.inner.lock().unwrap();
            let id = inner.next_update_id;
            inner.next_update_id += 1;
            update["update_id"] = json!(id);
            inner.updates.push_back(update);
            id
        };
        self.notify.notify_waiters();
        id
    }

    /// A text message from `user` in `chat` (`private` or `group`).
    pub fn push_text(&self, user: i64, chat: i64, chat_type: &str, text: &str) -> i64 {
        self.push(json!({"message": {
            "message_id": 90_000 + self.inner.lock().unwrap().next_update_id,
            "date": 1_700_000_000,
            "chat": {"id": chat, "type": chat_type},
            "from": {"id": user, "is_bot": false, "first_name": "x"},
            "text": text,
        }}))
    }

    /// The owner writes in their private chat.
    pub fn owner_says(&self, text: &str) -> i64 {
        self.push_text(OWNER, OWNER, "private", text)
    }

    /// [`FakeBot::owner_says`] in an update whose id is `update_id`, as a hostile server might
    /// number it; the ids of later updates go on as before.
    pub fn owner_says_as(&self, update_id: i64, text: &str) {
        let update = json!({"update_id": update_id, "message": {
            "message_id": 80_000,
            "date": 1_700_000_000,
            "chat": {"id": OWNER, "type": "private"},
            "from": {"id": OWNER, "is_bot": false, "first_name": "x"},
            "text": text,
        }});
        self.inner.lock().unwrap().updates.push_back(update);
        self.notify.notify_waiters();
    }

    /// A tap by `user` on message `message_id` of `chat` with `data`; `date` 0 makes the message
    /// inaccessible.
    pub fn push_tap(&self, user: i64, chat: i64, message_id: i64, date: i64, data: &str) -> i64 {
        let n = self.inner.lock().unwrap().next_update_id;
        self.push(json!({"callback_query": {
            "id": format!("cb-{n}"),
            "from": {"id": user, "is_bot": false, "first_name": "x"},
            "message": {"message_id": message_id, "date": date, "chat": {"id": chat, "type": "private"}},
            "chat_instance": "ci",
            "data": data,
        }}))
    }

    /// Scripts the next calls of `method` to fail, in order.
    pub fn fail(&self, method: &str, failures: impl IntoIterator<Item = Failure>) {
        self.inner
            .lock()
            .unwrap()
            .failures
            .entry(method.to_ascii_lowercase())
            .or_default()
            .extend(failures);
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.inner.lock().unwrap().sent.clone()
    }

    pub fn message(&self, id: i64) -> Sent {
        self.sent()
            .into_iter()
            .find(|m| m.message_id == id)
            .unwrap()
    }

    /// Every request of `method` (case-insensitive), with its body.
    pub fn requests(&self, method: &str) -> Vec<Value> {
        self.inner
            .lock()
            .unwrap()
            .log
            .iter()
            .filter(|(m, _, _)| m.eq_ignore_ascii_case(method))
            .map(|(_, body, _)| body.clone())
            .collect()
    }

    /// How many cards (messages with buttons) were sent.
    pub fn cards_sent(&self) -> usize {
        self.requests("sendMessage")
            .iter()
            .filter(|b| b.get("reply_markup").is_some())
            .count()
    }

    /// When each request of `method` arrived.
    pub fn request_times(&self, method: &str) -> Vec<Instant> {
        self.inner
            .lock()
            .unwrap()
            .log
            .iter()
            .filter(|(m, _, _)| m.eq_ignore_ascii_case(method))
            .map(|(_, _, at)| *at)
            .collect()
    }

    /// Updates not yet confirmed by a later offset.
    pub fn unconfirmed(&self) -> usize {
        self.inner.lock().unwrap().updates.len()
    }

    /// Waits until `cond` holds on the fake's messages.
    pub async fn wait_for<T>(&self, what: &str, mut cond: impl FnMut(&FakeBot) -> Option<T>) -> T {
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(value) = cond(self) {
                return value;
            }
            assert!(Instant::now() < end, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for a card (a message with buttons) whose text contains `needle`.
    pub async fn wait_for_card(&self, needle: &str) -> Sent {
        self.wait_for("an approval card", |bot| {
            bot.sent()
                .into_iter()
                .find(|m| m.keyboard.is_some() && m.text.contains(needle))
        })
        .await
    }

    /// Waits until a message's text contains `needle`.
    pub async fn wait_for_text(&self, needle: &str) -> Sent {
        self.wait_for(&format!("a message with {needle:?}"), |bot| {
            bot.sent().into_iter().find(|m| m.text.contains(needle))
        })
        .await
    }
}

/// The card's callback data for `letter` (`a` or `r`).
pub fn button(card: &Sent, letter: &str) -> String {
    let rows = card.keyboard.as_ref().unwrap()["inline_keyboard"][0]
        .as_array()
        .unwrap()
        .clone();
    rows.iter()
        .map(|b| b["callback_data"].as_str().unwrap().to_owned())
        .find(|d| d.ends_with(&format!(":{letter}")))
        .unwrap()
}

fn ok(result: Value) -> Response {
    Json(json!({"ok": true, "result": result})).into_response()
}

fn error(status: StatusCode, description: &str, parameters: Option<Value>) -> Response {
    let mut body = json!({"ok": false, "error_code": status.as_u16(), "description": description});
    if let Some(p) = parameters {
        body["parameters"] = p;
    }
    (status, Json(body)).into_response()
}

async fn handle(
    State(bot): State<FakeBot>,
    Path((segment, method)): Path<(String, String)>,
    Json(body): Json<Value>,
) -> Response {
    if segment != format!("bot{TEST_TOKEN}") {
        return error(StatusCode::UNAUTHORIZED, "Unauthorized", None);
    }
    let method = method.to_ascii_lowercase();
    let failure = {
        let mut inner = bot.inner.lock().unwrap();
        inner
            .log
            .push((method.clone(), body.clone(), Instant::now()));
        inner
            .failures
            .get_mut(&method)
            .and_then(VecDeque::pop_front)
    };
    match failure {
        Some(Failure::TooMany { retry_after }) => {
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                "Too Many Requests: retry later",
                Some(json!({"retry_after": retry_after})),
            );
        }
        Some(Failure::Conflict) => {
            return error(
                StatusCode::CONFLICT,
                "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                None,
            );
        }
        Some(Failure::Bad(description)) => {
            return error(StatusCode::BAD_REQUEST, description, None);
        }
        Some(Failure::Server) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Internal Server Error",
                None,
            );
        }
        Some(Failure::Hang(for_how_long)) => tokio::time::sleep(for_how_long).await,
        None => {}
    }
    match method.as_str() {
        "getupdates" => get_updates(&bot, &body).await,
        "sendmessage" => {
            let mut inner = bot.inner.lock().unwrap();
            let id = inner.next_message_id;
            inner.next_message_id += 1;
            let chat_id = body["chat_id"].as_i64().unwrap();
            inner.sent.push(Sent {
                message_id: id,
                chat_id,
                text: body["text"].as_str().unwrap_or("").to_owned(),
                keyboard: body.get("reply_markup").cloned(),
                edits: 0,
            });
            ok(
                json!({"message_id": id, "date": 1_700_000_001, "chat": {"id": chat_id, "type": "private"}}),
            )
        }
        "editmessagetext" => {
            let mut inner = bot.inner.lock().unwrap();
            let id = body["message_id"].as_i64().unwrap();
            let Some(sent) = inner.sent.iter_mut().find(|m| m.message_id == id) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: message to edit not found",
                    None,
                );
            };
            let text = body["text"].as_str().unwrap_or("").to_owned();
            let keyboard = body.get("reply_markup").cloned();
            if sent.text == text && sent.keyboard == keyboard {
                return error(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: message is not modified",
                    None,
                );
            }
            sent.text = text;
            sent.keyboard = keyboard;
            sent.edits += 1;
            ok(
                json!({"message_id": id, "date": 1_700_000_001, "chat": {"id": sent.chat_id, "type": "private"}}),
            )
        }
        "answercallbackquery" | "deletewebhook" | "leavechat" => ok(json!(true)),
        _ => error(StatusCode::NOT_FOUND, "Not Found", None),
    }
}

async fn get_updates(bot: &FakeBot, body: &Value) -> Response {
    let offset = body["offset"].as_i64().unwrap_or(0);
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0));
    let limit = body["limit"].as_u64().unwrap_or(100) as usize;
    {
        let mut inner = bot.inner.lock().unwrap();
        if inner.polling {
            return error(
                StatusCode::CONFLICT,
                "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                None,
            );
        }
        inner.polling = true;
    }
    // A poll the client gave up on (dropped) ends here too.
    let _guard = PollGuard(Arc::clone(&bot.inner));
    let end = tokio::time::Instant::now() + timeout;
    let result = loop {
        let notified = bot.notify.notified();
        {
            let mut inner = bot.inner.lock().unwrap();
            inner
                .updates
                .retain(|u| u["update_id"].as_i64().unwrap() >= offset);
            if !inner.updates.is_empty() || tokio::time::Instant::now() >= end {
                break inner
                    .updates
                    .iter()
                    .take(limit)
                    .cloned()
                    .collect::<Vec<_>>();
            }
        }
        let _ = tokio::time::timeout_at(end, notified).await;
    };
    ok(Value::Array(result))
}

struct PollGuard(Arc<Mutex<Inner>>);

impl Drop for PollGuard {
    fn drop(&mut self) {
        if let Ok(mut inner) = self.0.lock() {
            inner.polling = false;
        }
    }
}
