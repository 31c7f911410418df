//! The session operations `HubCore` delegates to, each a function of the core's state
//! ([`CoreState`]): list, get (the summary from the store's count, never the messages; messages
//! all or by the page, newest first), open (new, by id, by index of the channel's last listing,
//! most recent; with an optional role pin), switch role, compact (through
//! `crate::context::compact_session`), read events; and the types they answer with.
//!
//! Invariants: every store call runs on a blocking thread; a listing is remembered per channel for
//! `index`; a role must be one tau.toml defines (the default role when it defines none); a session
//! remembers the role it last ran on; a role switch builds the new agent first, so a failure
//! changes nothing.

use std::sync::Arc;

use serde_json::Value;

use super::core_state::{CoreState, Created};
use crate::agent::TauAgent;
use crate::context::{CompactRequest, CompactionError, SummaryCall, compact_session};
use crate::hub::error::CoreError;
use crate::hub::events::EventKind;
use crate::hub::limits::{
    check_channel, check_focus, check_listing_index, check_ref_id, check_role, check_session_id,
};
use crate::message::Message;
use crate::store::{
    DEFAULT_AGENT_ID, RECENT_SESSIONS_LIMIT, SessionAgent, SessionMessage, SessionMeta,
    SessionStore, create_fresh_complete_session, most_recent_session, now_utc, recent_sessions,
};

/// A session as listings and snapshots show it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionSummary {
    pub session_id: String,
    /// 1-based position in the listing it came from; 0 outside one.
    pub index: u32,
    /// RFC 3339, UTC.
    pub created_at: String,
    pub updated_at: String,
    pub channel: String,
    pub title: String,
    pub message_count: u64,
    pub role: String,
    pub profile: String,
    pub compacted_from: String,
    pub compacted_to: String,
    pub context: String,
}

/// A session with its stored messages.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionDetail {
    pub summary: SessionSummary,
    /// `(index, message, created_at)`: oldest first, or newest first for a page (empty unless
    /// asked for).
    pub messages: Vec<(u64, Message, String)>,
    /// For a page: the `before` of the next, older page; `None` on the last.
    pub next_before: Option<u64>,
    /// Whether an agent is in memory, and whether a turn runs or waits.
    pub open: bool,
    pub busy: bool,
    /// For an open session: the agent's in-memory message count, and whether the last model
    /// call was answered by the role's fallback.
    pub in_memory_messages: u64,
    pub fallback_in_use: bool,
}

/// Messages per page when a page asks for none, and the most a page holds.
pub const DEFAULT_PAGE_SIZE: usize = 100;
pub const MAX_PAGE_SIZE: usize = 1_000;

/// Which stored messages `get_session_with` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageSelection {
    None,
    /// Every message, oldest first.
    All,
    /// The newest `size` messages below index `before` (the newest of all when `None`), newest
    /// first; a `size` of 0 is [`DEFAULT_PAGE_SIZE`], and more than [`MAX_PAGE_SIZE`] is cut.
    Page {
        size: usize,
        before: Option<u64>,
    },
}

/// Stored messages as a detail shows them, and the cursor of the next page.
type SelectedMessages = (Vec<(u64, Message, String)>, Option<u64>);

impl MessageSelection {
    /// Reads the selected messages of the default agent (blocking).
    fn read(self, store: &dyn SessionStore, id: &str) -> Result<SelectedMessages, CoreError> {
        let shown = |m: SessionMessage| {
            let message = m.to_message().clone();
            (m.message_id, message, m.created_at.to_string())
        };
        match self {
            Self::None => Ok((Vec::new(), None)),
            Self::All => {
                let all = store.list_messages(id, DEFAULT_AGENT_ID, None, 0)?;
                Ok((all.into_iter().map(shown).collect(), None))
            }
            Self::Page { size, before } => {
                let size = match size {
                    0 => DEFAULT_PAGE_SIZE,
                    n => n.min(MAX_PAGE_SIZE),
                };
                let page = store.list_messages_before(id, DEFAULT_AGENT_ID, before, size)?;
                // Ids are positions, so a page starting at 0 is the last; a short page is too.
                let next = page
                    .first()
                    .map(|m| m.message_id)
                    .filter(|&oldest| oldest > 0 && page.len() == size);
                Ok((page.into_iter().rev().map(shown).collect(), next))
            }
        }
    }
}

/// Which session to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenTarget {
    New,
    Id(String),
    /// 1-based index of the channel's last listing.
    Index(u32),
    MostRecent,
}

/// An opened session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub session: SessionSummary,
    pub resumed: bool,
    pub role: String,
}

