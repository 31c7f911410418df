//! The hub's **sessions** sub-room: the sessions the hub holds in memory and everything that runs
//! in one: its agent, its turns, the worker that runs them, and the calls on sessions and turns
//! that `HubCore` delegates to.
//!
//! - The calls: [`session_api`] (list, get, open, switch role, compact, read events) and
//!   [`streams`] (start and cancel turns, a turn in a new session, subscribe, and the [`TurnStream`] and [`EventStream`] a
//!   watching client holds).
//! - The state they share: `core_state` ([`CoreState`]: what building an agent needs, the open
//!   sessions, the channels' last listings, this process's event numbering, the stop token, the
//!   routine engine) and [`CoreState::runtime`], the one way a session enters memory (a session
//!   just created enters by `CoreState::runtime_of_created`, the same path without the reads).
//! - In memory: `open_sessions` ([`OpenSessions`], within a cap, and the one retire path by which a
//!   session leaves memory), used by `supervise` (a dead worker takes its session out of memory),
//!   `reaper` (idle sessions, with a timer only while any is open) and shutdown; `remembered`
//!   (bounded memories: last seqs, listings).
//! - One open session: `runtime` ([`SessionRuntime`](runtime::SessionRuntime): agent slot, turns, bus, when last used),
//!   its agent from `agent_build` ([`AgentParts`], `build_agent`), its turns in `turn_queue`
//!   ([`TurnQueue`](turn_queue::TurnQueue): accept, cancel, start, finish, close; over `turn_table`'s
//!   [`TurnTable`](turn_table::TurnTable)), run
//!   by `worker` (`run_worker`), written to the store by `recorder` ([`SessionRecorder`]).
//!
//! May import (in the hub): `events`, `approvals`, `error`, `ids`, `limits`, `options`,
//! `builtin_tools`; never `core` or `routine_ops` (the routines use sessions, not the reverse).
//!
//! Invariants:
//! - One agent per open session; sessions are opened on demand ([`CoreState::runtime`]) and leave
//!   memory only through `OpenSessions`' retire path; a session that does not exist gets nothing
//!   made for it.
//! - The turns of a session run one at a time in the order accepted; each gets exactly one
//!   `TurnEnded`; a turn belongs to the worker, not the client.
//! - Lock order: bus, then turn table or approval registry; no std lock is held across an
//!   `.await`; every store call runs on a blocking thread (or through `store_io`).
mod agent_build;
mod core_state;
mod open_sessions;
mod reaper;
mod recorder;
mod remembered;
mod runtime;
pub mod session_api;
pub mod streams;
mod supervise;
mod turn_queue;
mod turn_table;
mod worker;

pub(crate) use agent_build::AgentParts;
pub(crate) use core_state::CoreState;
pub(crate) use open_sessions::OpenSessions;
pub(in crate::hub) use reaper::spawn_reaper;
pub use recorder::SessionRecorder;
pub(crate) use remembered::{ChannelListings, NewSessionKeys};
#[cfg(test)]
pub(crate) use runtime::SessionRuntime;
pub use session_api::{
    Compacted, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MessageSelection, OpenTarget, Opened, RoleSwitch,
    SessionDetail, SessionSummary,
};
pub(in crate::hub) use session_api::{
    compact, get_session, get_session_with, list_sessions, open_session, read_events, summary,
    switch_role,
};
pub use streams::{EventStream, Snapshot, StartTurn, TurnStream};
pub(in crate::hub) use streams::{cancel_turn, start_turn, start_turn_in_new_session, subscribe};
pub use turn_queue::Accepted;
