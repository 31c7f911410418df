//! [`TauAgent`]: one conversation's agent loop: model, tools behind the tier gate, history, limits.
//!
//! `stream(prompt)` starts a turn on its own task and returns an [`AgentTurn`] of [`TurnEvent`]s
//! over a bounded channel; `ask(prompt)` waits for the text.
//!
//! Invariants: one turn at a time per agent: the turn task holds the agent's turn lock, a fair
//! (FIFO) tokio mutex, for the whole turn (never the caller). Two ways in:
//! - `stream`/`stream_with` queue on that lock, taking the turn's place before they return, so
//!   turns run in call order. This queue is for direct users of an agent (tests, benchmarks, an
//!   embedder): whoever calls from several places gets turns one at a time, in call order.
//! - `try_stream_with` never queues: it is refused ([`AgentBusy`]) while a turn holds the lock.
//!   It is for a caller that keeps its own turn queue and is its only consumer, as the hub's
//!   session worker is (`hub::turns`): on the hub path a turn waits in exactly one queue, the
//!   session's turn table, and the lock only asserts that turns do not overlap.
//!
//! A turn outlives its caller (dropping the stream does not stop it; cancel does); every turn ends
//! with exactly one `TurnEnd`, also when it was cancelled while queued (then nothing was appended);
//! the agent never touches global state. The pending repair notice (what the next turn tells the
//! model about an unfinished one) can be read out ([`TauAgent::pending_notice`]) and handed to a
//! rebuilt agent ([`TauAgentBuilder::pending_notice`]). See ARCHITECTURE.md, "agent/".

mod executor;
mod history;
mod notice;
mod progress_relay;
mod trace_spans;
mod turn;
mod turn_event;
mod window;

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::Stream;
use futures::future::Either;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use crate::model::{STOP_REASONS, StopReason, UnknownStopReason};
pub use history::{HistoryError, HistoryObserver};
pub use progress_relay::PROGRESS_INTERVAL;
pub use turn::{CANCELLED_PLACEHOLDER, HOLD_PROMPT_AT_MOST, TOOL_INTERRUPTED, UNFINISHED_NOTICE};
pub use turn_event::{Limits, StaticSystemPrompt, SystemPromptSource, TurnEnd, TurnEvent};
pub use window::{ConversationWindow, WholeHistory, WindowError};

use trace_spans::TurnTrace;

use crate::gate::{Approver, CallContext, EventSink, TierGate};
use crate::message::{Message, Usage};
use crate::model::Model;
use crate::tool::ToolCatalog;
use history::{Dangling, History};
use turn::PendingNotice;
use turn_event::TurnOutput;

/// Default capacity of a turn's event channel.
pub const DEFAULT_EVENT_CAPACITY: usize = 64;

/// Builds the tool catalog a turn starts with (tools that come and go, such as MCP servers' ones).
pub type CatalogSource = Arc<dyn Fn() -> ToolCatalog + Send + Sync>;

type BoxedExemption = Box<dyn Fn(&str, &Value) -> Result<bool, String> + Send + Sync>;

/// A turn could not give an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// The turn ended with stop reason `error` (a failed model call, a store that refused a message).
    #[error("{0}")]
    TurnFailed(String),
    /// The turn's task ended without a `TurnEnd` (it panicked, or there was no tokio runtime).
    #[error("the turn ended unexpectedly")]
    TurnAborted,
}

/// [`TauAgent::try_stream_with`] was refused: a turn is running on the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a turn is already running on this agent")]
pub struct AgentBusy;

