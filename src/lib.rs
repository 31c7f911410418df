//! `tau-api`: the wire API of tau (generated from `proto/tau/v1`) and everything the hub (`taud`) and
//! its clients (`tau`, scripts, other channels) share: paths, the `tau.toml` model, the UI message
//! table, slash commands and logging set-up.
//!
//! Invariant: nothing here starts a task, opens a socket or holds global mutable state; it is data,
//! parsing and formatting only, so a client pays for none of the daemon.

pub mod codec;
pub mod durable_file;
pub mod hub_files;

pub mod proto {
    //! Code generated from `proto/tau/v1/*.proto` by `build.rs`.
    #![allow(clippy::all, clippy::unwrap_used, clippy::expect_used, missing_docs)]
    // The .proto comments are written for people reading the .proto (`<role>`, bare URLs), not
    // for rustdoc's HTML checks.
    #![allow(rustdoc::all)]

    pub mod v1 {
        tonic::include_proto!("tau.v1");

        /// Encoded `FileDescriptorSet` of the tau.v1 package, for gRPC server reflection.
        pub const FILE_DESCRIPTOR_SET: &[u8] =
            include_bytes!(concat!(env!("OUT_DIR"), "/tau_v1_descriptor.bin"));
    }
}

pub mod commands;
pub mod i18n;
pub mod lang;
pub mod logging;

/// The version of this build of tau (shared by `tau` and `taud`, which are released together).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub mod components;
pub mod config;
pub mod credentials;
pub mod display;
pub mod dotenv;
pub mod env;
pub mod error_marks;
pub mod hub_features;
pub mod installation;
pub mod mcp_names;
pub mod model_endpoints;
pub mod paths;
pub mod tiers;
