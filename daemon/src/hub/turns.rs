//! The turns of one open session: accepting them into its `TurnTable` (`super::turn_table`) and
//! the worker that runs queued turns one at a time and publishes their events.
//!
//! Invariants:
//! - Turns of a session run one at a time in the order they were accepted; a queue longer than the
//!   configured bound refuses new turns (`ResourceExhausted`).
//! - The table is the one queue a turn waits in on the hub path: the worker, its only consumer,
//!   hands each turn to the agent with `TauAgent::try_stream_with`, which runs it at once or
//!   refuses (never queues); the agent's own FIFO lock only guards against overlap.
//! - Every accepted turn gets exactly one `TurnEnded` event (also when it is cancelled while queued),
//!   published after every other event of the turn.
//! - A turn belongs to the worker, not to a client: nothing a client does (going away) stops it;
//!   only a cancel or the hub stopping does.
//! - Queue changes and their events are made together under the bus lock (`publish_with`), so a
//!   snapshot's turns agree with the events after it.
//! - Every event a turn produces goes through the worker in the turn's order; the worker marks each
//!   approval question flushed so the approver asks only after the events before it are out.
//!
//! See ARCHITECTURE.md, "The path of a turn".

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

use super::event::{EventKind, TurnInfo, now_rfc3339};
use super::recorder::SessionRecorder;
use super::runtime::SessionRuntime;
use super::turn_table::TurnRecord;
use crate::agent::{AgentBusy, StopReason, TauAgent, TurnEnd, TurnEvent, TurnOptions};
use crate::gate::{
    AgentEvent, ToolCallEvent, TurnRepairedEvent, TurnStoppedEvent, format_approval_arguments,
};
use crate::message::Usage;

/// What accepting a turn gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    pub session_id: String,
    pub turn_id: String,
    /// The key named an earlier turn; nothing new was started.
    pub duplicate: bool,
    /// Turns ahead of it when it was accepted.
    pub queued_ahead: u32,
    /// The seq of its first event (`turn_queued`).
    pub first_seq: u64,
}

/// A turn cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AcceptError {
    /// The session left memory in the meantime; open it again.
    Closed,
    /// The queue is full.
    QueueFull(usize),
}

/// The `TurnEnd` of a turn the hub ended itself, before or without the agent's own end: no text,
/// no usage, and `notice` for the person.
fn ended_by_hub(stop_reason: StopReason, notice: &str) -> TurnEnd {
    TurnEnd {
        stop_reason,
        text: String::new(),
        usage: Usage::default(),
        model_calls: 0,
        notice: Some(notice.to_owned()),
    }
}

/// The `TurnEnd` of a turn whose session worker died under it.
pub(crate) fn worker_failed() -> TurnEnd {
    ended_by_hub(
        StopReason::Error,
        "The session's worker failed; this turn did not finish. Try again.",
    )
}

/// The `TurnEnd` of a turn that was cancelled before it ran.
pub(crate) fn cancelled_before_start() -> TurnEnd {
    ended_by_hub(
        StopReason::Cancelled,
        "The turn was cancelled before it started.",
    )
}

