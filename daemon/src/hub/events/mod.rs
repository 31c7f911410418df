//! The hub's **events** sub-room: what happens in a session as the hub tells its clients, and how
//! it gets to them.
//!
//! - [`event`]: [`SessionEvent`] (one numbered event), its [`EventKind`]s and the small value types
//!   they carry ([`TurnInfo`], [`PendingInfo`]); [`shown_arguments`], a `tool_call`'s arguments as
//!   a person sees them.
//! - [`bus`]: [`EventBus`], one session's numbered event stream with a bounded replay buffer and
//!   slow subscribers cut off with [`Lagged`].
//!
//! May import (in the hub): nothing; everything else in the hub is built on it. Outside the hub:
//! `agent`, `gate` and `tool`, for the vocabulary events carry.
//!
//! Invariants: events are domain types (no tonic, no prost) and immutable once published; `seq`
//! is assigned by the session's bus only, contiguous from 1 within one hub process; publishing
//! never waits on a subscriber; the bus lock may be held while taking another hub lock, never the
//! reverse.
pub mod bus;
pub mod event;

pub use bus::{
    DEFAULT_REPLAY_BUFFER, DEFAULT_SUBSCRIBER_LAG, EventBus, IDLE_REPLAY_BYTES, Lagged,
    REPLAY_BUFFER_BYTES, SubscribeError, Subscription,
};
pub use event::{EventKind, PendingInfo, SessionEvent, TurnInfo, now_rfc3339, shown_arguments};
