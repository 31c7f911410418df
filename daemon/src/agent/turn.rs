//! One user turn: repair a dangling history, hold the prompt, then call the model and run its
//! tools until a terminal stop reason, a limit, a cancel or an error.
//!
//! Invariants (ARCHITECTURE.md, "The path of a turn"): the system prompt is rebuilt before every
//! model call; history is only appended to (through `History::append`); the prompt is held
//! ([`HeldMessages`]) and stored in the turn's next write, or on its own once it has waited
//! [`HOLD_PROMPT_AT_MOST`] while the model streams or a tool runs; an assistant message
//! whose calls may change anything (tier 1 or 2, or an unknown tool) is stored (with what is held)
//! before its first tool starts; one that only reads is held with its results and stored in the
//! turn's next write (the reply, or the next round that may change something), or when the turn
//! ends; a dangling end is repaired with the seed's two-message prompt (an assistant notice in
//! parentheses, then the new user message), after a "Tool was interrupted." result for a dangling
//! toolUse; a cancel while the model streams stores the "Cancelled by user" placeholder reply; a
//! cancel around tools still answers every toolUse; limits and errors end the turn with a stop
//! reason, never with an error value. The model sees what the agent's `ConversationWindow` makes
//! of the history and the held rounds, asked before every call; a failed window never stops the
//! turn (the fallback view is used, with one warning per turn).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, warn};

use super::AgentInner;
use super::executor::run_tools;
use super::history::{Dangling, HistoryError};
use super::notice::model_error_notice;
use super::trace_spans::TurnTrace;
use super::turn_event::{TurnEnd, TurnEvent, TurnOutput};
use crate::gate::CallContext;
use crate::message::{ContentBlock, Message, Role, ToolResult, ToolResultStatus, ToolUse, Usage};
use crate::model::StopReason;
use crate::model::{
    AssembledMessage, MessageAssembler, ModelError, ModelEvent, ModelRequest, ReasoningDelta,
};
use crate::tool::Tier;

/// The reply stored when a cancel arrives while the model streams.
pub const CANCELLED_PLACEHOLDER: &str = "Cancelled by user";
/// The result given to a toolUse left without one by an earlier turn.
pub const TOOL_INTERRUPTED: &str = "Tool was interrupted.";
/// The repair notice for a dangling history nobody left a notice for (a crash-restored session).
pub const UNFINISHED_NOTICE: &str = "The previous turn did not finish.";
/// How long a turn's prompt waits for the turn's next write before it is stored on its own. A
/// turn answered within it (a scripted reply, a quick local model) stores its prompt and reply
/// in one write, one sync where there were two; any longer turn's prompt is durable this soon
/// after the turn began, so a crash while the model thinks still leaves it for the next turn's
/// repair.
pub const HOLD_PROMPT_AT_MOST: Duration = Duration::from_millis(100);

/// What survives between turns: the notice of a turn that left the history dangling, keyed by the
/// history length it left (so it applies only while that message is still the last).
#[derive(Debug, Clone)]
pub(crate) struct PendingNotice {
    pub(crate) text: String,
    pub(crate) history_len: usize,
}

enum ModelOutcome {
    Done(AssembledMessage),
    Cancelled,
    Failed(ModelError),
}

struct Progress {
    usage: Usage,
    model_calls: u32,
    text: String,
}

pub(crate) async fn run_turn(
    inner: &AgentInner,
    prompt: String,
    ctx: &CallContext,
    trace: &TurnTrace,
    out: &TurnOutput,
) -> TurnEnd {
    let mut progress = Progress {
        usage: Usage::default(),
        model_calls: 0,
        text: String::new(),
    };
    let (stop_reason, notice) = match drive(inner, prompt, ctx, trace, out, &mut progress).await {
        Ok(end) => end,
        Err(error) => {
            warn!(session_id = %ctx.session_id, "{error}");
            (
                StopReason::Error,
                Some("The conversation could not be saved; the turn stopped.".to_owned()),
            )
        }
    };
    if let Some(text) = &notice
        && inner.history.dangling() != Dangling::No
    {
        *inner.lock_notice() = Some(PendingNotice {
            text: text.clone(),
            history_len: inner.history.len(),
        });
    }
    // A long-lived session must not grow without bound: what the window will never show again
    // leaves memory (positions stay absolute, so the notice above still applies).
    let forgotten = inner
        .history
        .forget_with(|held, first| inner.window.forgettable(held, first));
    if forgotten > 0 {
        debug!(forgotten, "older messages left memory");
    }
    TurnEnd {
        stop_reason,
        text: progress.text,
        usage: progress.usage,
        model_calls: progress.model_calls,
        notice,
    }
}

