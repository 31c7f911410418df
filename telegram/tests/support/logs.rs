//! Log lines captured in memory, for tests that assert what the channel logs (and never logs).
//!
//! The capturing subscriber is the current thread's default, so a test that reads it runs on one
//! thread (`#[tokio::test]`), where every task of the hub and the channel runs too.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing::Dispatch;
use tracing::subscriber::{DefaultGuard, NoSubscriber};

/// A writer into a shared buffer.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

/// Keeps the capture on while it lives.
pub struct Capturing {
    _default: DefaultGuard,
    _second: Dispatch,
}

impl Captured {
    /// Captures every log line of this thread, at every level, until the guard drops.
    ///
    /// tracing caches whether a log call site is wanted once for the whole process, and while a
    /// single dispatcher exists it asks only the thread that reaches the call site first: a test
    /// running beside this one without a subscriber would switch the channel's call sites off
    /// for it. A second, silent dispatcher makes tracing ask every dispatcher instead.
    pub fn start() -> (Self, Capturing) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .finish();
        let guard = Capturing {
            _default: tracing::subscriber::set_default(subscriber),
            _second: Dispatch::new(NoSubscriber::default()),
        };
        (captured, guard)
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
