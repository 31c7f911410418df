//! The `tau` binary's integration tests, in one binary so it is built once: each module below keeps
//! its own `//!` saying what it covers.

// Test code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod ask_fake_hub;
mod chat_fake_hub;
mod chat_resume_replay;
mod closed_stdout;
mod components;
mod doctor;
mod doctor_files;
mod doctor_node;
mod init;
mod logging;
mod plugin_commands;
mod shell_docs;
mod telegram_cli;
mod tui_fake_hub;
mod turn_start;