pub(crate) struct AgentInner {
    model: Arc<dyn Model>,
    gate: TierGate,
    /// When set, every turn starts by replacing the gate's catalog with a fresh one.
    catalog_source: Option<CatalogSource>,
    system: Arc<dyn SystemPromptSource>,
    history: History,
    window: Arc<dyn ConversationWindow>,
    limits: Limits,
    session_id: String,
    channel: String,
    /// The installation profile, for the turn's spans (`tau.profile`).
    profile: String,
    event_capacity: usize,
    /// Held by the running turn; tokio's mutex is fair, so waiters get it in the order they queued
    /// (see the module doc for who queues on it).
    turn_lock: Arc<tokio::sync::Mutex<()>>,
    /// The notice of a turn that left the history dangling (see `turn`).
    notice: Mutex<Option<PendingNotice>>,
    /// The running turn's cancellation token.
    current: Mutex<Option<CancellationToken>>,
}

impl AgentInner {
    fn set_current(&self, token: Option<CancellationToken>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = token;
    }

    pub(crate) fn lock_notice(&self) -> std::sync::MutexGuard<'_, Option<PendingNotice>> {
        self.notice.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The agent of one conversation. Cheap to clone; clones share the loop.
#[derive(Clone)]
pub struct TauAgent {
    inner: Arc<AgentInner>,
}

impl std::fmt::Debug for TauAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TauAgent")
            .field("model", &self.inner.model.name())
            .field("session_id", &self.inner.session_id)
            .field("gate", &self.inner.gate)
            .finish()
    }
}

/// Per-turn options for [`TauAgent::stream_with`].
#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    /// The channel the prompt came from (approvals are asked there); default: the agent's.
    pub channel: Option<String>,
    /// Cancels this turn; default: a fresh token (see [`AgentTurn::cancel`]).
    pub cancel: Option<CancellationToken>,
    /// The turn's id as the caller knows it, for its tracing spans (`turn_id`); default: none.
    pub turn_id: Option<String>,
}

impl TauAgent {
    pub fn builder(model: Arc<dyn Model>) -> TauAgentBuilder {
        TauAgentBuilder {
            model,
            catalog: ToolCatalog::new(),
            catalog_source: None,
            approver: None,
            sink: None,
            gate_timeout: None,
            exemptions: Vec::new(),
            history: Vec::new(),
            observer: None,
            window: Arc::new(WholeHistory),
            system: Arc::new(StaticSystemPrompt::new("")),
            limits: Limits::default(),
            session_id: "unsaved".to_owned(),
            channel: "local".to_owned(),
            profile: String::new(),
            event_capacity: DEFAULT_EVENT_CAPACITY,
            pending_notice: None,
        }
    }

    /// The repair notice the next turn will put in front of its prompt, if an earlier turn left
    /// the history unfinished with one (a failed model call, a hit limit, a cancel) and nothing
    /// was appended since. `None` while a turn runs (it has taken the notice) or when the history
    /// ends cleanly. Hand it to [`TauAgentBuilder::pending_notice`] when rebuilding the agent.
    pub fn pending_notice(&self) -> Option<String> {
        let notice = self.inner.lock_notice();
        let pending = notice.as_ref()?;
        (pending.history_len == self.inner.history.len()
            && self.inner.history.dangling() != Dangling::No)
            .then(|| pending.text.clone())
    }

    /// The notice the next turn will repair the history with: the [`TauAgent::pending_notice`],
    /// or [`UNFINISHED_NOTICE`] for an unfinished history nobody left a notice for (a session
    /// restored after a crash). `None` when the history ends cleanly or while a turn runs.
    pub fn repair_notice(&self) -> Option<String> {
        if self.inner.history.dangling() == Dangling::No || self.is_busy() {
            return None;
        }
        Some(
            self.pending_notice()
                .unwrap_or_else(|| UNFINISHED_NOTICE.to_owned()),
        )
    }

    /// The tier gate (for `add_exemption`, and for callers that gate calls without a model).
    pub fn gate(&self) -> &TierGate {
        &self.inner.gate
    }

    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    pub fn limits(&self) -> Limits {
        self.inner.limits
    }

    pub fn model_name(&self) -> &str {
        self.inner.model.name()
    }

