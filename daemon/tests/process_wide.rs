//! taud's tests of process-wide state, in a binary of their own so no other test shares the
//! process: the panic hook (`panic_hook`) and the tracing dispatch whose span interest is cached
//! per process (`hub_trace_spans`: another test's spans, hit first with no subscriber, could leave
//! a span's callsite switched off for this test's scoped subscriber).

// Test code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod hub_trace_spans;
mod panic_hook;
