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
//! - Requests are checked before anything is touched: ids are plain names, channels are short plain
//!   names ([`MAX_CHANNEL_LEN`]), idempotency keys are bounded ([`MAX_IDEMPOTENCY_KEY_LEN`]; a
//!   session remembers at most `REMEMBERED_TURNS` of them), texts are non-empty and bounded, and
//!   so is every other client string ([`super::limits`]).
//! - Opening a session reads the store on a blocking thread; the open map is a tokio mutex held
//!   across that read, so a session is never opened twice.
//! - Each session's worker is watched (`supervise`): a worker that dies takes its session out of
//!   memory with it (its turns end with an error), so the next call opens it afresh.
//! - Shutdown cancels every running and queued turn, resolves pending approvals as cancelled and
//!   waits (bounded) for the workers to store their turns.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::approvals::ApprovalRegistry;
use super::bus::EventBus;
use super::error::CoreError;
use super::event::{EventKind, PendingInfo, SessionEvent};
use super::ids::new_id;
use super::limits::{MAX_REF_ID_LEN, MAX_TEXT_BYTES, check_len};
use super::options::{CoreOptions, ModelFactory};
use super::remembered::Remembered;
use super::restart::{ExpiredApproval, expire_stale_approvals};
use super::runtime::{AgentParts, SessionRuntime};
use super::scan_mark::{ScanJournal, ScanPlan};
use super::streams::{EventStream, Snapshot, TurnStream};
use super::turns::AcceptError;
use crate::agent::SystemPromptSource;
use crate::clock::SystemClock;
use crate::mcp::{McpManager, hub_catalog};
use crate::persona::PersonaLoader;
use crate::store::{IdKind, SessionStore, validate_id};

/// The channel a request names when it names none.
pub const DEFAULT_CHANNEL: &str = "api";
/// The longest channel name, in bytes.
pub const MAX_CHANNEL_LEN: usize = 64;
/// The longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;
/// The longest user text, in characters.
pub const MAX_TEXT_CHARS: usize = 100_000;
/// How long shutdown waits for the session workers.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// A turn to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartTurn {
    pub session_id: String,
    pub text: String,
    /// Empty: [`DEFAULT_CHANNEL`].
    pub channel: String,
    /// Empty: no deduplication.
    pub idempotency_key: String,
}

pub use crate::tool::ToolSummary;

/// Sessions whose last seq is remembered after they leave memory.
pub const REMEMBERED_SEQS: usize = 4096;
/// Channels whose last listing is remembered.
pub const REMEMBERED_LISTINGS: usize = 64;
/// Session ids remembered per listing (an index past them is listed afresh).
pub const MAX_LISTED_IDS: usize = 1000;

pub(crate) struct CoreInner {
    pub(crate) parts: AgentParts,
    /// This process's event numbering (see [`HubCore::stream_id`]).
    stream_id: String,
    pub(super) open: tokio::sync::Mutex<HashMap<String, Arc<SessionRuntime>>>,
    pub(super) open_count: AtomicUsize,
    pub(super) workers: Mutex<HashMap<String, JoinHandle<()>>>,
    /// The last seq of sessions that left memory (one number each, for sessions that exist; the
    /// oldest forgotten past [`REMEMBERED_SEQS`]).
    pub(super) last_seqs: Mutex<Remembered<u64>>,
    /// Wakes the idle reaper when a session opens (it sleeps without a timer while none is).
    pub(super) opened: tokio::sync::Notify,
    /// How many times the idle reaper has looked for idle sessions.
    pub(super) reaper_passes: AtomicU64,
    /// The last listing per channel, for `OpenSession.index` (at most [`REMEMBERED_LISTINGS`]
    /// channels, each at most [`MAX_LISTED_IDS`] ids).
    pub(crate) listings: Mutex<Remembered<Vec<String>>>,
    ids: AtomicU64,
    closing: AtomicBool,
    pub(crate) stop: CancellationToken,
}

/// The hub's domain core. Cheap to clone.
#[derive(Clone)]
pub struct HubCore {
    pub(crate) inner: Arc<CoreInner>,
}

impl std::fmt::Debug for HubCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubCore")
            .field("backend", &self.backend_name())
            .field("open_sessions", &self.open_sessions())
            .finish()
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `channel`, or the default for an empty one; refused unless a short plain name.
pub fn check_channel(channel: &str) -> Result<String, CoreError> {
    if channel.is_empty() {
        return Ok(DEFAULT_CHANNEL.to_owned());
    }
    if channel.len() > MAX_CHANNEL_LEN {
        return Err(CoreError::InvalidArgument(format!(
            "channel is {} bytes long; at most {MAX_CHANNEL_LEN} are allowed",
            channel.len()
        )));
    }
    let plain = channel
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !plain {
        return Err(CoreError::InvalidArgument(format!(
            "channel {:?} is not a plain name (letters, digits, '-', '_', '.'; at most {MAX_CHANNEL_LEN})",
            channel.chars().take(80).collect::<String>()
        )));
    }
    Ok(channel.to_owned())
}

