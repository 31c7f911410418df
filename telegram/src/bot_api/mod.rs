//! The Telegram Bot API as the channel uses it: a hand-rolled client over the workspace's reqwest
//! ([`BotClient`]) and the handful of types it sends and reads.
//!
//! Invariants: nothing here logs, and no error carries the request URL (the token is in its path);
//! no wait a 429 asks for exceeds [`MAX_RETRY_AFTER`].

mod client;
pub mod types;

pub use client::{BotClient, BotError, ClientBuildError, MAX_RETRY_AFTER};
