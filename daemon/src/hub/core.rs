//! [`HubCore`]: the hub's sessions, turns, events and approvals behind one handle, as the rpc layer
//! (and in-process callers such as benchmarks) use them.
//!
//! Invariants:
//! - One [`SessionRuntime`] (one agent) per open session; sessions are opened on demand and dropped
//!   from memory after `idle_after` without turns, attachments, subscribers or pending approvals
//!   (their history stays in the store). Its [`EventBus`] goes with it; only its last seq is
//!   remembered, so a reopened session's seq goes on where it was for the life of the process.
//! - Nothing is kept for a session that does not exist: it is looked up in the store before a
//!   bus or an agent is made for it.
//! - Seqs are numbered per process: [`HubCore::stream_id`] (random per core) names the numbering;
//!   a resumption naming another stream is refused, never served events of another numbering.
//! - Requests are checked before anything is touched, all by [`super::limits`] (ids, channels,
//!   texts, idempotency keys: a session remembers at most `REMEMBERED_TURNS` turns started with one).
//! - Open sessions are [`OpenSessions`]; the core holds it and never its parts. Opening a session
//!   reads the store on a blocking thread with the open map held, so a session is never opened
//!   twice.
//! - Each session's worker is watched (`supervise`): a worker that dies takes its session out of
//!   memory with it (its turns end with an error), so the next call opens it afresh.
//! - Shutdown retires every open session (its running turn cancelled, its queued turns ended,
//!   pending approvals resolved as cancelled) and waits (bounded) for the workers to store their
//!   turns.
//!
//! See ARCHITECTURE.md, "hub/" and "The path of a turn".

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::approvals::ApprovalRegistry;
use super::builtin_tools::BuiltinTools;
use super::bus::EventBus;
use super::error::CoreError;
use super::event::{EventKind, SessionEvent};
use super::ids::new_id;
use super::limits::{
    check_channel, check_idempotency_key, check_ref_id, check_session_id, check_text,
};
use super::now_facts::hub_context_sources;
use super::open_sessions::OpenSessions;
use super::options::{CoreOptions, ModelFactory};
use super::remembered::ChannelListings;
use super::restart::{ExpiredApproval, expire_stale_approvals};
use super::runtime::{AgentParts, SessionRuntime};
use super::scan_mark::{ScanJournal, ScanPlan};
use super::spend_usage::open_spend_meter;
use super::streams::{EventStream, Snapshot, TurnStream};
use super::turns::AcceptError;
use crate::agent::SystemPromptSource;
use crate::clock::SystemClock;
use crate::mcp::McpManager;
use crate::persona::PersonaLoader;
use crate::store::SessionStore;

/// How long shutdown waits for the session workers.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// A turn to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartTurn {
    pub session_id: String,
    pub text: String,
    /// Empty: [`DEFAULT_CHANNEL`](super::limits::DEFAULT_CHANNEL).
    pub channel: String,
    /// Empty: no deduplication.
    pub idempotency_key: String,
}

pub use crate::tool::ToolSummary;

pub(crate) struct CoreInner {
    parts: AgentParts,
    /// This process's event numbering (see [`HubCore::stream_id`]).
    stream_id: String,
    sessions: Arc<OpenSessions>,
    /// How many times the idle reaper has looked for idle sessions.
    reaper_passes: Arc<AtomicU64>,
    /// The last listing per channel, for `OpenSession.index`.
    listings: ChannelListings,
    ids: AtomicU64,
    stop: CancellationToken,
    /// The routine engine, once `start` opened it (see `routine_api.rs`).
    routines: std::sync::OnceLock<crate::routine::RoutineEngine>,
}

/// The hub's domain core. Cheap to clone.
#[derive(Clone)]
pub struct HubCore {
    inner: Arc<CoreInner>,
}

impl std::fmt::Debug for HubCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubCore")
            .field("backend", &self.backend_name())
            .field("open_sessions", &self.open_sessions())
            .finish()
    }
}