/// What a compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// The new session, which starts from the summary.
    pub session: SessionSummary,
    pub previous_session_id: String,
    pub summarized_messages: u64,
    pub summary: String,
}

/// What a role switch did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleSwitch {
    pub session_id: String,
    pub role: String,
    pub previous_role: String,
}

fn fill_meta(summary: &mut SessionSummary, meta: SessionMeta) {
    summary.channel = meta.channel.unwrap_or_default();
    summary.title = meta.title.unwrap_or_default();
    summary.role = meta.role.unwrap_or_default();
    summary.profile = meta.profile.unwrap_or_default();
    summary.compacted_from = meta.compacted_from.unwrap_or_default();
    summary.compacted_to = meta.compacted_to.unwrap_or_default();
    summary.context = meta
        .context
        .map(|c| c.as_str().to_owned())
        .unwrap_or_default();
}

/// The summary of one stored session (blocking): its record's count and times, never its
/// messages.
fn read_summary(store: &dyn SessionStore, session_id: &str) -> Result<SessionSummary, CoreError> {
    let session = store
        .session_info(session_id)?
        .ok_or_else(|| CoreError::session_not_found(session_id))?;
    let mut summary = SessionSummary {
        session_id: session.session_id,
        created_at: session.created_at.to_string(),
        updated_at: session.updated_at.to_string(),
        message_count: session.message_count,
        ..SessionSummary::default()
    };
    if let Some(meta) = store.read_meta(session_id)? {
        fill_meta(&mut summary, meta);
    }
    Ok(summary)
}

/// The summary of a session; `NotFound` when it does not exist.
pub(in crate::hub) async fn summary(
    state: &Arc<CoreState>,
    session_id: &str,
) -> Result<SessionSummary, CoreError> {
    check_session_id(session_id)?;
    state.settle_titles().await;
    let id = session_id.to_owned();
    state.blocking(move |store| read_summary(store, &id)).await
}

/// `NotFound` unless the session exists.
pub(in crate::hub) async fn require_session(
    state: &Arc<CoreState>,
    session_id: &str,
) -> Result<(), CoreError> {
    let id = session_id.to_owned();
    state
        .blocking(move |store| {
            store
                .read_session(&id)?
                .map(|_| ())
                .ok_or_else(|| CoreError::session_not_found(&id))
        })
        .await
}

/// The most recent sessions with messages (default 10), newest first; remembered per channel.
pub(in crate::hub) async fn list_sessions(
    state: &Arc<CoreState>,
    limit: usize,
    channel: &str,
    exclude: Option<&str>,
) -> Result<Vec<SessionSummary>, CoreError> {
    let channel = check_channel(channel)?;
    check_ref_id("exclude_session_id", exclude.unwrap_or_default())?;
    let limit = if limit == 0 {
        RECENT_SESSIONS_LIMIT
    } else {
        limit
    };
    let exclude = exclude.filter(|e| !e.is_empty()).map(str::to_owned);
    state.settle_titles().await;
    let listing = state
        .blocking(move |store| {
            let listing = recent_sessions(store, limit, exclude.as_deref())?;
            let mut summaries = Vec::with_capacity(listing.len());
            for entry in listing {
                let mut summary = SessionSummary {
                    session_id: entry.session_id.clone(),
                    index: u32::try_from(entry.index).unwrap_or(u32::MAX),
                    updated_at: entry.updated_at.to_string(),
                    message_count: entry.message_count,
                    ..SessionSummary::default()
                };
                if let Some(session) = store.read_session(&entry.session_id)? {
                    summary.created_at = session.created_at.to_string();
                }
                if let Some(meta) = store.read_meta(&entry.session_id)? {
                    fill_meta(&mut summary, meta);
                }
                summaries.push(summary);
            }
            Ok(summaries)
        })
        .await?;
    state
        .listings()
        .remember(channel, listing.iter().map(|s| s.session_id.clone()));
    Ok(listing)
}

/// A session's metadata and, when asked, all its stored messages.
pub(in crate::hub) async fn get_session(
    state: &Arc<CoreState>,
    session_id: &str,
    include_messages: bool,
) -> Result<SessionDetail, CoreError> {
    let selection = if include_messages {
        MessageSelection::All
    } else {
        MessageSelection::None
    };
    get_session_with(state, session_id, selection).await
}

