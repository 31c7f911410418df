//! The hub's domain core: sessions, turns, live events and pending approvals, as the rpc layer
//! serves them; free of tonic and prost types.
//!
//! - [`core`]: [`HubCore`], the front door: it builds, starts and stops the core, and every call
//!   is a one-line delegation to the part below that owns it; no part imports it.
//!   `core_state`: the state those parts share (`CoreState`: what building an agent needs, the
//!   open sessions, listings, the stop token, the routine engine) and the one way a session
//!   enters memory.
//! - [`sessions`]: list, get, open, switch role, compact, read events; [`streams`]: start and
//!   cancel turns and subscribe, and what a watching client holds.
//! - `runtime`: one open session (its agent and turn table), its catalog from the hub's shared
//!   `builtin_tools` (which also lists the tools, `ListTools`); [`turns`]: the turn queue and the
//!   worker that runs turns and publishes their events; [`recorder`]: the store-backed history
//!   observer and event sink of an agent; `crate::context::modes`: what the model sees of a
//!   session under each `[agent] context` mode.
//! - [`event`]: the events of a session as clients see them; [`bus`]: one session's numbered event
//!   stream with replay and slow-subscriber cut-off.
//! - [`approvals`]: pending tier-2 approvals as entities, the client attachments that may decide
//!   them, the path of a decision (`approvals::decide`: `decide_request`, the winner, and
//!   [`ClientApprover`], the gate's approver that registers and waits) and who watches them
//!   (`approvals::watch`); [`restart`]: approvals an earlier hub left pending, expired at start
//!   and read back for a late decision; [`scan_mark`]: when that scan last ran, so a start reads
//!   only the sessions that could hold one.
//! - `open_sessions`: the sessions in memory (within a cap), their remembered last seqs, and
//!   the one retire path by which a session leaves memory, used by `supervise` (a dead worker
//!   takes its session out of memory), `reaper` (idle sessions, with a timer only while any is
//!   open) and shutdown.
//! - `routine_api`: the routine calls, the engine's start and `schedule_routine`'s proposals;
//!   `routine_runner`: how a routine fires (a prompt as an unattended turn, a tool through the
//!   session's gate).
//! - [`options`]: what the core needs from the configuration, and the model factory seam;
//!   [`limits`]: every check on client input, with its bound; [`error`]: [`CoreError`];
//!   `spend_usage`: the spend meter; [`setup`]: how the hub starts a core.
//!
//! Invariants: no global state (everything hangs off a [`HubCore`] the hub owns); no std lock is
//! held across an `.await`; lock order is bus, then turn table or registry; no two modules here
//! import each other (the layout test checks it).
pub mod approvals;
mod builtin_tools;
pub mod bus;
pub mod core;
mod core_state;
pub mod error;
pub mod event;
pub mod ids;
pub mod limits;
mod now_facts;
mod open_sessions;
pub mod options;
mod reaper;
pub mod recorder;
mod remembered;
pub mod restart;
mod routine_api;
mod routine_runner;
mod runtime;
pub mod scan_mark;
pub mod sessions;
pub mod setup;
mod spend_usage;
pub mod streams;
mod supervise;
pub mod turn_table;
pub mod turns;

/// The approval vocabulary the hub speaks is the gate's (`crate::gate::ApprovalOutcome`, …).
pub use crate::gate::{ApprovalAnswer, ApprovalOutcome};
pub use approvals::{
    ApprovalReadiness, ApprovalRegistry, ApprovalWatch, Attachment, ClientApprover, DecideError,
    DecideOutcome, FLUSH_WAIT, HUB_APPROVER, LAG_GRACE, PendingTicket, TurnSlot,
};
pub use bus::{EventBus, Lagged, SubscribeError, Subscription};
pub use core::{HubCore, ToolSummary};
pub use error::CoreError;
pub use event::{EventKind, PendingInfo, SessionEvent, TurnInfo};
pub use limits::DEFAULT_CHANNEL;
pub use options::{
    CoreOptions, DemoModelFactory, ModelFactory, ModelFactoryError, ProviderModelFactory,
    SharedModelFactory,
};
pub use restart::ExpiredApproval;
pub use routine_api::{AddRoutine, RoutineStatus};
pub use sessions::{
    Compacted, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, MessageSelection, OpenTarget, Opened, RoleSwitch,
    SessionDetail, SessionSummary,
};
pub use setup::CoreSetup;
pub use spend_usage::{MAX_USAGE_DAYS, USAGE_TIME_ZONE};
pub use streams::{EventStream, Snapshot, StartTurn, TurnStream};
pub use turns::{Accepted, shown_arguments};
