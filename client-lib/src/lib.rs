//! `tau-client`: what every client of the hub shares, so `tau chat`, `tau tui`, `tau ask` and
//! tau-telegram reach the hub, relay a turn, decide an approval and show an event one way.
//!
//! - [`connect`]: the one gRPC connect (the Unix socket, or 127.0.0.1 with the bearer token),
//!   every attempt under a deadline.
//! - [`feed`] and [`relay`]: one turn's events (resumed after a cut-off) handed to a client's
//!   [`relay::Front`], its approvals asked while the feed is read, decisions sent, Ctrl-C cancels.
//! - [`call`]: one-shot hub calls with a deadline, and Ctrl-C ([`call::Interrupts`]);
//!   [`approvals`]: deciding an approval and listing the pending ones, each call with a deadline.
//! - [`present`]: one presenter that turns a live `SessionEvent` and a stored event into the same
//!   typed, translated [`present::Line`]s; [`sanitize`]: what makes hub text safe to print.
//!
//! Invariants: nothing here decides an approval (a decision is what a person answered, relayed);
//! nothing prints or reads the terminal (a front does); nothing links `taud`; every wait on the
//! hub has a deadline or gives way to a cancel; no global state (only the SIGINT listener a
//! front asks for, [`call::Interrupts`]).

pub mod approvals;
pub mod call;
pub mod connect;
pub mod feed;
pub mod present;
pub mod relay;
pub mod sanitize;
