//! The property tests and hostile-input cases of taud (the store, the API over a socket, ids at
//! their limits), in their own binary: `support::props::panics` counts every panic in the process,
//! so no test that panics on purpose may share it.

// Test code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod hub_extreme_ids;
mod props_rpc;
mod props_rpc_raw;
mod props_store;
mod props_store_hub;
