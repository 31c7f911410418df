//! Helpers shared by taud's test binaries (`all.rs`, `props.rs`) and, through `#[path]`, by its
//! benchmarks. Each binary uses a part of them.
#![allow(dead_code)]

pub mod agent;
pub mod api;
pub mod hooked_store;
pub mod hub;
pub mod mcp;
pub mod nodes;
pub mod process;
pub mod props;
pub mod provider;
pub mod soak;
pub mod store;
pub mod temp;
pub mod web;
pub mod window;