/// Messages of the turn not stored yet, which the model sees as if stored: the prompt, until the
/// turn's next write or [`HOLD_PROMPT_AT_MOST`] (nobody was told it is stored; a crash before
/// loses it and the session stays as the last turn left it), and read-only rounds, which changed
/// nothing outside, until the turn's next write (a crash before loses only reads, and the next
/// turn repairs the prompt left without a reply).
struct HeldMessages {
    /// Whole messages (metadata included: the store gets them as they are), shared with the
    /// model's view while held.
    messages: Vec<Arc<Message>>,
    /// When the held prompt is stored on its own at the latest; `None` once it is stored.
    prompt_due: Option<tokio::time::Instant>,
}

impl HeldMessages {
    fn with_prompt(prompt: Message) -> Self {
        Self {
            messages: vec![Arc::new(prompt)],
            prompt_due: Some(tokio::time::Instant::now() + HOLD_PROMPT_AT_MOST),
        }
    }

    /// Stores what is held, then `message` if any, in one write.
    fn store_with(
        &mut self,
        inner: &AgentInner,
        message: Option<Message>,
    ) -> Result<(), HistoryError> {
        self.prompt_due = None;
        let mut messages = std::mem::take(&mut self.messages);
        messages.extend(message.map(Arc::new));
        if messages.is_empty() {
            return Ok(());
        }
        inner.history.append_all(messages).map(drop)
    }

    /// Awaits `work` (a model call, a round of tools); if the prompt is still held when it falls
    /// due, stores what is held then, while `work` goes on.
    async fn store_when_due<T>(
        &mut self,
        inner: &AgentInner,
        work: impl Future<Output = T>,
    ) -> Result<T, HistoryError> {
        let Some(due) = self.prompt_due else {
            return Ok(work.await);
        };
        let mut work = std::pin::pin!(work);
        tokio::select! {
            biased;
            done = &mut work => return Ok(done),
            () = tokio::time::sleep_until(due) => {}
        }
        self.store_with(inner, None)?;
        Ok(work.await)
    }
}

impl super::TauAgent {
    /// For a call gated outside a turn (a routine's firing, registration or manual run): applies
    /// the catalog source now, as a turn's start does ([`drive`]), so the call sees the tools of
    /// now (a node that joined, or a claim that changed, since the session's last turn). Skipped
    /// while a turn runs, so a turn sees one tool set; whether it was applied.
    pub fn refresh_catalog(&self) -> bool {
        let Some(source) = &self.inner.catalog_source else {
            return false;
        };
        // Held while the catalog is replaced, so no turn starts in between.
        let Ok(_idle) = self.inner.turn_lock.try_lock() else {
            return false;
        };
        self.inner.gate.set_catalog(std::sync::Arc::new(source()));
        true
    }
}

async fn drive(
    inner: &AgentInner,
    prompt: String,
    ctx: &CallContext,
    trace: &TurnTrace,
    out: &TurnOutput,
    progress: &mut Progress,
) -> Result<(StopReason, Option<String>), HistoryError> {
    repair(inner)?;
    if let Some(source) = &inner.catalog_source {
        // The turn boundary: tools that appeared or went away since the last turn apply now.
        inner.gate.set_catalog(std::sync::Arc::new(source()));
    }
    let mut held = HeldMessages::with_prompt(Message::user_text(prompt));
    let end = rounds(inner, ctx, trace, out, progress, &mut held).await;
    // However the rounds ended, what they held is stored before the turn reports its end.
    held.store_with(inner, None)?;
    end
}

