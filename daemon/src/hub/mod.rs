//! The hub's domain core: sessions, turns, live events, pending approvals and routines, as the rpc
//! layer serves them; free of tonic and prost types.
//!
//! The front door is [`core`]: [`HubCore`] builds, starts and stops the core, and every call is a
//! one-line delegation to the sub-room that owns it. The sub-rooms, each a directory whose
//! `mod.rs` says what it owns, what it may import and what it keeps true, from the bottom up:
//! - [`events`]: the events of a session as clients see them ([`SessionEvent`]) and one session's
//!   numbered event stream ([`EventBus`]). Imports nothing else of the hub.
//! - [`approvals`]: pending tier-2 approvals as entities ([`ApprovalRegistry`]), the client
//!   attachments that may decide them, the path of a decision (`approvals::decide`) and who
//!   watches them; approvals an earlier hub left pending (`approvals::restart`) and the scan mark
//!   that says where to look for them (`approvals::scan_mark`). Imports `events`.
//! - [`sessions`]: the sessions in memory, one agent and one turn queue each, the worker that runs
//!   their turns, the recorder that stores what they say, and the session and turn calls
//!   (`sessions::session_api`, `sessions::streams`). Imports `events` and `approvals`.
//! - [`routine_ops`]: the routine calls and how the hub fires a routine (a prompt as an
//!   unattended turn, a tool through the session's gate). Imports `sessions` and `events`.
//!
//! Shared by them, one file each: [`options`] (what the core needs from the configuration, and the
//! model factory seam), [`limits`] (every check on client input, with its bound), [`error`]
//! ([`CoreError`]), [`ids`], `builtin_tools` (the tools built into the hub, made once and shared by
//! every session's catalog; also `ListTools`). Used only to assemble the core: `now_facts` (what
//! the hub tells the persona's `## Now` block), `spend_usage` (the spend meter) and [`setup`]
//! ([`CoreSetup`]: how the hub starts a core).
//!
//! Invariants: no global state (everything hangs off a [`HubCore`] the hub owns); no std lock is
//! held across an `.await`; lock order is bus, then turn table or registry; no sub-room imports
//! `core`, and the sub-rooms import each other only downwards in the order above (the layout test,
//! `tests/tests/layout.rs`, checks both, and that no two modules here import each other).
pub mod approvals;
mod builtin_tools;
pub mod core;
pub mod error;
pub mod events;
pub mod ids;
pub mod limits;
mod now_facts;
pub mod options;
pub mod routine_ops;
pub mod sessions;
pub mod setup;
mod spend_usage;

/// The approval vocabulary the hub speaks is the gate's (`crate::gate::ApprovalOutcome`, …).
pub use crate::gate::{ApprovalAnswer, ApprovalOutcome};
pub use approvals::{
    ApprovalReadiness, ApprovalRegistry, ApprovalWatch, Attachment, ClientApprover, DecideError,
    DecideOutcome, ExpiredApproval, FLUSH_WAIT, HUB_APPROVER, LAG_GRACE, PendingTicket, TurnSlot,
};
/// Where the restart scan lived before the sub-rooms: `hub::restart`, `hub::scan_mark`.
pub use approvals::{restart, scan_mark};
pub use core::{HubCore, ToolSummary};
pub use error::CoreError;
pub use events::{
    EventBus, EventKind, Lagged, PendingInfo, SessionEvent, SubscribeError, Subscription, TurnInfo,
    shown_arguments,
};
pub use limits::DEFAULT_CHANNEL;
pub use options::{
    CoreOptions, DemoModelFactory, ModelFactory, ModelFactoryError, ProviderModelFactory,
    SharedModelFactory,
};
pub use routine_ops::{AddRoutine, RoutineStatus};
pub use sessions::{
    Accepted, Compacted, DEFAULT_PAGE_SIZE, EventStream, MAX_PAGE_SIZE, MessageSelection,
    OpenTarget, Opened, RoleSwitch, SessionDetail, SessionSummary, Snapshot, StartTurn, TurnStream,
};
pub use setup::CoreSetup;
pub use spend_usage::{MAX_USAGE_DAYS, USAGE_TIME_ZONE};