impl HubCore {
    /// A core over `store`. Fails when the persona directory is configured but unreadable, or
    /// when two MCP tools would share a name ([`CoreOptions::check_mcp_names`]).
    pub fn new(
        store: Arc<dyn SessionStore>,
        options: CoreOptions,
        factory: Arc<dyn ModelFactory>,
    ) -> Result<Self, CoreError> {
        options
            .check_mcp_names()
            .map_err(|e| CoreError::FailedPrecondition(e.to_string()))?;
        let clock = Arc::new(SystemClock);
        let spend = Arc::new(open_spend_meter(&options));
        let persona: Arc<dyn SystemPromptSource> = match &options.persona_dir {
            Some(dir) => Arc::new(
                PersonaLoader::new(
                    dir,
                    &options.profile,
                    &options.host_role,
                    hub_context_sources(&spend),
                    clock,
                )
                .map_err(|e| CoreError::FailedPrecondition(e.to_string()))?,
            ),
            None => Arc::new(PersonaLoader::shipped(
                &options.profile,
                &options.host_role,
                hub_context_sources(&spend),
                clock,
            )),
        };
        let options_mcp = options.mcp_servers.clone();
        let journal = options
            .approval_scan_mark
            .as_ref()
            .map(|path| Arc::new(ScanJournal::new(path, store.backend_name())));
        let registry = ApprovalRegistry::new();
        let sessions = Arc::new(OpenSessions::new(
            options.max_open_sessions,
            Arc::clone(&registry),
        ));
        let with_routines = options.routines_file.is_some();
        Ok(Self {
            inner: Arc::new_cyclic(|weak| {
                let proposer: Option<Arc<dyn crate::tool::builtin::RoutineProposer>> =
                    with_routines.then(|| {
                        Arc::new(super::routine_runner::HubRoutineProposer { core: weak.clone() })
                            as _
                    });
                CoreInner {
                    parts: AgentParts {
                        store,
                        options,
                        factory,
                        persona,
                        registry,
                        journal,
                        mcp: Arc::new(McpManager::new(options_mcp)),
                        spend,
                        builtin_tools: BuiltinTools::new(proposer.as_ref()),
                        routine_proposer: proposer,
                    },
                    stream_id: new_id("stream", 0),
                    sessions,
                    reaper_passes: Arc::new(AtomicU64::new(0)),
                    listings: ChannelListings::default(),
                    ids: AtomicU64::new(0),
                    stop: CancellationToken::new(),
                    routines: std::sync::OnceLock::new(),
                }
            }),
        })
    }

    /// Start-up, before any turn: marks approvals left pending by an earlier hub as expired by
    /// restart (events and log), reading only the sessions the approval scan mark names when
    /// [`CoreOptions::approval_scan_mark`] is set, then starts dropping idle sessions. Returns what
    /// was expired.
    pub async fn start(&self) -> Result<Vec<ExpiredApproval>, CoreError> {
        // MCP servers start in their own tasks: nothing here waits for them.
        self.inner.parts.mcp.start();
        let store = Arc::clone(&self.inner.parts.store);
        let journal = self.inner.parts.journal.clone();
        let expired = tokio::task::spawn_blocking(move || {
            let started = jiff::Timestamp::now();
            let plan = journal.as_ref().map_or(ScanPlan::All, |j| j.plan());
            let outcome = expire_stale_approvals(store.as_ref(), &plan)?;
            if let Some(journal) = &journal {
                journal.record_scan(started, &outcome.unfinished);
            }
            Ok::<_, CoreError>(outcome.expired)
        })
        .await
        .map_err(|e| CoreError::Unavailable(e.to_string()))??;
        for approval in &expired {
            self.registry().remember_expired(&approval.approval_id);
        }
        self.start_routines();
        super::reaper::spawn(
            Arc::clone(&self.inner.sessions),
            self.options().idle_after,
            self.inner.stop.clone(),
            Arc::clone(&self.inner.reaper_passes),
        );
        Ok(expired)
    }

    /// Stops: cancels every turn, resolves pending approvals as cancelled, waits for the workers.
    pub async fn shutdown(&self) {
        self.inner.stop.cancel();
        if let Some(engine) = self.inner.routines.get() {
            engine.shutdown();
        }
        let workers = self.inner.sessions.close_all().await;
        let waiting = futures::future::join_all(workers);
        if tokio::time::timeout(SHUTDOWN_WAIT, waiting).await.is_err() {
            warn!("some session workers did not stop in time");
        }
        self.inner.parts.mcp.stop(SHUTDOWN_WAIT).await;
        let spend = Arc::clone(&self.inner.parts.spend);
        match tokio::task::spawn_blocking(move || spend.flush()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!("the spend ledger could not be saved at shutdown: {e}"),
            Err(e) => warn!("the spend ledger's final save did not finish: {e}"),
        }
    }

