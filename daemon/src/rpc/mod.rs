//! The gRPC layer: the only place that sees tonic and prost. It translates between the wire API
//! (`tau_api::proto::v1`) and the hub's domain, checks who is calling, and maps errors to
//! `tonic::Status` in one place ([`errors`]).
//!
//! Invariants: no business logic here; every call over TCP carries the bearer token and every
//! call over the Unix socket comes from this user's uid.

pub mod auth;
mod calls;
mod convert;
pub mod errors;
pub mod grpc_service;
mod tau_service;
pub mod uds;
mod wire;

pub use grpc_service::{GRPC, GrpcService};
