//! Test doubles for the agent core, public (not `cfg(test)`) so end-to-end tests, benchmarks and the
//! offline `fake` provider can use them. Apart from [`FakeModel::demo`] (the offline demo model),
//! everything here is for tests only: [`ScriptedApprover`] approves exactly what its script says,
//! [`UnansweredApprover`] never answers, [`MemorySink`] keeps events in memory, `logs_during` (unit
//! tests only) captures what is logged.
//!
//! Invariants: nothing here approves on its own (ARCHITECTURE.md: "no test approves without a
//! scripted decision"); nothing here touches the network, the file system or global state.

mod approvers;
mod demo;
mod fake_model;
#[cfg(test)]
mod logs;
mod sink;

pub use approvers::{ScriptedAnswer, ScriptedApprover, UnansweredApprover};
pub use fake_model::{FakeModel, FakeReply};
#[cfg(test)]
pub use logs::{LogLine, at_level, logs_during};
pub use sink::MemorySink;