    /// The MCP servers (status, tools).
    /// A core from the weak reference a routine firing holds; `None` once the hub is gone.
    pub(crate) fn from_weak(weak: &std::sync::Weak<CoreInner>) -> Option<Self> {
        weak.upgrade().map(|inner| Self { inner })
    }

    pub(crate) fn downgrade(&self) -> std::sync::Weak<CoreInner> {
        Arc::downgrade(&self.inner)
    }

    /// The routine engine, when routines are on and their file could be read.
    pub fn routines(&self) -> Option<&crate::routine::RoutineEngine> {
        self.inner.routines.get()
    }

    pub(crate) fn set_routines(&self, engine: crate::routine::RoutineEngine) -> bool {
        self.inner.routines.set(engine).is_ok()
    }

    pub fn mcp(&self) -> &Arc<McpManager> {
        &self.inner.parts.mcp
    }

    /// The approval registry (pending approvals, attachments).
    pub fn registry(&self) -> &Arc<ApprovalRegistry> {
        &self.inner.parts.registry
    }

    pub fn options(&self) -> &CoreOptions {
        &self.inner.parts.options
    }

    /// The id of this process's event numbering: every session's `seq` starts at 1 in each hub
    /// process, so a client resuming with `after_seq` names the stream its seqs came from and a
    /// different one (a restarted hub) is refused.
    pub fn stream_id(&self) -> &str {
        &self.inner.stream_id
    }

    /// The session store backend's name.
    pub fn backend_name(&self) -> &str {
        self.inner.parts.store.backend_name()
    }

    pub(crate) fn store(&self) -> &Arc<dyn SessionStore> {
        &self.inner.parts.store
    }

    /// What building a session's agent needs.
    pub(super) fn parts(&self) -> &AgentParts {
        &self.inner.parts
    }

    /// A token cancelled when the hub stops (for work a call starts, such as a summary).
    pub(super) fn stop_token(&self) -> CancellationToken {
        self.inner.stop.child_token()
    }

    /// The remembered listings per channel.
    pub(super) fn listings(&self) -> &ChannelListings {
        &self.inner.listings
    }

    /// The open sessions (tests: to stand in for a session's runtime).
    #[cfg(test)]
    pub(super) fn open_map(&self) -> &Arc<OpenSessions> {
        &self.inner.sessions
    }

    /// Sessions with an agent in memory.
    pub fn open_sessions(&self) -> usize {
        self.inner.sessions.len()
    }

    /// How many times the idle reaper has looked for idle sessions (it looks only while sessions
    /// are open).
    pub fn reaper_passes(&self) -> u64 {
        self.inner.reaper_passes.load(Ordering::Relaxed)
    }

    /// Drops the agents of sessions nobody uses (their history stays in the store).
    pub async fn drop_idle(&self) {
        self.inner
            .sessions
            .retire_idle(self.options().idle_after)
            .await;
    }

    /// Cuts the replay buffers of open sessions without a turn for `after` to
    /// [`super::bus::IDLE_REPLAY_BYTES`], as the idle reaper does after
    /// [`super::open_sessions::TRIM_IDLE_AFTER`].
    pub async fn trim_idle(&self, after: Duration) {
        self.inner.sessions.trim_idle(after).await;
    }

    /// The tools an agent may call.
    pub fn tools(&self) -> Vec<ToolSummary> {
        super::builtin_tools::tool_summaries(&self.options().disabled_tools, self.parts())
    }

    /// Sessions the core keeps anything for in memory: an open agent (with its bus), or the
    /// remembered last seq of one that left memory. Never more than the sessions that exist.
    pub fn sessions_tracked(&self) -> usize {
        self.inner.sessions.tracked()
    }

