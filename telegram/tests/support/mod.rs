//! Helpers shared by the test modules of `all.rs`; each module uses a part of them.
#![allow(dead_code)]

pub mod fake_bot;
pub mod hub;
pub mod logs;