async fn rounds(
    inner: &AgentInner,
    ctx: &CallContext,
    trace: &TurnTrace,
    out: &TurnOutput,
    progress: &mut Progress,
    held: &mut HeldMessages,
) -> Result<(StopReason, Option<String>), HistoryError> {
    let mut window_failed = false;
    loop {
        if ctx.cancel.is_cancelled() {
            return Ok((StopReason::Cancelled, Some(cancelled_notice())));
        }
        if let Some(max) = inner.limits.turns
            && progress.model_calls >= max
        {
            let notice = format!("The turn stopped after {max} model calls (its limit).");
            return Ok((StopReason::LimitTurns, Some(notice)));
        }
        if let Some(max) = inner.limits.total_tokens
            && progress.usage.total_tokens >= max
        {
            let notice = format!(
                "The turn stopped after using {} tokens (its budget is {max}).",
                progress.usage.total_tokens
            );
            return Ok((StopReason::LimitTotalTokens, Some(notice)));
        }
        let messages = model_view(inner, &held.messages, &ctx.cancel, &mut window_failed).await;
        let request = ModelRequest {
            system: inner.system.system_content(),
            messages,
            tools: inner.gate.catalog().specs(),
        };
        progress.model_calls += 1;
        let span = trace.model_call_span(inner.model.name(), progress.model_calls);
        let called = held
            .store_when_due(
                inner,
                call_model(inner, request, &ctx.cancel, out).instrument(span),
            )
            .await?;
        let assembled = match called {
            ModelOutcome::Done(assembled) => assembled,
            ModelOutcome::Cancelled => {
                held.store_with(inner, Some(Message::assistant_text(CANCELLED_PLACEHOLDER)))?;
                progress.text = CANCELLED_PLACEHOLDER.to_owned();
                return Ok((StopReason::Cancelled, Some(cancelled_notice())));
            }
            ModelOutcome::Failed(error) => {
                warn!(model = inner.model.name(), "model call failed: {error}");
                return Ok((StopReason::Error, Some(model_error_notice(&error))));
            }
        };
        add_usage(&mut progress.usage, &assembled.usage);
        let stop_reason = assembled.stop_reason;
        let uses: Vec<_> = assembled.message.tool_uses().cloned().collect();
        progress.text = assembled.message.text();
        // A round of read-only calls changes nothing outside, so nothing needs its record before
        // it runs: the calls and their results are held for the turn's next write. Any other
        // round is stored (with what is held) before its first tool starts.
        let read_only_round = stop_reason == StopReason::ToolUse && reads_only(inner, &uses);
        let calls = if read_only_round {
            Some(assembled.message)
        } else {
            held.store_with(inner, Some(assembled.message))?;
            None
        };
        if stop_reason != StopReason::ToolUse {
            let notice = match stop_reason {
                StopReason::MaxTokens => {
                    Some("The reply was cut off at the output limit.".to_owned())
                }
                StopReason::ContentFiltered | StopReason::GuardrailIntervened => {
                    Some("The provider's content filter stopped the reply.".to_owned())
                }
                _ => None,
            };
            return Ok((stop_reason, notice));
        }
        let tools = run_tools(
            &inner.gate,
            uses,
            &assembled.invalid_tool_inputs,
            ctx,
            trace,
            out,
        );
        let results = held.store_when_due(inner, tools).await?;
        let answers = Message {
            role: Role::User,
            content: results.into_iter().map(ContentBlock::ToolResult).collect(),
            metadata: None,
        };
        match calls {
            Some(calls) => held.messages.extend([Arc::new(calls), Arc::new(answers)]),
            None => inner.history.append(answers).map(drop)?,
        }
    }
}

/// Whether every call names a known tier-0 (read) tool.
fn reads_only(inner: &AgentInner, uses: &[ToolUse]) -> bool {
    let catalog = inner.gate.catalog();
    !uses.is_empty()
        && uses
            .iter()
            .all(|u| catalog.tier_of(&u.name) == Some(Tier::Read))
}

/// What the next model call sees: the agent's window over the history and the rounds held, each
/// message as a model receives it and shared, not copied (the history holds its messages that
/// way; a held round is stripped of its metadata by a copy while it is held). A window that shows
/// a tail says where it starts, and only that tail is taken; any other is asked for its view. A
/// failed window is warned about once; the turn then uses the fallback view until it ends.
async fn model_view(
    inner: &AgentInner,
    held_rounds: &[Arc<Message>],
    cancel: &CancellationToken,
    window_failed: &mut bool,
) -> Vec<Arc<Message>> {
    let rounds = held_rounds.iter().cloned().map(Message::shared_for_model);
    let (mut history, first) = inner.history.with_held(|held, first| {
        let mut all = Vec::with_capacity(held.len() + held_rounds.len());
        all.extend(held.iter().cloned());
        (all, first)
    });
    history.extend(rounds);
    if let Some(start) = inner.window.tail_start(&history, first) {
        history.drain(..start.min(history.len()));
        return history;
    }
    let view = if *window_failed {
        inner.window.fallback(&history)
    } else {
        match inner.window.view(&history, first, cancel).await {
            Ok(view) => view,
            Err(error) => {
                *window_failed = true;
                if !cancel.is_cancelled() {
                    warn!(
                        model = inner.model.name(),
                        "{error}; the model sees the fallback window this turn"
                    );
                }
                inner.window.fallback(&history)
            }
        }
    };
    view.into_iter().map(Message::shared_for_model).collect()
}

