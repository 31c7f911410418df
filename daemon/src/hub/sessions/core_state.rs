//! [`CoreState`]: what the hub core holds, behind the one [`HubCore`](crate::hub::HubCore) handle,
//! and what the session calls, the turn streams and the routines (`hub/routine_ops/`) take: what
//! building an agent needs, the open sessions, the channels' last listings, this process's event
//! numbering, the stop token and the routine engine; and the one way a session enters memory
//! (`runtime_from`: [`CoreState::runtime`] from the store, [`CoreState::runtime_of_created`] for a
//! session just created). It lives with the sessions because all it holds but the routine
//! engine is theirs, and everything that takes it works on a session.
//!
//! Invariants:
//! - Nothing is kept for a session that does not exist: it is looked up in the store before a
//!   bus or an agent is made for it, unless this hub has just created it (a [`Created`] opening
//!   starts from what the creation wrote, without reading it back).
//! - Opening a session reads the store on a blocking thread with the open map held, so a session
//!   is never opened twice; its worker starts watched (`supervise`), so a worker that dies takes
//!   its session out of memory with it.
//! - The sub-rooms of the hub take a `CoreState` (or less); none of them imports `HubCore`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;
use tracing::info;

use super::agent_build::{AgentParts, Restore};
use super::open_sessions::OpenSessions;
use super::remembered::{ChannelListings, NewSessionKeys};
use super::runtime::SessionRuntime;
use super::supervise::run_watched;
use crate::hub::approvals::ApprovalRegistry;
use crate::hub::error::CoreError;
use crate::hub::events::EventBus;
use crate::hub::ids::new_id;
use crate::hub::limits::check_session_id;
use crate::hub::options::CoreOptions;
use crate::routine::RoutineEngine;
use crate::store::{SessionAgent, SessionStore};

/// A session this hub has just created, as it was written: the role and agent record it was
/// created with, and whether it was titled.
pub(crate) struct Created {
    pub role: String,
    pub titled: bool,
    pub agent: Box<SessionAgent>,
}

/// How a session not in memory is opened.
enum Opening {
    /// From the store, on `pin`, else its stored role, else the default role.
    Stored { pin: Option<String> },
    /// From what its creation wrote.
    Created(Created),
}

/// The hub core's state.
pub(crate) struct CoreState {
    pub(in crate::hub) parts: AgentParts,
    /// This process's event numbering (see `HubCore::stream_id`).
    pub(in crate::hub) stream_id: String,
    pub(in crate::hub) sessions: Arc<OpenSessions>,
    /// How many times the idle reaper has looked for idle sessions.
    pub(in crate::hub) reaper_passes: Arc<AtomicU64>,
    /// The last listing per channel, for `OpenSession.index`.
    pub(in crate::hub) listings: ChannelListings,
    /// The sessions `new_session` made per idempotency key.
    pub(in crate::hub) new_session_keys: NewSessionKeys,
    pub(in crate::hub) ids: AtomicU64,
    pub(in crate::hub) stop: CancellationToken,
    /// The routine engine, once `start` opened it (see `hub/routine_ops/`).
    pub(in crate::hub) routines: OnceLock<RoutineEngine>,
}

impl CoreState {
    /// What building a session's agent needs.
    pub(in crate::hub) fn parts(&self) -> &AgentParts {
        &self.parts
    }

    pub(in crate::hub) fn options(&self) -> &CoreOptions {
        &self.parts.options
    }

    pub(in crate::hub) fn registry(&self) -> &Arc<ApprovalRegistry> {
        &self.parts.registry
    }

    pub(in crate::hub) fn store(&self) -> &Arc<dyn SessionStore> {
        &self.parts.store
    }

    /// The remembered listings per channel.
    pub(in crate::hub) fn listings(&self) -> &ChannelListings {
        &self.listings
    }

    /// A token cancelled when the hub stops (for work a call starts, such as a summary).
    pub(in crate::hub) fn stop_token(&self) -> CancellationToken {
        self.stop.child_token()
    }

    pub(in crate::hub) fn new_turn_id(&self) -> String {
        new_id("turn", self.ids.fetch_add(1, Ordering::Relaxed))
    }

