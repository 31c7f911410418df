//! How an open session's agent is built: [`AgentParts`] (what every session's agent is made from,
//! shared by the hub), [`build_agent`] (the agent of one session on one role, its history restored
//! from the store) and [`AgentSlot`] (the agent with its recorder and role, as a
//! `SessionRuntime` holds it).
//!
//! Invariants:
//! - The store keeps every message. Under `sliding` the agent's history is restored from the
//!   stored conversation's window (`[agent] window_size`, cut where a window may start); under
//!   `summarize` from where the recorded summary ends, or the window when that lies further back
//!   (both read from the newest twice the window). Either way the agent's `ConversationWindow`
//!   (`crate::context::modes`) cuts what the model sees before every model call and lets the
//!   agent forget what no later view needs.
//! - A rebuilt agent takes over a pending repair notice: the one it is handed (a role switch), else
//!   the one recorded in the agent record while no message was stored since.
//! - Every model call goes through the spend meter ([`MeteredModel`]); a role over its daily
//!   budget is served by its fallback alone.
//! - Building reads the store: it runs on a blocking thread, never on the runtime's.

use std::sync::Arc;

use tracing::warn;

use super::recorder::SessionRecorder;
use crate::agent::{ConversationWindow, SystemPromptSource, TauAgent};
use crate::context::modes::{SlidingWindow, SummarizingWindow};
use crate::context::{
    sliding_window_start, sliding_window_start_in_tail, summarizing_window_start_in_tail,
};
use crate::hub::approvals::{
    ApprovalReadiness, ApprovalRegistry, ClientApprover, ScanJournal, TurnSlot,
};
use crate::hub::builtin_tools::BuiltinTools;
use crate::hub::error::CoreError;
use crate::hub::events::EventBus;
use crate::hub::options::{CoreOptions, ModelFactory, ModelFactoryError};
use crate::message::Message;
use crate::spend::{MeteredModel, SpendMeter};
use crate::store::{
    ContextMode, ConversationManagerState, DEFAULT_AGENT_ID, SessionAgent, SessionError,
    SessionMessage, SessionStore, now_utc, read_agent_for_mode,
};

/// What building an agent needs, shared by every session.
pub(crate) struct AgentParts {
    pub store: Arc<dyn SessionStore>,
    pub options: CoreOptions,
    pub factory: Arc<dyn ModelFactory>,
    pub persona: Arc<dyn SystemPromptSource>,
    pub registry: Arc<ApprovalRegistry>,
    /// Notes the sessions approvals are asked in, for the next start's scan.
    pub journal: Option<Arc<ScanJournal>>,
    /// The MCP servers; their tools join the catalog at each turn's start.
    pub mcp: Arc<crate::mcp::McpManager>,
    /// Counts every model call's spend and keeps roles within their daily budgets.
    pub spend: Arc<SpendMeter>,
    /// The built-in tools (with `schedule_routine` when routines are on), shared by every
    /// session's catalog.
    pub builtin_tools: BuiltinTools,
}

/// The agent of an open session, with the role it runs on.
#[derive(Clone)]
pub(crate) struct AgentSlot {
    pub agent: TauAgent,
    pub recorder: Arc<SessionRecorder>,
    pub role: String,
}

