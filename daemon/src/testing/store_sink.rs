//! [`StoreEventSink`]: a gate [`EventSink`] that writes the agent events of one session into a
//! session store, for tests that run the gate against a real store (the hub's own sink is
//! `hub::sessions::SessionRecorder`). For tests only; see ARCHITECTURE.md (store, gate).
//!
//! Invariants: events are appended in emit order, each durable when `record` returns `Ok`; a
//! failed append through `emit` is logged at WARN once per sink (and its clones), later ones at
//! DEBUG, so a broken disk does not flood the log.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;
use tracing::{debug, warn};

use crate::gate::{AgentEvent, EventSink, SinkError};
use crate::store::{SessionError, SessionStore};

/// Writes the agent events of one session into its store: it is a gate [`EventSink`] (each
/// event serialized and appended, in emit order), and [`StoreEventSink::emit_json`] appends any
/// JSON object. A failed append through the `EventSink` is logged at WARN once per sink (and its
/// clones), later ones at DEBUG, so a broken disk does not flood the log.
#[derive(Clone)]
pub struct StoreEventSink {
    pub store: Arc<dyn SessionStore>,
    pub session_id: String,
    warned: Arc<AtomicBool>,
}

impl StoreEventSink {
    pub fn new(store: Arc<dyn SessionStore>, session_id: impl Into<String>) -> Self {
        Self {
            store,
            session_id: session_id.into(),
            warned: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Appends one serialized event; durable when it returns `Ok`. The caller decides what a failure
    /// means (an approval that cannot be recorded must not be asked).
    pub fn emit_json(&self, event: Value) -> Result<(), SessionError> {
        self.store.append_event(&self.session_id, &event)
    }
}

impl EventSink for StoreEventSink {
    fn record(&self, event: AgentEvent) -> Result<(), SinkError> {
        let value = serde_json::to_value(&event).map_err(|e| SinkError(e.to_string()))?;
        self.emit_json(value).map_err(|e| SinkError(e.to_string()))
    }

    fn emit(&self, event: AgentEvent) {
        let kind = event.kind();
        let written = match serde_json::to_value(&event) {
            Ok(value) => self.emit_json(value).map_err(|e| e.to_string()),
            Err(error) => Err(format!("cannot serialize it: {error}")),
        };
        let Err(error) = written else {
            return;
        };
        if self.warned.swap(true, Ordering::Relaxed) {
            debug!(session_id = %self.session_id, kind, "cannot record an agent event: {error}");
        } else {
            warn!(
                session_id = %self.session_id,
                kind,
                "cannot record an agent event: {error} (further failures of this session's event log are logged at debug level)"
            );
        }
    }
}

impl std::fmt::Debug for StoreEventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreEventSink")
            .field("backend", &self.store.backend_name())
            .field("session_id", &self.session_id)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_warns_once_about_failed_writes() {
        use crate::gate::ErrorEvent;
        use crate::testing::{at_level, logs_during};
        use tracing::Level;

        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn SessionStore> = Arc::new(
            crate::store::FileSessionStore::open(dir.path(), crate::store::Durability::NoSync)
                .unwrap(),
        );
        let sink = StoreEventSink::new(store, "20000101-000000-0000");
        let event = AgentEvent::Error(ErrorEvent {
            location: "tier_gate".into(),
            message: "unknown tool".into(),
            tool: None,
            tool_use_id: None,
            session_id: "20000101-000000-0000".into(),
        });
        let ((), lines) = logs_during(|| {
            for _ in 0..3 {
                sink.clone().emit(event.clone());
            }
        });
        let warnings = at_level(&lines, Level::WARN);
        assert_eq!(warnings.len(), 1, "{lines:?}");
        assert!(warnings[0].contains("cannot record an agent event"));
        assert_eq!(at_level(&lines, Level::DEBUG).len(), 2, "{lines:?}");
    }
}
