//! Test doubles for the agent core, compiled only for tests, benchmarks and the `testing` feature
//! (never into the `taud` binary): [`ScriptedApprover`] approves exactly what its script says,
//! [`UnansweredApprover`] never answers, [`MemorySink`] keeps events in memory, `logs_during` (unit
//! tests only) captures what is logged, [`StoreEventSink`] writes gate events into a session
//! store it is given. [`FakeModel`] and [`FakeReply`] are re-exported from the `fake` provider
//! (`crate::provider::fake`), where the offline demo model lives.
//!
//! Invariants: nothing here approves on its own (ARCHITECTURE.md: "no test approves without a
//! scripted decision"); nothing here touches the network, global state or, except through a
//! store a test hands it, the file system.

mod approvers;
#[cfg(test)]
mod logs;
mod memory_sink;
mod store_sink;

pub use crate::provider::fake::{FakeModel, FakeReply};
pub use approvers::{ScriptedAnswer, ScriptedApprover, UnansweredApprover};
#[cfg(test)]
pub use logs::{LogLine, at_level, logs_during};
pub use memory_sink::MemorySink;
pub use store_sink::StoreEventSink;
