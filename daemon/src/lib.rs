//! `taud`: the tau hub daemon as a library. It owns everything with state: the agents, the sessions,
//! the tier gate and pending approvals, the model providers and the hub lifecycle. The `taud` binary
//! is a thin `main` over this crate, so tests and benchmarks can run the same code in-process.
//!
//! Invariant: the domain modules never see tonic or prost types; only `rpc` translates.
pub mod message;
pub mod session;