impl SessionRuntime {
    /// Accepts a turn (or finds the one `idempotency_key` names) and wakes the worker.
    pub(crate) fn accept(
        &self,
        text: String,
        channel: String,
        idempotency_key: Option<String>,
        max_queued: usize,
        held_for: Option<Duration>,
        new_turn_id: impl FnOnce() -> String,
    ) -> Result<Accepted, AcceptError> {
        let accepted = self.bus.publish_with(|next_seq| {
            let mut turns = self.lock_turns();
            if turns.closed {
                return (None, Err(AcceptError::Closed));
            }
            if let Some(key) = &idempotency_key
                && let Some(turn_id) = turns.by_key(key)
            {
                let first_seq = turns.known(turn_id).map_or(0, |k| k.first_seq);
                let accepted = Accepted {
                    session_id: self.session_id.clone(),
                    turn_id: turn_id.to_owned(),
                    duplicate: true,
                    queued_ahead: 0,
                    first_seq,
                };
                return (None, Ok(accepted));
            }
            if turns.queue.len() >= max_queued {
                return (None, Err(AcceptError::QueueFull(max_queued)));
            }
            let turn_id = new_turn_id();
            let ahead = u32::from(turns.running.is_some())
                + u32::try_from(turns.queue.len()).unwrap_or(u32::MAX);
            let info = TurnInfo {
                turn_id: turn_id.clone(),
                channel,
                text,
                accepted_at: now_rfc3339(),
            };
            turns.queue.push_back(TurnRecord {
                info: info.clone(),
                first_seq: next_seq,
                cancel: CancellationToken::new(),
                held_for,
            });
            if let Some(key) = idempotency_key {
                turns.remember(key, turn_id.clone(), next_seq);
            }
            let event = EventKind::TurnQueued { turn: info, ahead };
            let accepted = Accepted {
                session_id: self.session_id.clone(),
                turn_id: turn_id.clone(),
                duplicate: false,
                queued_ahead: ahead,
                first_seq: next_seq,
            };
            (Some((Some(turn_id), event)), Ok(accepted))
        })?;
        if !accepted.duplicate {
            self.wake.notify_one();
        }
        self.touch();
        Ok(accepted)
    }

    /// Cancels a turn (`None`: the running one). A queued turn ends at once; a running one ends
    /// when the agent has answered every tool call. Returns the turn it applied to.
    pub(crate) fn cancel(&self, turn_id: Option<&str>) -> Option<String> {
        self.bus.publish_with(|next_seq| {
            let mut turns = self.lock_turns();
            let running = turns
                .running
                .as_ref()
                .filter(|r| turn_id.is_none_or(|id| r.info.turn_id == id));
            if let Some(record) = running {
                record.cancel.cancel();
                return (None, Some(record.info.turn_id.clone()));
            }
            let Some(id) = turn_id else {
                return (None, None);
            };
            let Some(record) = turns
                .queue
                .iter()
                .position(|r| r.info.turn_id == id)
                .and_then(|position| turns.queue.remove(position))
            else {
                return (None, None);
            };
            record.cancel.cancel();
            let end = cancelled_before_start();
            turns.record_end(id, next_seq, end.clone());
            let event = EventKind::TurnEnded(end);
            (Some((Some(id.to_owned()), event)), Some(id.to_owned()))
        })
    }

    /// Closes the session to new turns unless a turn runs or waits; whether it closed (an idle
    /// session leaving memory).
    pub(crate) fn close_if_idle(&self) -> bool {
        let mut turns = self.lock_turns();
        if turns.busy() {
            return false;
        }
        turns.closed = true;
        true
    }

    /// Closes the session to new turns (the hub stops); turns already accepted go on until
    /// cancelled.
    pub(crate) fn close_to_turns(&self) {
        self.lock_turns().closed = true;
    }

    /// Closes the session to new turns and ends the running turn and every queued one with an
    /// error (its worker died). Returns how many turns it ended.
    pub(crate) fn fail_all(&self) -> usize {
        let mut ended = 0;
        loop {
            let failed = self.bus.publish_with(|next_seq| {
                let mut turns = self.lock_turns();
                turns.closed = true;
                let Some(record) = turns.running.take().or_else(|| turns.queue.pop_front()) else {
                    return (None, false);
                };
                record.cancel.cancel();
                let id = record.info.turn_id;
                let end = worker_failed();
                turns.record_end(&id, next_seq, end.clone());
                (Some((Some(id), EventKind::TurnEnded(end))), true)
            });
            if !failed {
                return ended;
            }
            ended += 1;
        }
    }

    /// Takes the next queued turn, marks it running and publishes `turn_started`.
    fn start_next(&self) -> Option<TurnRecord> {
        self.bus.publish_with(|_| {
            let mut turns = self.lock_turns();
            if turns.running.is_some() {
                return (None, None);
            }
            let Some(record) = turns.queue.pop_front() else {
                return (None, None);
            };
            turns.running = Some(record.clone());
            let event = EventKind::TurnStarted {
                turn: record.info.clone(),
            };
            (
                Some((Some(record.info.turn_id.clone()), event)),
                Some(record),
            )
        })
    }

