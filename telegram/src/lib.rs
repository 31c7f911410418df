//! tau's Telegram channel: one more client of the hub's gRPC API, over the hub's own socket, on
//! channel `telegram`, so every rule of the tier gate holds unchanged. It long-polls the Bot API
//! (a hand-rolled client over reqwest), answers only its owner (numeric user and chat ids, bound
//! with a one-time code from `tau telegram pair`), runs each owner message as a turn of the chat's
//! session, and shows tier-2 approvals as cards with Reject and Approve buttons: its own turns'
//! and every other question asked on channel `telegram` (a routine's).
//!
//! The hub runs it ([`run_channel`]) and supervises it; `tau telegram` reads and writes the same
//! state files ([`state`]).
//!
//! Invariants: the bot token is never logged and never in an error; nothing here depends on
//! `taud`; the channel decides nothing itself: the hub's verdict is what a card shows.

pub mod bot_api;
mod channel;
pub mod hub_link;
pub mod render;
pub mod state;
pub mod texts;

pub use channel::{ChannelError, ChannelOptions, ChannelPhase, run_channel};