    /// The agent's model (for calls outside the loop, such as a `/compact` summary).
    pub fn model(&self) -> Arc<dyn Model> {
        Arc::clone(&self.inner.model)
    }

    /// A copy of the history held in memory, each message as a model receives it (older messages
    /// the window will never show again may have left memory, and metadata and unknown blocks are
    /// not held; the store keeps them).
    pub fn messages(&self) -> Vec<Message> {
        let held = self.inner.history.snapshot();
        held.iter().map(|message| Message::clone(message)).collect()
    }

    /// The held history as the model last saw it, without a model call (its window's
    /// [`ConversationWindow::as_recorded`]: under `summarize`, the recorded summary and the
    /// messages after it): what a `/compact` summary is made from.
    pub fn messages_as_recorded(&self) -> Vec<Message> {
        let (held, first) = self.inner.history.held();
        let recorded = self.inner.window.as_recorded(&held, first);
        recorded.into_iter().map(Arc::unwrap_or_clone).collect()
    }

    /// How many messages the agent holds in memory (what a window is cut from); older ones its
    /// window will never show again may have left memory (they stay in the store).
    pub fn history_len(&self) -> usize {
        self.inner.history.held_len()
    }

    /// How long the whole history is, messages that left memory included: the position the next
    /// appended message takes (what a [`HistoryObserver`] is told).
    pub fn history_total_len(&self) -> usize {
        self.inner.history.len()
    }

    /// Whether the model's last call was answered by its role's fallback.
    pub fn fallback_in_use(&self) -> bool {
        self.inner.model.fallback_in_use()
    }

    /// Whether a turn is running (or was just started and holds the turn lock).
    pub fn is_busy(&self) -> bool {
        self.inner.turn_lock.try_lock().is_err()
    }

    /// Cancels the running turn, if any; returns whether there was one. Queued turns are not affected.
    pub fn cancel(&self) -> bool {
        let current = self
            .inner
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match current.as_ref() {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Runs one user turn; see [`TauAgent::stream_with`].
    pub fn stream(&self, prompt: impl Into<String>) -> AgentTurn {
        self.stream_with(prompt, TurnOptions::default())
    }

    /// Runs one user turn on its own task (queued behind a running one, in call order) and
    /// streams its events. Needs a tokio runtime; without one the stream ends at once with
    /// `TurnAborted`.
    pub fn stream_with(&self, prompt: impl Into<String>, options: TurnOptions) -> AgentTurn {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.spawn_turn(prompt.into(), options, std::future::pending());
        }
        // Take the turn's place in the fair queue now, in call order: poll the lock future once
        // (a waiter is queued on its first poll); the turn task polls it on with its own waker.
        let mut queued = Box::pin(Arc::clone(&self.inner.turn_lock).lock_owned());
        let place = match queued
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(guard) => Either::Left(std::future::ready(guard)),
            Poll::Pending => Either::Right(queued),
        };
        self.spawn_turn(prompt.into(), options, place)
    }

    /// Runs one user turn on its own task now and streams its events, or is refused while a turn
    /// runs: it never queues (for a caller with its own turn queue; see the module doc). Needs a
    /// tokio runtime; without one the stream ends at once with `TurnAborted`.
    pub fn try_stream_with(
        &self,
        prompt: impl Into<String>,
        options: TurnOptions,
    ) -> Result<AgentTurn, AgentBusy> {
        let guard = Arc::clone(&self.inner.turn_lock)
            .try_lock_owned()
            .map_err(|_| AgentBusy)?;
        Ok(self.spawn_turn(prompt.into(), options, std::future::ready(guard)))
    }