    /// Publishes `turn_ended` and clears the running turn.
    fn finish(&self, turn_id: &str, end: TurnEnd) {
        let first_seq = self.bus.publish_with(|next_seq| {
            let mut turns = self.lock_turns();
            let mut first_seq = None;
            if turns
                .running
                .as_ref()
                .is_some_and(|r| r.info.turn_id == turn_id)
            {
                first_seq = turns.running.take().map(|r| r.first_seq);
            }
            turns.record_end(turn_id, next_seq, end.clone());
            (
                Some((Some(turn_id.to_owned()), EventKind::TurnEnded(end))),
                first_seq,
            )
        });
        // The session's turns are all done: only this turn's events stay for resumptions. (The
        // turn table's lock is let go before the bus's is taken: the lock order is bus first.)
        let busy = self.lock_turns().busy();
        if let Some(first_seq) = first_seq
            && !busy
        {
            self.bus.drop_before(first_seq);
        }
        self.touch();
    }
}

/// The worker of one open session: runs queued turns until the session is stopped.
pub(crate) async fn run_worker(runtime: &SessionRuntime) {
    loop {
        if runtime.stop.is_cancelled() {
            break;
        }
        let Some(record) = runtime.start_next() else {
            tokio::select! {
                () = runtime.wake.notified() => continue,
                () = runtime.stop.cancelled() => break,
            }
        };
        run_turn(runtime, record).await;
    }
    // Turns still queued when the session stops end as cancelled.
    loop {
        let queued = runtime
            .lock_turns()
            .queue
            .front()
            .map(|r| r.info.turn_id.clone());
        let Some(turn_id) = queued else {
            break;
        };
        if runtime.cancel(Some(&turn_id)).is_none() {
            break;
        }
    }
    runtime.close_session_record().await;
}

async fn run_turn(runtime: &SessionRuntime, record: TurnRecord) {
    let turn_id = record.info.turn_id.clone();
    let agent_guard = runtime.agent_lock.lock().await;
    let (agent, recorder) = runtime.agent();
    runtime
        .turn_slot
        .set_turn(Some(turn_id.clone()), record.held_for);
    runtime.note_first_text(&record.info.text).await;
    let options = TurnOptions {
        channel: Some(record.info.channel.clone()),
        cancel: Some(record.cancel.clone()),
        turn_id: Some(turn_id.clone()),
    };
    // An unfinished history now is repaired first thing in this turn, with this notice; its
    // event sits before the turn's first stored message.
    let repair = agent.repair_notice();
    let before_turn = next_message(&recorder, &agent);
    // The turn waited in the turn table; the agent runs it now or refuses, never queues it.
    let end = match agent.try_stream_with(record.info.text.clone(), options) {
        Ok(stream) => {
            if let Some(notice) = repair {
                recorder.record_turn_event(AgentEvent::TurnRepaired(TurnRepairedEvent {
                    turn_id: turn_id.clone(),
                    notice,
                    session_id: runtime.session_id.clone(),
                    channel: record.info.channel.clone(),
                    before_message: before_turn,
                }));
            }
            relay(runtime, &record, &recorder, stream).await
        }
        Err(AgentBusy) => {
            error!(session_id = %runtime.session_id, %turn_id, "the session's agent was running another turn");
            Some(ended_by_hub(
                StopReason::Error,
                "The agent was busy with another turn. Try again.",
            ))
        }
    };
    runtime.turn_slot.set(None);
    runtime.save_pending_notice().await;
    let end = end.unwrap_or_else(|| {
        warn!(session_id = %runtime.session_id, %turn_id, "a turn ended without its end event");
        ended_by_hub(StopReason::Error, "The turn ended unexpectedly.")
    });
    if let Some(event) = stop_event(runtime, &record, &end, next_message(&recorder, &agent)) {
        recorder.record_turn_event(event);
    }
    // Normally written with the tool results already; a turn cut short leaves some behind.
    recorder.flush_staged();
    // Free the agent before the turn is seen to end: a role switch or compaction sent as soon as
    // a client reads `TurnEnded` must find it free (it is refused, not queued, while busy).
    drop(agent_guard);
    runtime.finish(&turn_id, end);
    // The turn's messages are durable already; the store tidies what it left for later, and the
    // session's own record follows (at most once per `session_record_interval`), both beside the
    // next turn.
    runtime.tidy_store();
    runtime.flush_session().await;
}