/// A session's metadata and the stored messages `selection` names: a page reads only its
/// messages, the summary none.
pub(in crate::hub) async fn get_session_with(
    state: &Arc<CoreState>,
    session_id: &str,
    selection: MessageSelection,
) -> Result<SessionDetail, CoreError> {
    check_session_id(session_id)?;
    state.settle_titles().await;
    let id = session_id.to_owned();
    let (summary, (messages, next_before)) = state
        .blocking(move |store| {
            let summary = read_summary(store, &id)?;
            let messages = if summary.message_count > 0 {
                selection.read(store, &id)?
            } else {
                (Vec::new(), None)
            };
            Ok((summary, messages))
        })
        .await?;
    let runtime = state.open_runtime(session_id).await;
    let agent = runtime.as_ref().map(|r| r.agent().0);
    Ok(SessionDetail {
        summary,
        messages,
        next_before,
        open: runtime.is_some(),
        busy: runtime.as_ref().is_some_and(|r| r.turns.lock().busy()),
        in_memory_messages: agent
            .as_ref()
            .map_or(0, |a| u64::try_from(a.history_len()).unwrap_or(u64::MAX)),
        fallback_in_use: agent.as_ref().is_some_and(TauAgent::fallback_in_use),
    })
}

/// Opens a session for turns.
pub(in crate::hub) async fn open_session(
    state: &Arc<CoreState>,
    target: OpenTarget,
    role: Option<&str>,
    channel: &str,
    exclude: Option<&str>,
) -> Result<Opened, CoreError> {
    let channel = check_channel(channel)?;
    check_role(role.unwrap_or_default())?;
    check_ref_id("exclude_session_id", exclude.unwrap_or_default())?;
    let role = role.filter(|r| !r.is_empty());
    if let Some(role) = role
        && !state.options().knows_role(role)
    {
        return Err(CoreError::unknown_role(role));
    }
    let exclude = exclude.filter(|e| !e.is_empty()).map(str::to_owned);
    let (session_id, resumed) = match target {
        OpenTarget::New => (create_session(state, &channel, role, None).await?, false),
        OpenTarget::Id(id) => {
            check_session_id(&id)?;
            require_session(state, &id).await?;
            (id, true)
        }
        OpenTarget::Index(n) => (by_index(state, &channel, n).await?, true),
        OpenTarget::MostRecent => {
            let found = state
                .blocking(move |store| Ok(most_recent_session(store, exclude.as_deref())?))
                .await?;
            let found = found.ok_or_else(|| {
                CoreError::NotFound("there is no earlier session with messages".to_owned())
            })?;
            (found.session_id, true)
        }
    };
    let runtime = state.runtime(&session_id, role).await?;
    if let Some(role) = role
        && runtime.role() != role
    {
        switch_role(state, &session_id, role).await?;
    }
    let session = summary(state, &session_id).await?;
    Ok(Opened {
        role: runtime.role(),
        session,
        resumed,
    })
}

/// Creates a new, empty session on `channel` (on `role`, else the default role), titled from
/// `first_text` when given (the text of the turn it is created for), and opens it from what was
/// written (nothing is read back: `tau ask` waits for this); returns its id once it is created.
pub(in crate::hub) async fn create_session(
    state: &Arc<CoreState>,
    channel: &str,
    role: Option<&str>,
    first_text: Option<&str>,
) -> Result<String, CoreError> {
    let mut meta = SessionMeta {
        channel: Some(channel.to_owned()),
        profile: Some(state.options().profile.clone()),
        role: Some(role.map_or_else(|| state.options().default_role.clone(), str::to_owned)),
        context: Some(state.options().context),
        ..SessionMeta::default()
    };
    if let Some(text) = first_text {
        meta.set_title_if_missing(text);
    }
    // The record, its metadata and its agent in one step: the stores make it durable with one
    // pass of syncs (file) or one commit (sqlite), not one per record.
    let agent = SessionAgent::new(DEFAULT_AGENT_ID, state.options().context, now_utc());
    let created = Created {
        role: meta.role.clone().unwrap_or_default(),
        titled: meta.title.as_ref().is_some_and(|t| !t.is_empty()),
        agent: Box::new(agent.clone()),
    };
    let session_id = state
        .blocking(move |store| {
            Ok(create_fresh_complete_session(
                store,
                agent,
                Vec::new(),
                meta,
            )?)
        })
        .await?;
    // The session exists from here on, whatever the opening says: a caller keyed by an
    // idempotency key must get this id again. An opening refused (every open session in use) is
    // refused again, and reported, when the caller opens it for its turn.
    if let Err(error) = state.runtime_of_created(&session_id, created).await {
        tracing::debug!(%session_id, %error, "a new session was not opened at once");
    }
    Ok(session_id)
}

