//! The `fake` provider: [`FakeModel`], the offline model. In the hub it is the demo
//! ([`FakeModel::demo`]: a tiny rule set in English and Turkish, see [`demo`]), used when no
//! credentials or configuration exist; in tests it answers from a script of [`FakeReply`]s.
//!
//! Invariants: it never touches the network; the demo keeps nothing per call, so a hub can run on
//! it for months.

mod demo;
mod reply;
mod scripted;

pub use reply::FakeReply;
pub use scripted::FakeModel;