/// The stored messages an agent is restored from (blocking), and the id of the last stored one,
/// read from the newest twice the window: in sliding mode the window; in summarize mode the
/// messages from where the recorded summary (`state`) ends when the tail holds it, else the
/// sliding window (a later summary reads what it folds in). Every message is read only when the
/// tail cannot place them (it holds no clean start). The caller cuts the window from what it gets.
fn restored_messages(
    store: &dyn SessionStore,
    session_id: &str,
    options: &CoreOptions,
    state: &ConversationManagerState,
) -> Result<(Vec<SessionMessage>, Option<u64>), CoreError> {
    let limit = options.window_size.saturating_mul(2).max(1);
    let tail = store.list_messages_before(session_id, DEFAULT_AGENT_ID, None, limit)?;
    let whole = tail.len() < limit || tail.first().is_some_and(|m| m.message_id == 0);
    let messages: Vec<Message> = tail.iter().map(|m| m.to_message().clone()).collect();
    let start = match options.context {
        ContextMode::Sliding => sliding_window_start_in_tail(&messages, options.window_size, whole),
        ContextMode::Summarize => {
            let tail_first = tail.first().map_or(0, |m| m.message_id);
            summarizing_window_start_in_tail(
                &messages,
                usize::try_from(tail_first).unwrap_or(usize::MAX),
                state,
                options.window_size,
                whole,
            )
        }
    };
    if let Some(start) = start {
        let last_id = tail.last().map(|m| m.message_id);
        return Ok((tail.into_iter().skip(start).collect(), last_id));
    }
    let all = store.list_messages(session_id, DEFAULT_AGENT_ID, None, 0)?;
    let last_id = all.last().map(|m| m.message_id);
    Ok((all, last_id))
}

/// A stored session's agent record (created when missing), the messages its agent is restored
/// from and the id the next message gets (blocking).
fn stored_agent(
    store: &dyn SessionStore,
    session_id: &str,
    options: &CoreOptions,
) -> Result<(SessionAgent, Vec<SessionMessage>, u64), CoreError> {
    let record = match read_agent_for_mode(store, session_id, DEFAULT_AGENT_ID, options.context)? {
        Some(record) => record,
        None => {
            let record = SessionAgent::new(DEFAULT_AGENT_ID, options.context, now_utc());
            store.create_agent(session_id, &record)?;
            record
        }
    };
    let (stored, last_id) = restored_messages(
        store,
        session_id,
        options,
        &record.conversation_manager_state,
    )?;
    let next_id = match last_id {
        None => 0,
        // A damaged store may end at the last id there is: no message could follow it.
        Some(last) => last.checked_add(1).ok_or_else(|| {
            SessionError::corrupt(
                format!("message {last} of session {session_id}"),
                "its id is the last one there is",
            )
        })?,
    };
    // Past ids the store keeps but does not list (a journal it had to set aside).
    let next_id = next_id.max(store.message_id_floor(session_id, DEFAULT_AGENT_ID)?);
    Ok((record, stored, next_id))
}

/// Where an agent's record and history come from.
pub(crate) enum Restore {
    /// Read from the store (a session opened again, a role switch), the pending repair notice
    /// `carried` over from the agent this one replaces, if any.
    Stored { carried: Option<String> },
    /// A session this hub has just created with this agent record and no message: nothing to
    /// read back.
    Created(Box<SessionAgent>),
}