    /// Spawns the task of one turn, which runs once `place` gives it the turn lock (or ends as
    /// cancelled if cancelled first).
    fn spawn_turn(
        &self,
        prompt: String,
        options: TurnOptions,
        place: impl Future<Output = tokio::sync::OwnedMutexGuard<()>> + Send + 'static,
    ) -> AgentTurn {
        let (sender, receiver) = mpsc::channel(self.inner.event_capacity.max(1));
        let cancel = options.cancel.unwrap_or_default();
        let stream = AgentTurn {
            receiver,
            cancel: cancel.clone(),
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return stream;
        };
        let inner = Arc::clone(&self.inner);
        let ctx = CallContext {
            session_id: inner.session_id.clone(),
            channel: options.channel.unwrap_or_else(|| inner.channel.clone()),
            cancel,
        };
        let trace = TurnTrace {
            session_id: ctx.session_id.clone(),
            channel: ctx.channel.clone(),
            profile: inner.profile.clone(),
            turn_id: options.turn_id.unwrap_or_default(),
        };
        let span = trace.turn_span();
        let turn = async move {
            let out = TurnOutput::new(sender);
            let queued = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => None,
                guard = place => Some(guard),
            };
            let Some(guard) = queued else {
                out.send(TurnEvent::TurnEnd(TurnEnd {
                    stop_reason: StopReason::Cancelled,
                    text: String::new(),
                    usage: Usage::default(),
                    model_calls: 0,
                    notice: None,
                }))
                .await;
                return;
            };
            inner.set_current(Some(ctx.cancel.clone()));
            let end = turn::run_turn(&inner, prompt, &ctx, &trace, &out).await;
            inner.set_current(None);
            drop(guard);
            out.send(TurnEvent::TurnEnd(end)).await;
        };
        runtime.spawn(turn.instrument(span));
        stream
    }

    /// Runs one user turn and returns the last assistant text. Limits and cancels are not errors
    /// (the text is then what was said, possibly empty); a turn that ended with `error` is.
    pub async fn ask(&self, prompt: impl Into<String>) -> Result<String, AgentError> {
        let end = self.stream(prompt).finish().await?;
        if end.stop_reason == StopReason::Error {
            return Err(AgentError::TurnFailed(
                end.notice.unwrap_or_else(|| "the turn failed".to_owned()),
            ));
        }
        Ok(end.text)
    }
}

/// The events of one turn. Implements `Stream`; dropping it does not stop the turn.
#[derive(Debug)]
pub struct AgentTurn {
    receiver: mpsc::Receiver<TurnEvent>,
    cancel: CancellationToken,
}

impl AgentTurn {
    /// The next event; `None` after `TurnEnd`.
    pub async fn next_event(&mut self) -> Option<TurnEvent> {
        self.receiver.recv().await
    }

    /// Cancels this turn (also while it is still queued).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Drains the stream and returns how the turn ended.
    pub async fn finish(mut self) -> Result<TurnEnd, AgentError> {
        while let Some(event) = self.receiver.recv().await {
            if let TurnEvent::TurnEnd(end) = event {
                return Ok(end);
            }
        }
        Err(AgentError::TurnAborted)
    }

    /// Drains the stream and returns every event (the last is `TurnEnd` unless the turn aborted).
    pub async fn collect_events(mut self) -> Vec<TurnEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.receiver.recv().await {
            events.push(event);
        }
        events
    }
}

impl Stream for AgentTurn {
    type Item = TurnEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<TurnEvent>> {
        self.receiver.poll_recv(cx)
    }
}

/// Builds a [`TauAgent`]. Defaults: no tools, [`crate::gate::AutoRejectApprover`], no event sink,
/// no history, the whole history as the model's window, an empty system prompt,
/// [`Limits::default`], session `unsaved`, channel `local`.
pub struct TauAgentBuilder {
    model: Arc<dyn Model>,
    catalog: ToolCatalog,
    catalog_source: Option<CatalogSource>,
    approver: Option<Arc<dyn Approver>>,
    sink: Option<Arc<dyn EventSink>>,
    gate_timeout: Option<Duration>,
    exemptions: Vec<BoxedExemption>,
    history: Vec<Message>,
    observer: Option<Arc<dyn HistoryObserver>>,
    window: Arc<dyn ConversationWindow>,
    system: Arc<dyn SystemPromptSource>,
    limits: Limits,
    session_id: String,
    channel: String,
    profile: String,
    event_capacity: usize,
    pending_notice: Option<String>,
}

