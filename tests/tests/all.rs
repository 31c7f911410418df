//! tau's end-to-end tests over real sockets and the real binaries, in one binary: each module
//! below keeps its own `//!` saying what it covers.

// Test code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod ask;
mod chat;
mod chat_local_models;
mod chat_mcp;
mod cli;
mod hub;
mod layout;
mod node_client;
mod python_client;
mod routines;
mod tui;
mod usage;
mod web_browser;