    /// The open runtime of a session, opening it (on `pin`, else its stored role, else the default
    /// role) when it is not in memory.
    pub(crate) async fn runtime(
        &self,
        session_id: &str,
        pin: Option<&str>,
    ) -> Result<Arc<SessionRuntime>, CoreError> {
        check_session_id(session_id)?;
        let mut open = self.inner.sessions.lock().await;
        if let Some(runtime) = open.get(session_id) {
            runtime.touch();
            return Ok(runtime);
        }
        open.make_room()?;
        let last_seq = open.last_seq(session_id);
        let core = self.clone();
        let id = session_id.to_owned();
        let pin = pin.map(str::to_owned);
        let runtime = tokio::task::spawn_blocking(move || {
            // Fails for a session that does not exist, before anything is made for it.
            let role = core.resolve_role(&id, pin.as_deref())?;
            let options = core.options();
            let bus = Arc::new(EventBus::continuing(
                id.as_str(),
                options.replay_buffer,
                options.subscriber_lag,
                last_seq,
            ));
            SessionRuntime::open(&core.inner.parts, &id, &role, bus)
        })
        .await
        .map_err(|e| CoreError::Unavailable(e.to_string()))??;
        let runtime = Arc::new(runtime);
        let worker = tokio::spawn(super::supervise::run_watched(
            Arc::clone(&self.inner.sessions),
            Arc::clone(&runtime),
        ));
        open.insert(Arc::clone(&runtime), worker);
        info!(session_id, role = %runtime.role(), "session opened");
        Ok(runtime)
    }

    /// The open runtime of a session, if it is in memory.
    pub(crate) async fn open_runtime(&self, session_id: &str) -> Option<Arc<SessionRuntime>> {
        self.inner.sessions.get(session_id).await
    }

    pub(crate) fn new_turn_id(&self) -> String {
        new_id("turn", self.inner.ids.fetch_add(1, Ordering::Relaxed))
    }

    /// Starts a turn (or finds the one its idempotency key names) and streams its events.
    pub async fn start_turn(&self, request: StartTurn) -> Result<TurnStream, CoreError> {
        self.start_turn_held(request, None).await
    }

    /// Starts a turn no client started (a routine's): its stream is nobody's attachment, so it
    /// decides nothing, and its questions are held for `held_for` (see the approval registry).
    pub(crate) async fn start_unattended_turn(
        &self,
        request: StartTurn,
        held_for: Duration,
    ) -> Result<TurnStream, CoreError> {
        self.start_turn_held(request, Some(held_for)).await
    }

    async fn start_turn_held(
        &self,
        request: StartTurn,
        held_for: Option<Duration>,
    ) -> Result<TurnStream, CoreError> {
        let channel = check_channel(&request.channel)?;
        check_text(&request.text)?;
        let key = check_idempotency_key(&request.idempotency_key)?;
        let max_queued = self.options().max_queued_turns;
        for _ in 0..2 {
            let runtime = self.runtime(&request.session_id, None).await?;
            // Attach first, to the turn about to be made: an approval the turn asks at once must
            // find its stream attached.
            let fresh_id = self.new_turn_id();
            let attachment = match held_for {
                Some(_) => None,
                None => Some(
                    self.registry()
                        .attach_turn(&runtime.bus, &channel, &fresh_id)?,
                ),
            };
            let accepted = match runtime.accept(
                request.text.clone(),
                channel.clone(),
                key.clone(),
                max_queued,
                held_for,
                || fresh_id.clone(),
            ) {
                Ok(accepted) => accepted,
                Err(AcceptError::Closed) => continue,
                Err(AcceptError::QueueFull(n)) => {
                    return Err(CoreError::ResourceExhausted(format!(
                        "{n} turns are already waiting in this session; try again when one has finished"
                    )));
                }
            };
            if accepted.turn_id != fresh_id
                && let Some(attachment) = &attachment
            {
                // A repeat: the stream replays the earlier turn from its start.
                attachment.show_turn(&accepted.turn_id);
            }
            let after = accepted.first_seq.saturating_sub(1);
            let (subscription, ready) = match runtime.bus.subscribe(Some(after)) {
                Ok(subscription) => (Some(subscription), VecDeque::new()),
                Err(_) => self.turn_fallback(&runtime, &accepted.turn_id),
            };
            return Ok(TurnStream::new(
                accepted,
                attachment,
                subscription,
                ready,
                self.inner.stop.clone(),
            ));
        }
        Err(CoreError::Unavailable(
            "the session was closing; try again".to_owned(),
        ))
    }

