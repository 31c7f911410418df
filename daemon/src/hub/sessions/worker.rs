//! The worker of one open session: it takes the turns its [`TurnQueue`](super::turn_queue) holds,
//! one at a time, runs each on the session's agent and publishes its events.
//!
//! Invariants:
//! - Turns of a session run one at a time in the order they were accepted.
//! - The queue is the one place a turn waits on the hub path: the worker, its only consumer,
//!   hands each turn to the agent with `TauAgent::try_stream_with`, which runs it at once or
//!   refuses (never queues); the agent's own FIFO lock only guards against overlap.
//! - A turn belongs to the worker, not to a client: nothing a client does (going away) stops it;
//!   only a cancel or the hub stopping does. Turns still queued when the session stops end as
//!   cancelled.
//! - Every event a turn produces goes through the worker in the turn's order; the worker marks each
//!   approval question flushed so the approver asks only after the events before it are out.
//! - The agent is let go before the turn is seen to end (`TurnEnded`), so a role switch or
//!   compaction sent right after finds it free.
//!
//! See ARCHITECTURE.md, "The path of a turn".

use tracing::{error, warn};

use super::recorder::SessionRecorder;
use super::runtime::SessionRuntime;
use super::turn_queue::ended_by_hub;
use super::turn_table::TurnRecord;
use crate::agent::{AgentBusy, StopReason, TauAgent, TurnEnd, TurnEvent, TurnOptions};
use crate::gate::{AgentEvent, ToolCallEvent, TurnRepairedEvent, TurnStoppedEvent};
use crate::hub::events::EventKind;

/// The worker of one open session: runs queued turns until the session is stopped.
pub(super) async fn run_worker(runtime: &SessionRuntime) {
    loop {
        if runtime.stop.is_cancelled() {
            break;
        }
        let Some(record) = runtime.turns.start_next() else {
            tokio::select! {
                () = runtime.turns.notified() => continue,
                () = runtime.stop.cancelled() => break,
            }
        };
        run_turn(runtime, record).await;
    }
    // Turns still queued when the session stops end as cancelled.
    loop {
        let queued = runtime
            .turns
            .lock()
            .queue
            .front()
            .map(|r| r.info.turn_id.clone());
        let Some(turn_id) = queued else {
            break;
        };
        if runtime.turns.cancel(Some(&turn_id)).is_none() {
            break;
        }
    }
    // A title's write still running is durable before the session's record is closed.
    runtime.settle_title().await;
    runtime.close_session_record().await;
}

async fn run_turn(runtime: &SessionRuntime, record: TurnRecord) {
    let turn_id = record.info.turn_id.clone();
    let agent_guard = runtime.agent_lock.lock().await;
    let (agent, recorder) = runtime.agent();
    runtime
        .turn_slot
        .set_turn(Some(turn_id.clone()), record.held_for);
    let options = TurnOptions {
        channel: Some(record.info.channel.clone()),
        cancel: Some(record.cancel.clone()),
        turn_id: Some(turn_id.clone()),
    };
    // An unfinished history now is repaired first thing in this turn, with this notice; its
    // event sits before the turn's first stored message.
    let repair = agent.repair_notice();
    let before_turn = next_message(&recorder, &agent);
    // The title's write runs beside the turn and is not waited for (see `start_title`).
    runtime.start_title(&record.info.text, before_turn == Some(0));
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
    runtime.turns.finish(&turn_id, end);
    runtime.touch();
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
