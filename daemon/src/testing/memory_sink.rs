//! [`MemorySink`]: keeps agent events in memory so tests can assert them. For tests only.
//!
//! Invariants: events are kept in emission order; `emit` never blocks beyond a short lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::gate::{AgentEvent, ApprovalEvent, ErrorEvent, EventSink, ToolCallEvent};

/// Collects every event it is given.
#[derive(Debug, Default)]
pub struct MemorySink {
    events: Mutex<Vec<AgentEvent>>,
}

impl MemorySink {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<AgentEvent>> {
        self.events.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every event so far, in order.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.lock().clone()
    }

    pub fn tool_calls(&self) -> Vec<ToolCallEvent> {
        self.lock()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolCall(call) => Some(call.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn approvals(&self) -> Vec<ApprovalEvent> {
        self.lock()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Approval(approval) => Some(approval.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn errors(&self) -> Vec<ErrorEvent> {
        self.lock()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Error(error) => Some(error.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn clear(&self) {
        self.lock().clear();
    }
}

impl EventSink for MemorySink {
    fn emit(&self, event: AgentEvent) {
        self.lock().push(event);
    }
}