async fn by_index(state: &Arc<CoreState>, channel: &str, n: u32) -> Result<String, CoreError> {
    check_listing_index(n)?;
    let remembered = state.listings().get(channel);
    let ids = match remembered {
        Some(ids) => ids,
        None => list_sessions(state, 0, channel, None)
            .await?
            .into_iter()
            .map(|s| s.session_id)
            .collect(),
    };
    let position = usize::try_from(n - 1).unwrap_or(usize::MAX);
    ids.get(position).cloned().ok_or_else(|| {
        CoreError::NotFound(format!(
            "there is no session {n} in the last listing ({} sessions)",
            ids.len()
        ))
    })
}

/// Rebuilds a session's agent on another role (`/model`).
pub(in crate::hub) async fn switch_role(
    state: &Arc<CoreState>,
    session_id: &str,
    role: &str,
) -> Result<RoleSwitch, CoreError> {
    check_role(role)?;
    if !state.options().knows_role(role) {
        return Err(CoreError::unknown_role(role));
    }
    let runtime = state.runtime(session_id, None).await?;
    let _agent = runtime
        .lock_agent_idle(
            "a turn is running or waiting in this session; switch the role when it has finished",
        )
        .await?;
    // The metadata is rewritten below: a title still being written lands first.
    runtime.settle_title().await;
    let current = runtime.role();
    if current == role {
        return Ok(RoleSwitch {
            session_id: session_id.to_owned(),
            role: role.to_owned(),
            previous_role: current,
        });
    }
    let shared = Arc::clone(state);
    let worker_runtime = Arc::clone(&runtime);
    let wanted = role.to_owned();
    let slot = tokio::task::spawn_blocking(move || {
        let slot = worker_runtime.build_for_role(shared.parts(), &wanted)?;
        let store = shared.store();
        let mut meta = store
            .read_meta(&worker_runtime.session_id)?
            .unwrap_or_default();
        meta.role = Some(wanted);
        store.write_meta(&worker_runtime.session_id, &meta)?;
        Ok::<_, CoreError>(slot)
    })
    .await
    .map_err(|e| CoreError::Unavailable(e.to_string()))??;
    let previous = runtime.replace_agent(slot);
    runtime.bus.publish(
        None,
        EventKind::RoleSwitched {
            role: role.to_owned(),
            previous_role: previous.clone(),
        },
    );
    Ok(RoleSwitch {
        session_id: session_id.to_owned(),
        role: role.to_owned(),
        previous_role: previous,
    })
}

/// Summarizes a session into a new one that starts from the summary (the session's own
/// model writes it; the old session keeps every message). Refused while a turn runs or waits;
/// a failed summary changes nothing.
pub(in crate::hub) async fn compact(
    state: &Arc<CoreState>,
    session_id: &str,
    focus: &str,
    channel: &str,
) -> Result<Compacted, CoreError> {
    let channel = check_channel(channel)?;
    check_focus(focus)?;
    let runtime = state.runtime(session_id, None).await?;
    let _agent = runtime
        .lock_agent_idle(
            "a turn is running or waiting in this session; compact it when it has finished",
        )
        .await?;
    // The old session's metadata is read (its title) and rewritten: a title's write lands first.
    runtime.settle_title().await;
    let (agent, _) = runtime.agent();
    let model = agent.model();
    let call = SummaryCall::new(model.as_ref(), state.stop_token());
    let mut request = CompactRequest::new(session_id, state.options().context);
    request.focus = Some(focus.trim().to_owned()).filter(|f| !f.is_empty());
    request.messages = Some(agent.messages_as_recorded());
    request.meta = SessionMeta {
        channel: Some(channel),
        profile: Some(state.options().profile.clone()),
        role: Some(runtime.role()),
        ..SessionMeta::default()
    };
    let outcome = compact_session(Arc::clone(state.store()), &call, request)
        .await
        .map_err(|e| match e {
            CompactionError::Store(store) => CoreError::from(store),
            CompactionError::EmptyHistory => CoreError::FailedPrecondition(e.to_string()),
            other => CoreError::Unavailable(format!(
                "could not compact the session: {other}; nothing changed"
            )),
        })?;
    let session = summary(state, &outcome.new_session_id).await?;
    Ok(Compacted {
        session,
        previous_session_id: outcome.previous_session_id,
        summarized_messages: u64::try_from(outcome.summarized_count).unwrap_or(u64::MAX),
        summary: outcome.summary,
    })
}

/// The stored agent events of a session, oldest first.
pub(in crate::hub) async fn read_events(
    state: &Arc<CoreState>,
    session_id: &str,
) -> Result<Vec<Value>, CoreError> {
    check_session_id(session_id)?;
    let id = session_id.to_owned();
    state
        .blocking(move |store| {
            store
                .read_session(&id)?
                .ok_or_else(|| CoreError::session_not_found(&id))?;
            Ok(store.read_events(&id)?)
        })
        .await
}
