//! `taud`: the tau hub daemon as a library. It owns everything with state: the agents, the sessions,
//! the tier gate and pending approvals, the model providers and the hub lifecycle. The `taud` binary
//! is a thin `main` over this crate, so tests and benchmarks can run the same code in-process.
//!
//! Invariant: the domain modules never see tonic or prost types; only `rpc` translates.
//!
//! The `hub` feature (on by default) builds what only a hub runs: the web client (`web`), the
//! Telegram channel (`host::telegram_channel`) and the SQLite store; without it, `taud` runs only
//! as a node.
pub mod agent;
pub mod clock;
pub mod context;
pub mod gate;
pub mod host;
pub mod hub;
pub mod link;
pub mod listen;
pub mod mcp;
pub mod message;
pub mod model;
pub mod node;
pub mod persona;
pub mod provider;
pub mod routine;
pub mod rpc;
pub mod services;
pub mod spend;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tool;
#[cfg(feature = "hub")]
pub mod web;
