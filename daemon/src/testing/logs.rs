//! [`logs_during`]: the log events emitted on the current thread while a closure runs, with their
//! levels, for unit tests that assert what is logged and how loudly (`cfg(test)`: it needs the
//! `tracing-subscriber` dev-dependency).
//!
//! Invariants: the capture is a thread-local default subscriber installed only for the closure
//! (no global subscriber is touched); async code is captured when it runs on this thread (a
//! current-thread runtime's `block_on` inside the closure).

use std::sync::{Arc, Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One captured log event: its level and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub level: Level,
    pub message: String,
}

struct Capture(Arc<Mutex<Vec<LogLine>>>);

struct MessageField(String);

impl Visit for MessageField {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut message = MessageField(String::new());
        event.record(&mut message);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(LogLine {
                level: *event.metadata().level(),
                message: message.0,
            });
    }
}

/// Runs `f` and returns its result with every log event it emitted on this thread, in order.
pub fn logs_during<R>(f: impl FnOnce() -> R) -> (R, Vec<LogLine>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Capture(Arc::clone(&lines)));
    let result = tracing::subscriber::with_default(subscriber, f);
    let captured = lines.lock().unwrap_or_else(PoisonError::into_inner).clone();
    (result, captured)
}

/// The messages of the lines at `level`.
pub fn at_level(lines: &[LogLine], level: Level) -> Vec<String> {
    lines
        .iter()
        .filter(|line| line.level == level)
        .map(|line| line.message.clone())
        .collect()
}
