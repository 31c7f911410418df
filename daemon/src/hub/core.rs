//! [`HubCore`]: the hub's front door. The rpc layer (and in-process callers such as benchmarks)
//! reach sessions, turns, events, approvals and routines through this one handle; each call is a
//! one-line delegation to the sub-room of the hub that owns it ([`sessions`], [`approvals`],
//! [`routine_ops`]; the tool list from `builtin_tools`), which takes the core's state
//! ([`CoreState`], kept by `sessions`) or less. No sub-room imports this module; it builds the
//! core, starts it and stops it.
//!
//! Invariants:
//! - One `SessionRuntime` (one agent) per open session; sessions are opened on demand
//!   (`CoreState::runtime`) and dropped from memory after `idle_after` without turns,
//!   attachments, subscribers or pending approvals (their history stays in the store). Its
//!   `EventBus` goes with it; only its last seq is remembered, so a reopened session's seq goes on
//!   where it was for the life of the process.
//! - Seqs are numbered per process: [`HubCore::stream_id`] (random per core) names the numbering;
//!   a resumption naming another stream is refused, never served events of another numbering.
//! - Requests are checked before anything is touched, all by [`super::limits`] (ids, channels,
//!   texts, idempotency keys: a session remembers at most `REMEMBERED_TURNS` turns started with one).
//! - Open sessions are `OpenSessions`; the core holds it and never its parts. Each session's worker
//!   is watched (`sessions::supervise`): a worker that dies takes its session out of memory with it (its
//!   turns end with an error), so the next call opens it afresh.
//! - Shutdown retires every open session (its running turn cancelled, its queued turns ended,
//!   pending approvals resolved as cancelled) and waits (bounded) for the workers to store their
//!   turns.
//!
//! See ARCHITECTURE.md, "hub/" and "The path of a turn".

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::approvals::{
    self, ApprovalRegistry, ApprovalWatch, DecideOutcome, ExpiredApproval, ScanJournal, ScanPlan,
    expire_stale_approvals,
};
use super::builtin_tools::{BuiltinTools, tool_summaries};
use super::error::CoreError;
use super::events::PendingInfo;
use super::ids::new_id;
use super::now_facts::hub_context_sources;
use super::options::{CoreOptions, ModelFactory};
use super::routine_ops::{self, AddRoutine, HubRoutineProposer, ManualRun, RoutineStatus};
#[cfg(test)]
use super::sessions::SessionRuntime;
use super::sessions::{
    self, AgentParts, ChannelListings, Compacted, CoreState, EventStream, MessageSelection,
    NewSessionKeys, OpenSessions, OpenTarget, Opened, RoleSwitch, SessionDetail, SessionSummary,
    StartTurn, TurnStream,
};
use super::spend_usage::{MAX_USAGE_DAYS, open_spend_meter};
use crate::agent::SystemPromptSource;
use crate::clock::SystemClock;
use crate::gate::ApprovalAnswer;
use crate::mcp::McpManager;
use crate::persona::PersonaLoader;
use crate::routine::{Firing, RoutineEngine, RoutineView};
use crate::spend::DaySpend;
use crate::store::SessionStore;
use crate::tool::builtin::RoutineProposer;

/// How long shutdown waits for the session workers.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

pub use crate::tool::ToolSummary;