    /// Runs `work` on the store on a blocking thread.
    pub(in crate::hub) async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&dyn SessionStore) -> Result<T, CoreError> + Send + 'static,
    ) -> Result<T, CoreError> {
        let store = Arc::clone(self.store());
        tokio::task::spawn_blocking(move || work(store.as_ref()))
            .await
            .map_err(|e| CoreError::Unavailable(e.to_string()))?
    }

    /// The role a session opens on: the pin, else its stored role (if still defined), else the
    /// default; recorded in its metadata (blocking). Also whether the session has a title (so its
    /// turns need not look).
    pub(crate) fn resolve_role(
        &self,
        session_id: &str,
        pin: Option<&str>,
    ) -> Result<(String, bool), CoreError> {
        let options = self.options();
        let store = self.store();
        store
            .read_session(session_id)?
            .ok_or_else(|| CoreError::session_not_found(session_id))?;
        let mut meta = store.read_meta(session_id)?.unwrap_or_default();
        let role = match pin {
            Some(role) if options.knows_role(role) => role.to_owned(),
            Some(role) => return Err(CoreError::unknown_role(role)),
            None => meta
                .role
                .clone()
                .filter(|r| options.knows_role(r))
                .unwrap_or_else(|| options.default_role.clone()),
        };
        if meta.role.as_deref() != Some(role.as_str()) {
            meta.role = Some(role.clone());
            store.write_meta(session_id, &meta)?;
        }
        let titled = meta.title.is_some_and(|t| !t.is_empty());
        Ok((role, titled))
    }

    /// The open runtime of a session, opening it (on `pin`, else its stored role, else the default
    /// role) when it is not in memory.
    pub(crate) async fn runtime(
        self: &Arc<Self>,
        session_id: &str,
        pin: Option<&str>,
    ) -> Result<Arc<SessionRuntime>, CoreError> {
        let pin = pin.map(str::to_owned);
        self.runtime_from(session_id, Opening::Stored { pin }).await
    }

    /// The open runtime of a session [`create_session`](super::session_api) has just made
    /// (opened from what it wrote, not read back).
    pub(crate) async fn runtime_of_created(
        self: &Arc<Self>,
        session_id: &str,
        created: Created,
    ) -> Result<Arc<SessionRuntime>, CoreError> {
        self.runtime_from(session_id, Opening::Created(created))
            .await
    }

    async fn runtime_from(
        self: &Arc<Self>,
        session_id: &str,
        opening: Opening,
    ) -> Result<Arc<SessionRuntime>, CoreError> {
        check_session_id(session_id)?;
        let mut open = self.sessions.lock().await;
        if let Some(runtime) = open.get(session_id) {
            runtime.touch();
            return Ok(runtime);
        }
        open.make_room()?;
        let last_seq = open.last_seq(session_id);
        let state = Arc::clone(self);
        let id = session_id.to_owned();
        let runtime = tokio::task::spawn_blocking(move || {
            let (role, titled, restore) = match opening {
                Opening::Stored { pin } => {
                    // Fails for a session that does not exist, before anything is made for it.
                    let (role, titled) = state.resolve_role(&id, pin.as_deref())?;
                    (role, titled, Restore::Stored { carried: None })
                }
                Opening::Created(created) => (
                    created.role,
                    created.titled,
                    Restore::Created(created.agent),
                ),
            };
            let options = state.options();
            let bus = Arc::new(EventBus::continuing(
                id.as_str(),
                options.replay_buffer,
                options.subscriber_lag,
                last_seq,
            ));
            let runtime = SessionRuntime::open(&state.parts, &id, &role, bus, restore)?;
            if titled {
                runtime.mark_titled();
            }
            Ok::<_, CoreError>(runtime)
        })
        .await
        .map_err(|e| CoreError::Unavailable(e.to_string()))??;
        let runtime = Arc::new(runtime);
        let worker = tokio::spawn(run_watched(
            Arc::clone(&self.sessions),
            Arc::clone(&runtime),
        ));
        open.insert(Arc::clone(&runtime), worker);
        info!(session_id, role = %runtime.role(), "session opened");
        Ok(runtime)
    }

    /// Waits for the title writes running in open sessions (see `OpenSessions::settle_titles`):
    /// every read of sessions' metadata comes after it.
    pub(crate) async fn settle_titles(&self) {
        self.sessions.settle_titles().await;
    }

    /// The open runtime of a session, if it is in memory.
    pub(crate) async fn open_runtime(&self, session_id: &str) -> Option<Arc<SessionRuntime>> {
        self.sessions.get(session_id).await
    }
}