/// Builds the agent of `session_id` on `role` (blocking: reads the store unless the session was
/// just `Restore::Created`). Its pending repair notice is the one `carried` (from the agent it
/// replaces), else the one recorded in the agent record.
pub(super) fn build_agent(
    parts: &AgentParts,
    session_id: &str,
    role: &str,
    bus: &Arc<EventBus>,
    readiness: &Arc<ApprovalReadiness>,
    turn_slot: &Arc<TurnSlot>,
    restore: Restore,
) -> Result<AgentSlot, CoreError> {
    let options = &parts.options;
    let store = &parts.store;
    let (record, stored, next_id, carried) = match restore {
        Restore::Stored { carried } => {
            let (record, stored, next_id) = stored_agent(store.as_ref(), session_id, options)?;
            (record, stored, next_id, carried)
        }
        Restore::Created(record) => (*record, Vec::new(), 0, None),
    };
    let notice = carried.or_else(|| record.repair_notice(next_id));
    let first_id = stored.first().map(|m| m.message_id);
    let messages: Vec<Message> = stored.iter().map(|m| m.to_message().clone()).collect();
    drop(stored);
    // Sliding: only the window is restored. Summarize: from where the summary ends (or the
    // sliding window), the agent's position 0 being stored message `offset`.
    let start = match options.context {
        ContextMode::Sliding => sliding_window_start(&messages, options.window_size),
        ContextMode::Summarize => 0,
    };
    let window: Vec<Message> = messages.into_iter().skip(start).collect();
    let offset = usize::try_from(next_id)
        .unwrap_or(usize::MAX)
        .saturating_sub(window.len());
    // Ids read in order, ending at `next_id - 1`, are contiguous when the first is `offset`.
    let contiguous = first_id.is_none_or(|id| usize::try_from(id).is_ok_and(|id| id == offset));
    let model = metered_model(parts, role)?;
    let conversation_window: Arc<dyn ConversationWindow> = match options.context {
        ContextMode::Summarize if contiguous => Arc::new(SummarizingWindow::new(
            Arc::clone(&model),
            Arc::clone(store),
            session_id,
            options.window_size,
            offset,
            record,
        )),
        ContextMode::Summarize => {
            warn!(%session_id, "stored message ids have gaps; the model sees a sliding window");
            Arc::new(SlidingWindow::new(options.window_size))
        }
        ContextMode::Sliding => Arc::new(SlidingWindow::new(options.window_size)),
    };
    let catalog = parts
        .builtin_tools
        .catalog(&options.disabled_tools, &parts.mcp)
        .map_err(|e| CoreError::Unavailable(format!("tool catalog: {e}")))?;
    let lends = parts.builtin_tools.lends();
    let catalog_source: Option<crate::agent::CatalogSource> = (!parts.mcp.is_empty() || lends)
        .then(|| {
            let mcp = Arc::clone(&parts.mcp);
            let disabled = options.disabled_tools.clone();
            let builtin = parts.builtin_tools.clone();
            Arc::new(move || {
                builtin.catalog(&disabled, &mcp).unwrap_or_else(|e| {
                    warn!("tool catalog: {e}");
                    crate::tool::ToolCatalog::new()
                })
            }) as crate::agent::CatalogSource
        });
    let recorder = Arc::new(
        SessionRecorder::new(
            Arc::clone(store),
            session_id,
            offset,
            Arc::clone(bus),
            Arc::clone(readiness),
            Arc::clone(turn_slot),
        )
        .with_journal(parts.journal.clone()),
    );
    let approver = Arc::new(ClientApprover::new(
        Arc::clone(&parts.registry),
        Arc::clone(bus),
        Arc::clone(readiness),
        Arc::clone(turn_slot),
    ));
    let mut agent = TauAgent::builder(model).catalog(catalog);
    if let Some(source) = catalog_source {
        agent = agent.catalog_source(source);
    }
    let agent = agent
        .approver(approver)
        .event_sink(Arc::clone(&recorder) as _)
        .gate_timeout(options.approval_timeout)
        .history(window)
        .pending_notice(notice)
        .conversation_window(conversation_window)
        .history_observer(Arc::clone(&recorder) as _)
        .system_prompt(Arc::clone(&parts.persona))
        .limits(options.limits)
        .session_id(session_id)
        .profile(options.profile.as_str())
        .build();
    Ok(AgentSlot {
        agent,
        recorder,
        role: role.to_owned(),
    })
}

/// The model of `role`, under the spend meter (its fallback model alone serves a role over its
/// daily budget).
fn metered_model(
    parts: &AgentParts,
    role: &str,
) -> Result<Arc<dyn crate::model::Model>, CoreError> {
    let config = parts.options.roles.get(role);
    let failed = |e: ModelFactoryError| CoreError::FailedPrecondition(e.to_string());
    let model = parts.factory.build(role, config).map_err(failed)?;
    let fallback = parts.factory.build_fallback(role, config).map_err(failed)?;
    Ok(Arc::new(MeteredModel::new(
        role,
        model,
        fallback,
        Arc::clone(&parts.spend),
    )))
}