/// A session id from a request, checked.
pub fn check_session_id(session_id: &str) -> Result<(), CoreError> {
    if session_id.is_empty() {
        return Err(CoreError::InvalidArgument("session_id is empty".to_owned()));
    }
    validate_id(IdKind::Session, session_id).map_err(CoreError::from)
}

impl HubCore {
    /// A core over `store`. Fails when the persona directory is configured but unreadable.
    pub fn new(
        store: Arc<dyn SessionStore>,
        options: CoreOptions,
        factory: Arc<dyn ModelFactory>,
    ) -> Result<Self, CoreError> {
        let clock = Arc::new(SystemClock);
        let persona: Arc<dyn SystemPromptSource> = match &options.persona_dir {
            Some(dir) => Arc::new(
                PersonaLoader::new(dir, &options.profile, &options.host_role, Vec::new(), clock)
                    .map_err(|e| CoreError::FailedPrecondition(e.to_string()))?,
            ),
            None => Arc::new(PersonaLoader::shipped(
                &options.profile,
                &options.host_role,
                Vec::new(),
                clock,
            )),
        };
        let options_mcp = options.mcp_servers.clone();
        let journal = options
            .approval_scan_mark
            .as_ref()
            .map(|path| Arc::new(ScanJournal::new(path, store.backend_name())));
        Ok(Self {
            inner: Arc::new(CoreInner {
                parts: AgentParts {
                    store,
                    options,
                    factory,
                    persona,
                    registry: ApprovalRegistry::new(),
                    journal,
                    mcp: Arc::new(McpManager::new(options_mcp)),
                },
                stream_id: new_id("stream", 0),
                open: tokio::sync::Mutex::new(HashMap::new()),
                open_count: AtomicUsize::new(0),
                workers: Mutex::new(HashMap::new()),
                last_seqs: Mutex::new(Remembered::new(REMEMBERED_SEQS)),
                opened: tokio::sync::Notify::new(),
                reaper_passes: AtomicU64::new(0),
                listings: Mutex::new(Remembered::new(REMEMBERED_LISTINGS)),
                ids: AtomicU64::new(0),
                closing: AtomicBool::new(false),
                stop: CancellationToken::new(),
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
        super::reaper::spawn(self);
        Ok(expired)
    }

    /// Stops: cancels every turn, resolves pending approvals as cancelled, waits for the workers.
    pub async fn shutdown(&self) {
        self.inner.closing.store(true, Ordering::SeqCst);
        self.inner.stop.cancel();
        let runtimes: Vec<Arc<SessionRuntime>> = {
            let mut open = self.inner.open.lock().await;
            self.inner.open_count.store(0, Ordering::Relaxed);
            open.drain().map(|(_, runtime)| runtime).collect()
        };
        for runtime in &runtimes {
            runtime.cancel(None);
            runtime.stop.cancel();
            self.registry().cancel_session(&runtime.session_id);
        }
        let workers: Vec<JoinHandle<()>> = lock(&self.inner.workers)
            .drain()
            .map(|(_, worker)| worker)
            .collect();
        let waiting = futures::future::join_all(workers);
        if tokio::time::timeout(SHUTDOWN_WAIT, waiting).await.is_err() {
            warn!("some session workers did not stop in time");
        }
        self.inner.parts.mcp.stop(SHUTDOWN_WAIT).await;
    }

    /// The MCP servers (status, tools).
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

    /// Sessions with an agent in memory.
    pub fn open_sessions(&self) -> usize {
        self.inner.open_count.load(Ordering::Relaxed)
    }

    /// The tools an agent may call.
    pub fn tools(&self) -> Vec<ToolSummary> {
        let disabled = &self.options().disabled_tools;
        match hub_catalog(Arc::new(SystemClock), disabled, &self.inner.parts.mcp) {
            Ok(catalog) => {
                let mut tools: Vec<ToolSummary> = catalog
                    .entries()
                    .iter()
                    .map(|entry| ToolSummary {
                        name: entry.name().to_owned(),
                        tier: Some(entry.tier()),
                        description: entry.spec().description.clone(),
                        effect: entry.spec().effect().to_owned(),
                        server: entry.distribution().strip_prefix("mcp:").map(str::to_owned),
                        state: "ready".to_owned(),
                    })
                    .collect();
                tools.extend(crate::mcp::not_offered(&self.inner.parts.mcp));
                tools
            }
            Err(error) => {
                warn!("cannot list the tools: {error}");
                Vec::new()
            }
        }
    }

    /// Sessions the core keeps anything for in memory: an open agent (with its bus), or the
    /// remembered last seq of one that left memory. Never more than the sessions that exist.
    pub fn sessions_tracked(&self) -> usize {
        self.open_sessions() + lock(&self.inner.last_seqs).len()
    }

    /// The open runtime of a session, opening it (on `pin`, else its stored role, else the default
    /// role) when it is not in memory.
    pub(crate) async fn runtime(
        &self,
        session_id: &str,
        pin: Option<&str>,
    ) -> Result<Arc<SessionRuntime>, CoreError> {
        check_session_id(session_id)?;
        let mut open = self.inner.open.lock().await;
        if let Some(runtime) = open.get(session_id) {
            runtime.touch();
            return Ok(Arc::clone(runtime));
        }
        if self.inner.closing.load(Ordering::SeqCst) {
            return Err(CoreError::Unavailable("the hub is stopping".to_owned()));
        }
        let max_open = self.options().max_open_sessions;
        if open.len() >= max_open && !self.retire_least_recent(&mut open) {
            return Err(CoreError::ResourceExhausted(format!(
                "{} sessions are open in memory and each has a turn, a client or an approval (at most {max_open}); try again when one is done",
                open.len()
            )));
        }
        let last_seq = lock(&self.inner.last_seqs)
            .get(session_id)
            .copied()
            .unwrap_or(0);
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
        lock(&self.inner.last_seqs).remove(session_id);
        let runtime = Arc::new(runtime);
        let worker = tokio::spawn(super::supervise::run_watched(
            self.clone(),
            Arc::clone(&runtime),
        ));
        lock(&self.inner.workers).insert(session_id.to_owned(), worker);
        open.insert(session_id.to_owned(), Arc::clone(&runtime));
        self.inner.open_count.store(open.len(), Ordering::Relaxed);
        self.inner.opened.notify_one();
        info!(session_id, role = %runtime.role(), "session opened");
        Ok(runtime)
    }

    /// The open runtime of a session, if it is in memory.
    pub(crate) async fn open_runtime(&self, session_id: &str) -> Option<Arc<SessionRuntime>> {
        self.inner.open.lock().await.get(session_id).cloned()
    }

    fn new_turn_id(&self) -> String {
        new_id("turn", self.inner.ids.fetch_add(1, Ordering::Relaxed))
    }

    /// Starts a turn (or finds the one its idempotency key names) and streams its events.
    pub async fn start_turn(&self, request: StartTurn) -> Result<TurnStream, CoreError> {
        let channel = check_channel(&request.channel)?;
        if request.text.trim().is_empty() {
            return Err(CoreError::InvalidArgument("text is empty".to_owned()));
        }
        check_len("text", &request.text, MAX_TEXT_BYTES)?;
        if request.text.chars().count() > MAX_TEXT_CHARS {
            return Err(CoreError::InvalidArgument(format!(
                "text is longer than {MAX_TEXT_CHARS} characters"
            )));
        }
        if request.idempotency_key.len() > MAX_IDEMPOTENCY_KEY_LEN {
            return Err(CoreError::InvalidArgument(format!(
                "idempotency_key is {} bytes long; at most {MAX_IDEMPOTENCY_KEY_LEN} are allowed",
                request.idempotency_key.len()
            )));
        }
        let key = (!request.idempotency_key.is_empty()).then(|| request.idempotency_key.clone());
        let max_queued = self.options().max_queued_turns;
        for _ in 0..2 {
            let runtime = self.runtime(&request.session_id, None).await?;
            // Attach first, to the turn about to be made: an approval the turn asks at once must
            // find its stream attached.
            let fresh_id = self.new_turn_id();
            let attachment = self
                .registry()
                .attach_turn(&runtime.bus, &channel, &fresh_id)?;
            let accepted = match runtime.accept(
                request.text.clone(),
                channel.clone(),
                key.clone(),
                max_queued,
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
            if accepted.turn_id != fresh_id {
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
            check_len("turn_id", turn_id, MAX_REF_ID_LEN)?;
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
            check_len("stream_id", stream_id, MAX_REF_ID_LEN)?;
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

    /// Pending approvals, oldest first.
    pub fn list_pending(&self, session_id: Option<&str>) -> Result<Vec<PendingInfo>, CoreError> {
        if let Some(id) = session_id {
            check_session_id(id)?;
        }
        Ok(self.registry().list_pending(session_id))
    }
}
