//! [`SessionRecorder`]: how an open session's agent writes to the session store. It is the agent's
//! [`HistoryObserver`] (every message, before it enters the agent's memory) and the gate's
//! [`EventSink`] (every `tool_call`, `approval` and `error` event, into the session's events), and
//! the turn worker's `turn_stopped` / `turn_repaired` events.
//!
//! Invariants:
//! - A message's stored id is its position in the full session: the restored window starts at
//!   `offset`, so ids continue the stored ones and a message is never overwritten.
//! - An approval's `pending` event is marked recorded (so the approver may ask) only after the store
//!   accepted it; a failed write is logged and the question is then refused. The gate records an
//!   `approved` decision through [`EventSink::record`], which reports the store's answer, so a
//!   decision that is not durable issues no permit.
//! - With a scan journal, the session is noted in it (durably) before an approval's `pending` event
//!   is stored, so a start after a crash reads this session; a note that fails refuses the question.
//! - `tool_call` records are kept for the turn worker, which publishes them in turn order; `error`
//!   events are published at once.
//! - A `tool_call` record the agent's turn hands over with [`EventSink::stage`] is not written at
//!   once: it is stored in the same write as the next record (the one that stores its tool
//!   round, as a rule, so the events cost no durable write of their own), ahead of it, so the log
//!   keeps the order events were emitted in. What is still staged when the turn ends is written by
//!   [`SessionRecorder::flush_staged`].
//! - Writes are synchronous (the store's contract); they run on the turn's task, through
//!   [`crate::store::store_io`] so a slow disk never holds up the runtime's other tasks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tracing::warn;

use crate::agent::{HistoryError, HistoryObserver};
use crate::gate::{AgentEvent, ApprovalState, EventSink, SinkError, ToolCallEvent};
use crate::hub::approvals::ScanJournal;
use crate::hub::approvals::{ApprovalReadiness, TurnSlot};
use crate::hub::events::EventBus;
use crate::hub::events::EventKind;
use crate::message::Message;
use crate::store::store_io;
use crate::store::{DEFAULT_AGENT_ID, SessionError, SessionMessage, SessionStore, now_utc};

/// Writes one open session's messages and agent events.
pub struct SessionRecorder {
    store: Arc<dyn SessionStore>,
    session_id: String,
    offset: usize,
    bus: Arc<EventBus>,
    readiness: Arc<ApprovalReadiness>,
    turn: Arc<TurnSlot>,
    tool_calls: Mutex<HashMap<String, ToolCallEvent>>,
    /// `tool_call` records waiting for the next write.
    staged: Mutex<Vec<Value>>,
    journal: Option<Arc<ScanJournal>>,
}

impl std::fmt::Debug for SessionRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRecorder")
            .field("session_id", &self.session_id)
            .field("offset", &self.offset)
            .finish()
    }
}

impl SessionRecorder {
    /// A recorder for `session_id` whose agent history starts at stored message `offset`.
    pub fn new(
        store: Arc<dyn SessionStore>,
        session_id: impl Into<String>,
        offset: usize,
        bus: Arc<EventBus>,
        readiness: Arc<ApprovalReadiness>,
        turn: Arc<TurnSlot>,
    ) -> Self {
        Self {
            store,
            session_id: session_id.into(),
            offset,
            bus,
            readiness,
            turn,
            tool_calls: Mutex::new(HashMap::new()),
            staged: Mutex::new(Vec::new()),
            journal: None,
        }
    }

    /// Notes this session in the approval scan journal before any `pending` approval is stored.
    pub fn with_journal(mut self, journal: Option<Arc<ScanJournal>>) -> Self {
        self.journal = journal;
        self
    }

    /// The stored id of the agent's first history message.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Stores a turn's `turn_stopped` or `turn_repaired` event; a failed write is logged (the turn
    /// itself already ended or began, so there is nothing to refuse).
    pub fn record_turn_event(&self, event: AgentEvent) {
        // `store_event` logs the failure; the turn goes on without the record.
        let _ = self.store_event(&event);
    }

    /// Writes the `tool_call` records still staged (a turn that ended before storing its tool
    /// results); a failed write is logged.
    pub fn flush_staged(&self) {
        let nothing_staged = self
            .staged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty();
        if !nothing_staged {
            // `store_with_staged` logs the failure.
            let _ = self.store_with_staged(Vec::new(), &[]);
        }
    }