/// The hub's domain core. Cheap to clone.
#[derive(Clone)]
pub struct HubCore {
    inner: Arc<CoreState>,
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
                    hub_context_sources(&spend, &options.lenders),
                    clock,
                )
                .map_err(|e| CoreError::FailedPrecondition(e.to_string()))?,
            ),
            None => Arc::new(PersonaLoader::shipped(
                &options.profile,
                &options.host_role,
                hub_context_sources(&spend, &options.lenders),
                clock,
            )),
        };
        let options_mcp = options.mcp_servers.clone();
        let lenders = options.lenders.clone();
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
                let proposer: Option<Arc<dyn RoutineProposer>> = with_routines.then(|| {
                    Arc::new(HubRoutineProposer {
                        state: weak.clone(),
                    }) as _
                });
                CoreState {
                    parts: AgentParts {
                        store,
                        options,
                        factory,
                        persona,
                        registry,
                        journal,
                        mcp: Arc::new(McpManager::new(options_mcp)),
                        spend,
                        builtin_tools: BuiltinTools::new(proposer.as_ref()).lent(lenders),
                    },
                    stream_id: new_id("stream", 0),
                    sessions,
                    reaper_passes: Arc::new(AtomicU64::new(0)),
                    listings: ChannelListings::default(),
                    new_session_keys: NewSessionKeys::default(),
                    ids: AtomicU64::new(0),
                    stop: CancellationToken::new(),
                    routines: OnceLock::new(),
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
        let store = Arc::clone(self.inner.store());
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
        routine_ops::start_routines(&self.inner);
        sessions::spawn_reaper(
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
        if let Some(engine) = self.routines() {
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

    /// A core from the weak reference a status source holds; `None` once the hub is gone.
    pub(crate) fn from_weak(weak: &Weak<CoreState>) -> Option<Self> {
        weak.upgrade().map(|inner| Self { inner })
    }

    pub(crate) fn downgrade(&self) -> Weak<CoreState> {
        Arc::downgrade(&self.inner)
    }

    /// The routine engine, when routines are on and their file could be read.
    pub fn routines(&self) -> Option<&RoutineEngine> {
        self.inner.routines.get()
    }

    /// The MCP servers (status, tools).
    pub fn mcp(&self) -> &Arc<McpManager> {
        &self.inner.parts.mcp
    }

    /// The approval registry (pending approvals, attachments).
    pub fn registry(&self) -> &Arc<ApprovalRegistry> {
        self.inner.registry()
    }

    pub fn options(&self) -> &CoreOptions {
        self.inner.options()
    }

    /// The id of this process's event numbering: every session's `seq` starts at 1 in each hub
    /// process, so a client resuming with `after_seq` names the stream its seqs came from and a
    /// different one (a restarted hub) is refused.
    pub fn stream_id(&self) -> &str {
        &self.inner.stream_id
    }

    /// The session store backend's name.
    pub fn backend_name(&self) -> &str {
        self.inner.store().backend_name()
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
        let idle_after = self.options().idle_after;
        self.inner.sessions.retire_idle(idle_after).await;
    }

    /// Cuts the replay buffers of open sessions without a turn for `after` to
    /// [`super::events::IDLE_REPLAY_BYTES`], as the idle reaper does after
    /// `TRIM_IDLE_AFTER` (`sessions/open_sessions.rs`).
    pub async fn trim_idle(&self, after: Duration) {
        self.inner.sessions.trim_idle(after).await;
    }

    /// Sessions the core keeps anything for in memory: an open agent (with its bus), or the
    /// remembered last seq of one that left memory. Never more than the sessions that exist.
    pub fn sessions_tracked(&self) -> usize {
        self.inner.sessions.tracked()
    }

    /// The tools an agent may call.
    pub fn tools(&self) -> Vec<ToolSummary> {
        let parts = self.inner.parts();
        tool_summaries(
            &parts.builtin_tools,
            &parts.options.disabled_tools,
            &parts.mcp,
        )
    }

    /// Tokens and cost per role for the last `days` days (today included, at most
    /// [`MAX_USAGE_DAYS`]) that have any, oldest first.
    pub fn usage(&self, days: u32) -> Vec<DaySpend> {
        self.inner.parts.spend.days(days.clamp(1, MAX_USAGE_DAYS))
    }

    /// Today's spend as the `## Now` block words it (`fast 0,12 $ / 1 $`); `None` when no role
    /// has a price.
    pub fn budget_today(&self) -> Option<String> {
        self.inner.parts.spend.budget_line()
    }

    // Sessions (`sessions/session_api.rs`).

    /// The summary of a session; `NotFound` when it does not exist.
    pub async fn summary(&self, session_id: &str) -> Result<SessionSummary, CoreError> {
        sessions::summary(&self.inner, session_id).await
    }

    /// The most recent sessions with messages (default 10), newest first; remembered per channel.
    pub async fn list_sessions(
        &self,
        limit: usize,
        channel: &str,
        exclude: Option<&str>,
    ) -> Result<Vec<SessionSummary>, CoreError> {
        sessions::list_sessions(&self.inner, limit, channel, exclude).await
    }

    /// A session's metadata and, when asked, all its stored messages.
    pub async fn get_session(
        &self,
        session_id: &str,
        include_messages: bool,
    ) -> Result<SessionDetail, CoreError> {
        sessions::get_session(&self.inner, session_id, include_messages).await
    }

    /// A session's metadata and the stored messages `selection` names: a page reads only its
    /// messages, the summary none.
    pub async fn get_session_with(
        &self,
        session_id: &str,
        selection: MessageSelection,
    ) -> Result<SessionDetail, CoreError> {
        sessions::get_session_with(&self.inner, session_id, selection).await
    }

    /// Opens a session for turns.
    pub async fn open_session(
        &self,
        target: OpenTarget,
        role: Option<&str>,
        channel: &str,
        exclude: Option<&str>,
    ) -> Result<Opened, CoreError> {
        sessions::open_session(&self.inner, target, role, channel, exclude).await
    }

    /// Rebuilds a session's agent on another role (`/model`).
    pub async fn switch_role(&self, session_id: &str, role: &str) -> Result<RoleSwitch, CoreError> {
        sessions::switch_role(&self.inner, session_id, role).await
    }

    /// Summarizes a session into a new one that starts from the summary (the session's own
    /// model writes it; the old session keeps every message). Refused while a turn runs or waits;
    /// a failed summary changes nothing.
    pub async fn compact_session(
        &self,
        session_id: &str,
        focus: &str,
        channel: &str,
    ) -> Result<Compacted, CoreError> {
        sessions::compact(&self.inner, session_id, focus, channel).await
    }

    /// The stored agent events of a session, oldest first.
    pub async fn read_events(&self, session_id: &str) -> Result<Vec<Value>, CoreError> {
        sessions::read_events(&self.inner, session_id).await
    }

    // Turns and events (`sessions/streams.rs`).

    /// Starts a turn (or finds the one its idempotency key names) and streams its events.
    pub async fn start_turn(&self, request: StartTurn) -> Result<TurnStream, CoreError> {
        sessions::start_turn(&self.inner, request, None).await
    }

    /// Starts a turn in a new session created for it, titled from its text (StartTurn's
    /// `new_session`: one call instead of OpenSession and StartTurn); `request.session_id` must
    /// be empty. The stream's accepted turn names the session.
    pub async fn start_turn_in_new_session(
        &self,
        request: StartTurn,
    ) -> Result<TurnStream, CoreError> {
        sessions::start_turn_in_new_session(&self.inner, request).await
    }

    /// Cancels a turn (`None`: the running one); returns the turn it applied to, if any.
    pub async fn cancel_turn(
        &self,
        session_id: &str,
        turn_id: Option<&str>,
    ) -> Result<Option<String>, CoreError> {
        sessions::cancel_turn(&self.inner, session_id, turn_id).await
    }

    /// Attaches to a session on `channel`: the snapshot, then its events (see
    /// [`super::EventBus::subscribe_with`] for `after_seq`).
    pub async fn subscribe(
        &self,
        session_id: &str,
        after_seq: Option<u64>,
        channel: &str,
    ) -> Result<EventStream, CoreError> {
        sessions::subscribe(&self.inner, session_id, after_seq, None, channel).await
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
        sessions::subscribe(&self.inner, session_id, after_seq, stream_id, channel).await
    }

    // Approvals (`approvals/`).

    /// A person's decision, from the client holding `attachment_id`. An approval is reported as
    /// the gate recorded it (`Error` when its record failed and the tool did not run).
    pub async fn decide(
        &self,
        approval_id: &str,
        answer: ApprovalAnswer,
        attachment_id: &str,
    ) -> Result<DecideOutcome, CoreError> {
        let (registry, store) = (self.inner.registry(), self.inner.store());
        approvals::decide_request(registry, store, approval_id, answer, attachment_id).await
    }

    /// The approvals asked on `channel` (any, when `None`), in every session: those pending now,
    /// then each as it is asked.
    pub fn watch_approvals(&self, channel: Option<&str>) -> Result<ApprovalWatch, CoreError> {
        approvals::watch_channel(self.registry(), channel, self.inner.stop_token())
    }

    /// Pending approvals, oldest first; of one session when `session_id` is given.
    pub fn list_pending(&self, session_id: Option<&str>) -> Result<Vec<PendingInfo>, CoreError> {
        approvals::pending_of(self.registry(), session_id)
    }

    // Routines (`routine_ops/`).

    pub fn list_routines(&self) -> Result<Vec<RoutineView>, CoreError> {
        routine_ops::list_routines(&self.inner)
    }

    /// Adds (or replaces) a routine; a tier-2 tool action, or any routine the model proposes,
    /// waits for its registration approval.
    pub async fn add_routine(&self, request: AddRoutine) -> Result<RoutineView, CoreError> {
        routine_ops::add_routine(&self.inner, request).await
    }

    pub fn remove_routine(&self, name: &str) -> Result<(), CoreError> {
        routine_ops::remove_routine(&self.inner, name)
    }

    pub fn pause_routine(&self, name: &str, paused: bool) -> Result<RoutineView, CoreError> {
        routine_ops::pause_routine(&self.inner, name, paused)
    }

    /// Fires a routine now. A tier-2 tool routine is asked first on `session_id` and `channel`
    /// (every time; refused without a session) and run before this returns; anything else is
    /// started and runs on.
    pub async fn run_routine(
        &self,
        name: &str,
        session_id: &str,
        channel: &str,
    ) -> Result<ManualRun, CoreError> {
        routine_ops::run_routine(&self.inner, name, session_id, channel).await
    }

    pub fn routine_history(&self, name: &str) -> Result<Vec<Firing>, CoreError> {
        routine_ops::routine_history(&self.inner, name)
    }

    /// The MCP servers as `/status` shows them.
    pub fn mcp_status(&self) -> serde_json::Map<String, serde_json::Value> {
        crate::mcp::status_json(self.mcp())
    }

    /// The routines as status reports show them.
    pub fn routine_status(&self) -> RoutineStatus {
        routine_ops::routine_status(&self.inner)
    }

    // For tests inside the hub.

    /// The open sessions (tests: to stand in for a session's runtime).
    #[cfg(test)]
    pub(super) fn open_map(&self) -> &Arc<OpenSessions> {
        &self.inner.sessions
    }

    /// What building a session's agent needs.
    #[cfg(test)]
    pub(super) fn parts(&self) -> &AgentParts {
        self.inner.parts()
    }

    /// The role a session opens on, and whether it has a title (blocking; see
    /// `CoreState::resolve_role`).
    #[cfg(test)]
    pub(super) fn resolve_role(
        &self,
        session_id: &str,
        pin: Option<&str>,
    ) -> Result<(String, bool), CoreError> {
        self.inner.resolve_role(session_id, pin)
    }

    /// The open runtime of a session, if it is in memory.
    #[cfg(test)]
    pub(super) async fn open_runtime(&self, session_id: &str) -> Option<Arc<SessionRuntime>> {
        self.inner.open_runtime(session_id).await
    }
}