fn cancelled_notice() -> String {
    "The user cancelled the previous turn.".to_owned()
}

/// Repairs a dangling history by appending: a "Tool was interrupted." result for every unanswered
/// toolUse, then an assistant message with the pending notice in parentheses.
fn repair(inner: &AgentInner) -> Result<(), HistoryError> {
    let pending = inner.lock_notice().take();
    let dangling = inner.history.dangling();
    if dangling == Dangling::No {
        return Ok(());
    }
    let len_before = inner.history.len();
    let notice = match pending {
        Some(pending) if pending.history_len == len_before => pending.text,
        _ => UNFINISHED_NOTICE.to_owned(),
    };
    debug!(?dangling, %notice, "repairing a dangling history");
    if let Dangling::OnToolUse(ids) = dangling {
        let results = ids
            .into_iter()
            .map(|id| {
                ContentBlock::ToolResult(ToolResult::text(
                    id,
                    ToolResultStatus::Error,
                    TOOL_INTERRUPTED,
                ))
            })
            .collect();
        inner.history.append(Message {
            role: Role::User,
            content: results,
            metadata: None,
        })?;
    }
    inner
        .history
        .append(Message::assistant_text(format!("({notice})")))?;
    Ok(())
}

async fn call_model(
    inner: &AgentInner,
    request: ModelRequest,
    cancel: &CancellationToken,
    out: &TurnOutput,
) -> ModelOutcome {
    let started = Instant::now();
    let opened = tokio::select! {
        biased;
        () = cancel.cancelled() => return ModelOutcome::Cancelled,
        opened = inner.model.stream(request, cancel.clone()) => opened,
    };
    let mut stream = match opened {
        Ok(stream) => stream,
        Err(error) => return ModelOutcome::Failed(error),
    };
    let mut assembler = MessageAssembler::new();
    let mut tool_ids: HashMap<u32, String> = HashMap::new();
    loop {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return ModelOutcome::Cancelled,
            next = stream.next() => next,
        };
        let event = match next {
            None => break,
            Some(Err(error)) => return ModelOutcome::Failed(error),
            Some(Ok(event)) => event,
        };
        if let Err(error) = assembler.push(&event) {
            return ModelOutcome::Failed(error);
        }
        if let Some(turn_event) = to_turn_event(event, &mut tool_ids, &mut assembler) {
            out.send(turn_event).await;
        }
    }
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    ModelOutcome::Done(assembler.finish(latency_ms))
}

/// The caller-facing form of a model event, if it has one.
fn to_turn_event(
    event: ModelEvent,
    tool_ids: &mut HashMap<u32, String>,
    assembler: &mut MessageAssembler,
) -> Option<TurnEvent> {
    match event {
        ModelEvent::TextDelta { text, .. } => Some(TurnEvent::TextDelta(text)),
        ModelEvent::ReasoningDelta {
            delta: ReasoningDelta::Text(text),
            ..
        } => Some(TurnEvent::ReasoningDelta(text)),
        ModelEvent::ToolUseStart {
            index,
            tool_use_id,
            name,
        } => {
            tool_ids.insert(index, tool_use_id.clone());
            Some(TurnEvent::ToolUseStarted { tool_use_id, name })
        }
        ModelEvent::ToolUseInputDelta {
            index,
            partial_json,
        } => tool_ids.get(&index).map(|id| TurnEvent::ToolUseInput {
            tool_use_id: id.clone(),
            partial_json,
        }),
        ModelEvent::Throttled { delay } => {
            assembler.reset();
            tool_ids.clear();
            Some(TurnEvent::Throttled { delay })
        }
        ModelEvent::OutputDiscarded => {
            assembler.reset();
            tool_ids.clear();
            Some(TurnEvent::OutputDiscarded)
        }
        ModelEvent::ReasoningDelta { .. }
        | ModelEvent::BlockStop { .. }
        | ModelEvent::Metadata { .. }
        | ModelEvent::MessageStop { .. } => None,
    }
}

fn add_usage(total: &mut Usage, call: &Usage) {
    total.input_tokens = total.input_tokens.saturating_add(call.input_tokens);
    total.output_tokens = total.output_tokens.saturating_add(call.output_tokens);
    total.total_tokens = total.total_tokens.saturating_add(call.total_tokens);
    if let Some(read) = call.cache_read_input_tokens {
        *total.cache_read_input_tokens.get_or_insert(0) += read;
    }
    if let Some(write) = call.cache_write_input_tokens {
        *total.cache_write_input_tokens.get_or_insert(0) += write;
    }
}