    fn take_staged(&self) -> Vec<Value> {
        std::mem::take(&mut *self.staged.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Stores the staged events, then `records`, as one write. A failure loses the staged events
    /// too (logged): the disk refused the step they belong to.
    fn store_with_staged(
        &self,
        events: Vec<Value>,
        records: &[SessionMessage],
    ) -> Result<(), SessionError> {
        let mut batch = self.take_staged();
        let staged = batch.len();
        batch.extend(events);
        store_io(|| {
            self.store
                .append_batch(&self.session_id, DEFAULT_AGENT_ID, &batch, records)
        })
        .inspect_err(|error| {
            if staged > 0 {
                warn!(session_id = %self.session_id, count = staged, "cannot record tool_call events: {error}");
            }
        })
    }

    /// The `tool_call` record of a finished call, once.
    pub fn take_tool_call(&self, tool_use_id: &str) -> Option<ToolCallEvent> {
        self.tool_calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(tool_use_id)
    }
}

impl HistoryObserver for SessionRecorder {
    fn message_appended(&self, index: usize, message: &Message) -> Result<(), HistoryError> {
        self.store_messages((index..).zip([message]))
    }

    /// One write for the staged events and every message.
    fn messages_appended(
        &self,
        first: usize,
        messages: &[Arc<Message>],
    ) -> Result<(), HistoryError> {
        self.store_messages((first..).zip(messages.iter().map(|m| &**m)))
    }
}

impl SessionRecorder {
    /// Stores the staged events and `messages` (each with its history position) in one write.
    fn store_messages<'a>(
        &self,
        messages: impl Iterator<Item = (usize, &'a Message)>,
    ) -> Result<(), HistoryError> {
        let now = now_utc();
        let records = messages
            .map(|(index, message)| {
                let id = self
                    .offset
                    .checked_add(index)
                    .and_then(|id| u64::try_from(id).ok())
                    .ok_or_else(|| {
                        HistoryError(format!(
                            "message {index} after stored message {} has no id left",
                            self.offset
                        ))
                    })?;
                Ok(SessionMessage::new(id, message.clone(), now))
            })
            .collect::<Result<Vec<_>, HistoryError>>()?;
        self.store_with_staged(Vec::new(), &records)
            .map_err(|e| HistoryError(e.to_string()))
    }
}

impl SessionRecorder {
    /// Stores one agent event; `Err` says why it is not stored.
    fn store_event(&self, event: &AgentEvent) -> Result<(), SinkError> {
        if let (AgentEvent::Approval(approval), Some(journal)) = (event, &self.journal)
            && approval.status == ApprovalState::Pending
        {
            store_io(|| journal.note(&self.session_id)).map_err(|error| {
                warn!(session_id = %self.session_id, approval_id = %approval.approval_id, "cannot note the session in the approval scan mark, so the approval is not asked: {error}");
                SinkError(error.to_string())
            })?;
        }
        let value = self.serialize(event)?;
        self.store_with_staged(vec![value], &[]).map_err(|error| {
            warn!(session_id = %self.session_id, kind = event.kind(), "cannot record an agent event: {error}");
            SinkError(error.to_string())
        })
    }

    /// The event as stored; a failure is logged.
    fn serialize(&self, event: &AgentEvent) -> Result<Value, SinkError> {
        serde_json::to_value(event).map_err(|error| {
            warn!(session_id = %self.session_id, kind = event.kind(), "cannot serialize an agent event: {error}");
            SinkError(error.to_string())
        })
    }

    /// After an event was stored (or not): marks a recorded question ready, keeps a `tool_call`
    /// for the turn worker, publishes an `error`.
    fn route(&self, event: AgentEvent, stored: bool) {
        match event {
            AgentEvent::Approval(approval) => {
                if stored && approval.status == ApprovalState::Pending {
                    self.readiness.mark_recorded(&approval.approval_id);
                }
            }
            AgentEvent::ToolCall(call) => {
                self.tool_calls
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(call.tool_use_id.clone(), call);
            }
            AgentEvent::Error(error) => {
                self.bus
                    .publish(self.turn.get().as_deref(), EventKind::Error(error));
            }
            // Stored only: clients see the turn's end as `TurnEnded` on the bus.
            AgentEvent::TurnStopped(_) | AgentEvent::TurnRepaired(_) => {}
        }
    }
}

impl EventSink for SessionRecorder {
    fn emit(&self, event: AgentEvent) {
        let stored = self.store_event(&event).is_ok();
        self.route(event, stored);
    }

    fn stage(&self, event: AgentEvent) {
        if let Ok(value) = self.serialize(&event) {
            self.staged
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(value);
        }
        self.route(event, true);
    }

    fn record(&self, event: AgentEvent) -> Result<(), SinkError> {
        let stored = self.store_event(&event);
        self.route(event, stored.is_ok());
        stored
    }
}
