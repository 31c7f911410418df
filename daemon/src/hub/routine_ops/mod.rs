//! The hub's **routine_ops** sub-room: the routines as the hub serves and fires them (the engine
//! itself is the `routine` room).
//!
//! - [`routine_api`]: the routine calls `HubCore` delegates to (list, add, remove, pause, run now,
//!   history, status), the engine's start with the hub ([`start_routines`]) and what
//!   `schedule_routine` proposes ([`HubRoutineProposer`]).
//! - [`routine_runner`]: how a routine fires: a prompt as an unattended turn on the routine's own
//!   session, a tool through that session's gate (`HubRoutineRunner`).
//!
//! May import (in the hub): `sessions` (a routine's turn is a session's turn), `events`, `error`,
//! `limits`, `builtin_tools`; never `core` or `approvals` (a routine's question is asked by its
//! session's gate like any other).
//!
//! Invariants: a routine holds only a weak reference to the core's state, so the engine never
//! keeps a stopped hub alive; a turn a routine starts is nobody's attachment and decides nothing;
//! a routines file that cannot be read leaves routines off, never stops the hub.
mod routine_api;
mod routine_runner;

pub use routine_api::{AddRoutine, ManualRun, RoutineStatus};
pub(in crate::hub) use routine_api::{
    HubRoutineProposer, add_routine, list_routines, pause_routine, remove_routine, routine_history,
    routine_status, run_routine, start_routines,
};
