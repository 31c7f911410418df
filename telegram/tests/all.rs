//! tau-telegram's integration tests, in one binary: each module below keeps its own `//!` saying
//! what it covers.

// Test code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod channel_approvals;
mod channel_conversation;
mod channel_polling;
mod channel_routines;
