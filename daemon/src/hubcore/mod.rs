//! The hub's domain core: what the gRPC layer serves, free of tonic and prost types.
//!
//! - [`event`]: the events of a session as clients see them; [`bus`]: one session's numbered event
//!   stream with replay and slow-subscriber cut-off.
//! - [`approvals`]: pending tier-2 approvals as entities, and the client attachments that may
//!   decide them; [`approver`]: the gate's approver that registers and waits.
//!
//! Invariants: no global state (everything hangs off values the hub owns and passes down); no lock
//! is held across an `.await`; lock order is bus, then registry.
pub mod approvals;
pub mod approver;
pub mod bus;
pub mod event;
pub mod ids;

pub use approvals::{
    ApprovalAnswer, ApprovalRegistry, Attachment, DecideError, DecideOutcome, PendingTicket,
};
pub use approver::{ApprovalReadiness, FLUSH_WAIT, HUB_APPROVER, HubApprover, TurnSlot};
pub use bus::{EventBus, Lagged, SubscribeError, Subscription};
pub use event::{EventKind, PendingInfo, Resolution, SessionEvent, TurnInfo};