impl TauAgentBuilder {
    /// The tools (already filtered by `[components.tools] disabled` where that applies).
    pub fn catalog(mut self, catalog: ToolCatalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// Rebuilds the catalog at the start of every turn (a turn never sees the tool set change).
    pub fn catalog_source(mut self, source: CatalogSource) -> Self {
        self.catalog_source = Some(source);
        self
    }

    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Where `tool_call`, `approval` and `error` events go.
    pub fn event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// The gate's approval timeout (wins over the approver's own).
    pub fn gate_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.gate_timeout = timeout;
        self
    }

    /// An exemption registered on the gate at build (see `TierGate::add_exemption`).
    pub fn exemption<F, E>(mut self, f: F) -> Self
    where
        F: Fn(&str, &Value) -> Result<bool, E> + Send + Sync + 'static,
        E: Display,
    {
        self.exemptions
            .push(Box::new(move |tool: &str, args: &Value| {
                f(tool, args).map_err(|e| e.to_string())
            }));
        self
    }

    /// The history to continue (restored from a session store); it is not reported to the observer.
    pub fn history(mut self, messages: Vec<Message>) -> Self {
        self.history = messages;
        self
    }

    pub fn history_observer(mut self, observer: Arc<dyn HistoryObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// What the model sees of the history before every model call (default: [`WholeHistory`]).
    /// The history itself, and what the observer stores, are not affected.
    pub fn conversation_window(mut self, window: Arc<dyn ConversationWindow>) -> Self {
        self.window = window;
        self
    }

    pub fn system_prompt(mut self, source: Arc<dyn SystemPromptSource>) -> Self {
        self.system = source;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn session_id(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = session_id.into();
        self
    }

    /// The default channel of this agent's turns.
    pub fn channel(mut self, channel: impl Into<String>) -> Self {
        self.channel = channel.into();
        self
    }

    /// The installation profile, carried by the turn's tracing spans (`tau.profile`); default: empty.
    pub fn profile(mut self, profile: impl Into<String>) -> Self {
        self.profile = profile.into();
        self
    }

    /// Capacity of each turn's event channel (at least 1).
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// The repair notice an earlier agent of this conversation left pending (see
    /// [`TauAgent::pending_notice`]): the first turn puts it in front of its prompt if the
    /// `history` given here is unfinished. `None` (the default): an unfinished history gets
    /// [`UNFINISHED_NOTICE`].
    pub fn pending_notice(mut self, notice: Option<String>) -> Self {
        self.pending_notice = notice;
        self
    }

    pub fn build(self) -> TauAgent {
        let mut gate = TierGate::builder(Arc::new(self.catalog)).timeout(self.gate_timeout);
        if let Some(approver) = self.approver {
            gate = gate.approver(approver);
        }
        if let Some(sink) = self.sink {
            gate = gate.sink(sink);
        }
        let gate = gate.build();
        for exemption in self.exemptions {
            // Registered for the agent's lifetime: the handle is not needed to keep it.
            let _handle = gate.add_exemption(exemption);
        }
        let notice = self.pending_notice.map(|text| PendingNotice {
            text,
            history_len: self.history.len(),
        });
        TauAgent {
            inner: Arc::new(AgentInner {
                model: self.model,
                gate,
                catalog_source: self.catalog_source,
                system: self.system,
                history: History::new(self.history, self.observer),
                window: self.window,
                limits: self.limits,
                session_id: self.session_id,
                channel: self.channel,
                profile: self.profile,
                event_capacity: self.event_capacity,
                turn_lock: Arc::new(tokio::sync::Mutex::new(())),
                notice: Mutex::new(notice),
                current: Mutex::new(None),
            }),
        }
    }
}
