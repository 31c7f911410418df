//! The gRPC layer: the only place that sees tonic and prost. It translates between the wire API
//! (`tau_api::proto::v1`) and the hub's domain, checks who is calling, and maps errors to
//! `tonic::Status` in one place ([`errors`]).
//!
//! Layout: `tau_service` (the `tau.v1.Tau` trait impl, one line per call) delegates to `calls` and
//! `routine_calls` (the hub core call, the response or stream), which read requests with
//! `from_proto` and write answers with `to_proto` (one file per direction); `grpc_service` serves it all on
//! the socket and the TCP port behind `auth`, a caller's `grpc-timeout` applied by `deadline`.
//!
//! Invariants: no business logic here; every call over TCP carries the bearer token and every
//! call over the Unix socket comes from this user's uid.

pub mod auth;
mod calls;
pub mod deadline;
pub mod errors;
mod from_proto;
pub mod grpc_service;
mod routine_calls;
mod tau_service;
mod to_proto;
pub mod uds;

pub use grpc_service::{CoreStarter, GRPC, GrpcService, RoutesHook};