    /// For a repeated turn whose events are no longer buffered: its end if it ended, else the live
    /// events from now.
    fn turn_fallback(
        &self,
        runtime: &SessionRuntime,
        turn_id: &str,
    ) -> (
        Option<super::bus::Subscription>,
        VecDeque<Arc<SessionEvent>>,
    ) {
        let ended = runtime
            .lock_turns()
            .known(turn_id)
            .and_then(|k| k.ended.clone());
        match ended {
            Some((seq, at, end)) => {
                let event = Arc::new(SessionEvent {
                    seq,
                    session_id: runtime.session_id.clone(),
                    turn_id: Some(turn_id.to_owned()),
                    at,
                    kind: EventKind::TurnEnded(end),
                });
                (None, VecDeque::from([event]))
            }
            None => (runtime.bus.subscribe(None).ok(), VecDeque::new()),
        }
    }

    /// Cancels a turn (`None`: the running one); returns the turn it applied to, if any.
    pub async fn cancel_turn(
        &self,
        session_id: &str,
        turn_id: Option<&str>,
    ) -> Result<Option<String>, CoreError> {
        check_session_id(session_id)?;
        if let Some(turn_id) = turn_id {
            check_ref_id("turn_id", turn_id)?;
        }
        match self.open_runtime(session_id).await {
            Some(runtime) => Ok(runtime.cancel(turn_id)),
            None => {
                self.require_session(session_id).await?;
                Ok(None)
            }
        }
    }

    /// Attaches to a session on `channel`: the snapshot, then its events (see
    /// [`EventBus::subscribe_with`] for `after_seq`).
    pub async fn subscribe(
        &self,
        session_id: &str,
        after_seq: Option<u64>,
        channel: &str,
    ) -> Result<EventStream, CoreError> {
        self.subscribe_in_stream(session_id, after_seq, None, channel)
            .await
    }

    /// [`HubCore::subscribe`], resuming after `after_seq` of the stream `stream_id` names (`None`:
    /// unchecked). With `after_seq` set, a stream id other than [`HubCore::stream_id`] is refused
    /// (`FailedPrecondition`): its seqs numbered another hub process's events.
    pub async fn subscribe_in_stream(
        &self,
        session_id: &str,
        after_seq: Option<u64>,
        stream_id: Option<&str>,
        channel: &str,
    ) -> Result<EventStream, CoreError> {
        let channel = check_channel(channel)?;
        check_session_id(session_id)?;
        if let Some(stream_id) = stream_id {
            check_ref_id("stream_id", stream_id)?;
        }
        if let (Some(after_seq), Some(stream_id)) = (after_seq, stream_id)
            && stream_id != self.stream_id()
        {
            return Err(CoreError::FailedPrecondition(format!(
                "after_seq {after_seq} is from event stream {:?}, but this hub's stream is {:?}: the hub restarted; subscribe again without after_seq",
                stream_id.chars().take(80).collect::<String>(),
                self.stream_id()
            )));
        }
        let runtime = self.runtime(session_id, None).await?;
        let session = self.summary(session_id).await?;
        let attachment = self.registry().attach(&runtime.bus, &channel)?;
        let registry = Arc::clone(self.registry());
        let attachment_id = attachment.id().to_owned();
        let role = runtime.role();
        let (snapshot, subscription) = runtime
            .bus
            .subscribe_with(after_seq, |last_seq| {
                let turns = runtime.lock_turns();
                Snapshot {
                    session,
                    running: turns.running.as_ref().map(|r| r.info.clone()),
                    queued: turns.queue.iter().map(|r| r.info.clone()).collect(),
                    pending: registry.list_pending(Some(session_id)),
                    last_seq,
                    attachment_id,
                    role,
                    stream_id: self.stream_id().to_owned(),
                }
            })
            .map_err(|e| CoreError::FailedPrecondition(e.to_string()))?;
        Ok(EventStream::new(
            snapshot,
            attachment,
            subscription,
            self.inner.stop.clone(),
        ))
    }
}