/// Publishes the events of a running turn on the session's bus, in order, and returns its end.
async fn relay(
    runtime: &SessionRuntime,
    record: &TurnRecord,
    recorder: &SessionRecorder,
    mut stream: crate::agent::AgentTurn,
) -> Option<TurnEnd> {
    let turn_id = record.info.turn_id.as_str();
    let mut end = None;
    while let Some(event) = stream.next_event().await {
        let kind = match event {
            TurnEvent::TurnEnd(turn_end) => {
                end = Some(turn_end);
                continue;
            }
            TurnEvent::ApprovalAsked(request) => {
                runtime.readiness.mark_flushed(&request.approval_id);
                continue;
            }
            TurnEvent::ApprovalDecided { .. } => continue,
            TurnEvent::TextDelta(text) => EventKind::TextDelta(text),
            TurnEvent::ReasoningDelta(text) => EventKind::ReasoningDelta(text),
            TurnEvent::ToolUseStarted { tool_use_id, name } => {
                EventKind::ToolUseStarted { tool_use_id, name }
            }
            TurnEvent::ToolUseInput { .. } => continue,
            TurnEvent::Throttled { delay } => EventKind::Throttled { delay },
            TurnEvent::OutputDiscarded => EventKind::OutputDiscarded,
            TurnEvent::ToolProgress {
                tool_use_id,
                tool,
                progress,
            } => EventKind::ToolProgress {
                tool_use_id,
                tool,
                progress,
            },
            TurnEvent::ToolResult {
                tool_use_id,
                tool,
                tier,
                status,
                approval,
                summary,
                duration_ms,
            } => {
                let record =
                    recorder
                        .take_tool_call(&tool_use_id)
                        .unwrap_or_else(|| ToolCallEvent {
                            tool,
                            tier,
                            arguments: serde_json::Value::Null,
                            status,
                            result_summary: summary,
                            approval,
                            duration_ms,
                            tool_use_id,
                            session_id: runtime.session_id.clone(),
                            channel: record.info.channel.clone(),
                        });
                EventKind::ToolCall(record)
            }
        };
        runtime.bus.publish(Some(turn_id), kind);
    }
    end
}

/// The `turn_stopped` event of a turn that ended on a limit, an error or a cancel; `None` for a
/// turn that ended normally.
/// `before_message` is the index of the next message to be stored (the turn's are all stored).
fn stop_event(
    runtime: &SessionRuntime,
    record: &TurnRecord,
    end: &TurnEnd,
    before_message: Option<u64>,
) -> Option<AgentEvent> {
    let stopped = matches!(
        end.stop_reason,
        StopReason::LimitTurns
            | StopReason::LimitTotalTokens
            | StopReason::Error
            | StopReason::Cancelled
    );
    stopped.then(|| {
        AgentEvent::TurnStopped(TurnStoppedEvent {
            turn_id: record.info.turn_id.clone(),
            stop_reason: end.stop_reason.as_str().to_owned(),
            notice: end.notice.clone(),
            model_calls: end.model_calls,
            session_id: runtime.session_id.clone(),
            channel: record.info.channel.clone(),
            before_message,
        })
    })
}

/// The stored index the agent's next message takes: the recorder's offset (the stored index of
/// the agent's first message) plus the whole history's length. `None` only past `u64`.
fn next_message(recorder: &SessionRecorder, agent: &TauAgent) -> Option<u64> {
    recorder
        .offset()
        .checked_add(agent.history_total_len())
        .and_then(|next| u64::try_from(next).ok())
}

/// The arguments of a `tool_call` record as shown to a person.
pub fn shown_arguments(record: &ToolCallEvent) -> String {
    if record.arguments.is_null() {
        return String::new();
    }
    format_approval_arguments(&record.arguments)
}
