//! `/compact [focus]`: a long conversation goes on in a new session that starts from a summary,
//! while the old session stays on record.
//!
//! [`compact_session`] summarizes the history with the agent's own model ([`summarize`]), opens a
//! new session whose stored history is [`seed_messages`] (so it survives `--resume`), writes
//! `compacted_from` on the new session and `compacted_to` on the old one. The channel then prints
//! the `compact.done` message of the UI table with [`CompactionOutcome::message_args`].
//!
//! Invariants:
//! - An empty history, a failed, cancelled, timed-out or stopped model call and an empty reply are
//!   [`CompactionError`]s, and nothing in the store has changed.
//! - The old session keeps every message; only its metadata gains `compacted_to`, and only after the
//!   new session is complete (agent record, both seed messages, metadata), so it never points at a
//!   half-written session. The new session is written with `create_complete_session`, so with the
//!   built-in backends a store failure part way leaves no half-written session visible either.
//! - Store I/O runs on blocking threads (`spawn_blocking`), never on the async executor.
//!
//! [`summarize`]: fn@crate::context::summarize

use std::fmt::Display;
use std::sync::Arc;

use crate::context::compaction_error::CompactionError;
use crate::context::summary_call::{SummaryCall, summarize};
use crate::message::{Message, Role};
use crate::store::ContextMode;
use crate::store::SessionError;
use crate::store::{DEFAULT_AGENT_ID, SessionAgent, SessionMessage, now_utc};
use crate::store::{SessionMeta, title_from};
use crate::store::{SessionStore, create_fresh_complete_session};

/// The acknowledgement that follows a summary in a new session (and in a summarizing window).
pub const SEED_ACKNOWLEDGEMENT: &str = "Understood. I will continue from this summary.";

/// How many stored messages are searched for a title when the old session has none.
const TITLE_SEARCH_MESSAGES: usize = 16;

/// The two-message history a compacted session starts with: the summary as a user message
/// (`Summary of the previous conversation (session <id>):` and the summary on the next line), then
/// the assistant's [`SEED_ACKNOWLEDGEMENT`].
pub fn seed_messages(summary: &str, previous_session_id: &str) -> Vec<Message> {
    vec![
        Message::user_text(format!(
            "Summary of the previous conversation (session {previous_session_id}):\n{summary}"
        )),
        Message::assistant_text(SEED_ACKNOWLEDGEMENT),
    ]
}

/// What to compact and how to record the new session.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactRequest {
    /// The session to compact.
    pub session_id: String,
    /// `/compact <focus>`: appended to the prompt as `Focus on: …`.
    pub focus: Option<String>,
    /// What to summarize: the agent's in-memory messages (its window, which may be shorter than
    /// the stored history). `None`: every stored message of the session's agent.
    pub messages: Option<Vec<Message>>,
    /// The new session's metadata as the caller knows it (channel, profile, role). Fields left
    /// `None` are taken from the old session; `title` defaults to the old title (or the first line
    /// of its first user message); `compacted_from`, `compacted_to` and `context` are set here.
    pub meta: SessionMeta,
    /// The conversation manager the new session's agent is recorded under.
    pub mode: ContextMode,
}

impl CompactRequest {
    /// Compacts every stored message of `session_id` under `mode`, with no focus.
    pub fn new(session_id: impl Into<String>, mode: ContextMode) -> Self {
        Self {
            session_id: session_id.into(),
            focus: None,
            messages: None,
            meta: SessionMeta::default(),
            mode,
        }
    }
}

/// A finished compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionOutcome {
    /// The new session, where the conversation goes on.
    pub new_session_id: String,
    /// The compacted session (kept, with `compacted_to`).
    pub previous_session_id: String,
    /// N of `Compacted N messages…`: how many messages were summarized.
    pub summarized_count: usize,
    /// The summary text (printed after the notice).
    pub summary: String,
    /// The new session's stored history ([`seed_messages`]), for the agent built on it.
    pub seed: Vec<Message>,
    /// The new session's metadata as written.
    pub meta: SessionMeta,
}

impl CompactionOutcome {
    /// The UI message a channel prints after a compaction.
    pub const MESSAGE_KEY: &'static str = "compact.done";

    /// The arguments of [`Self::MESSAGE_KEY`]: `n`, `id` (new session) and `old`.
    pub fn message_args(&self) -> [(&'static str, &dyn Display); 3] {
        [
            ("n", &self.summarized_count),
            ("id", &self.new_session_id),
            ("old", &self.previous_session_id),
        ]
    }
}

/// What the read phase learned about the old session.
struct OldSession {
    meta: Option<SessionMeta>,
    /// Every stored message, when the request gave none.
    stored: Option<Vec<Message>>,
    /// A title from the first user message, when the old session has none.
    fallback_title: Option<String>,
}

/// Compacts `request.session_id` into a new session; see the module documentation.
pub async fn compact_session(
    store: Arc<dyn SessionStore>,
    call: &SummaryCall<'_>,
    request: CompactRequest,
) -> Result<CompactionOutcome, CompactionError> {
    let CompactRequest {
        session_id,
        focus,
        messages,
        meta,
        mode,
    } = request;
    let old = {
        let session_id = session_id.clone();
        let want_stored = messages.is_none();
        blocking(&store, move |store| {
            read_old(store, &session_id, want_stored)
        })
        .await?
    };
    let messages = messages.or(old.stored).unwrap_or_default();
    if messages.is_empty() {
        return Err(CompactionError::EmptyHistory);
    }
    let summary = summarize(call, &messages, focus.as_deref()).await?;
    let seed = seed_messages(&summary, &session_id);
    let new_meta = new_session_meta(meta, old.meta, old.fallback_title, &session_id, mode);
    let new_session_id = {
        let (session_id, seed, new_meta) = (session_id.clone(), seed.clone(), new_meta.clone());
        blocking(&store, move |store| {
            write_new(store, &session_id, &seed, &new_meta, mode)
        })
        .await?
    };
    Ok(CompactionOutcome {
        new_session_id,
        previous_session_id: session_id,
        summarized_count: messages.len(),
        summary,
        seed,
        meta: new_meta,
    })
}

/// Runs store work on a blocking thread.
async fn blocking<T, F>(store: &Arc<dyn SessionStore>, work: F) -> Result<T, CompactionError>
where
    T: Send + 'static,
    F: FnOnce(&dyn SessionStore) -> Result<T, SessionError> + Send + 'static,
{
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || work(store.as_ref()))
        .await
        .map_err(|_| CompactionError::StoreTask)?
        .map_err(CompactionError::Store)
}

fn read_old(
    store: &dyn SessionStore,
    session_id: &str,
    want_stored: bool,
) -> Result<OldSession, SessionError> {
    if store.read_session(session_id)?.is_none() {
        return Err(SessionError::SessionNotFound(session_id.to_owned()));
    }
    let meta = store.read_meta(session_id)?;
    let has_agent = store.read_agent(session_id, DEFAULT_AGENT_ID)?.is_some();
    let needs_title = meta
        .as_ref()
        .and_then(|m| m.title.as_deref())
        .is_none_or(|t| t.trim().is_empty());
    let stored: Option<Vec<Message>> = if want_stored && has_agent {
        let records = store.list_messages(session_id, DEFAULT_AGENT_ID, None, 0)?;
        Some(records.iter().map(|r| r.to_message().clone()).collect())
    } else {
        None
    };
    let fallback_title = if needs_title && has_agent {
        let first: Vec<Message> = match &stored {
            Some(all) => all.iter().take(TITLE_SEARCH_MESSAGES).cloned().collect(),
            None => store
                .list_messages(session_id, DEFAULT_AGENT_ID, Some(TITLE_SEARCH_MESSAGES), 0)?
                .iter()
                .map(|r| r.to_message().clone())
                .collect(),
        };
        first_user_line(&first)
    } else {
        None
    };
    Ok(OldSession {
        meta,
        stored,
        fallback_title,
    })
}

/// The title from the first line of the first user message that has text.
fn first_user_line(messages: &[Message]) -> Option<String> {
    messages
        .iter()
        .filter(|m| m.role == Role::User)
        .find_map(|m| {
            let text = m.text();
            let line = text.lines().find(|l| !l.trim().is_empty())?;
            Some(title_from(line)).filter(|t| !t.is_empty())
        })
}

fn new_session_meta(
    given: SessionMeta,
    old: Option<SessionMeta>,
    fallback_title: Option<String>,
    old_id: &str,
    mode: ContextMode,
) -> SessionMeta {
    let old = old.unwrap_or_default();
    let non_blank = |title: Option<String>| title.filter(|t| !t.trim().is_empty());
    SessionMeta {
        channel: given.channel.or(old.channel),
        profile: given.profile.or(old.profile),
        title: non_blank(given.title)
            .or(non_blank(old.title))
            .or(fallback_title),
        role: given.role.or(old.role),
        context: Some(mode),
        compacted_from: Some(old_id.to_owned()),
        compacted_to: None,
        ..SessionMeta::default()
    }
}

fn write_new(
    store: &dyn SessionStore,
    old_id: &str,
    seed: &[Message],
    meta: &SessionMeta,
    mode: ContextMode,
) -> Result<String, SessionError> {
    // The new session is stored whole, or not at all (see `SessionStore::create_complete_session`).
    let messages = (0u64..)
        .zip(seed)
        .map(|(message_id, message)| SessionMessage::new(message_id, message.clone(), now_utc()))
        .collect();
    let new_id = create_fresh_complete_session(
        store,
        SessionAgent::new(DEFAULT_AGENT_ID, mode, now_utc()),
        messages,
        meta.clone(),
    )?;
    // Read again: the old metadata may have changed while the model was summarizing. If this
    // write fails, the new session stands complete; only the old one's forward link is missing.
    let mut old_meta = store.read_meta(old_id)?.unwrap_or_default();
    old_meta.compacted_to = Some(new_id.clone());
    store.write_meta(old_id, &old_meta)?;
    Ok(new_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_api::i18n::t;
    use tau_api::lang::Lang;

    #[test]
    fn seed_messages_are_exact() {
        let seed = seed_messages("The user likes tea.", "20260929-153012-3f9a");
        assert_eq!(
            seed,
            vec![
                Message::user_text(
                    "Summary of the previous conversation (session 20260929-153012-3f9a):\nThe user likes tea."
                ),
                Message::assistant_text("Understood. I will continue from this summary."),
            ]
        );
    }

    #[test]
    fn the_outcome_fills_the_done_message() {
        let outcome = CompactionOutcome {
            new_session_id: "20260929-153012-3f9a".into(),
            previous_session_id: "20260928-101010-aaaa".into(),
            summarized_count: 12,
            summary: "s".into(),
            seed: seed_messages("s", "20260928-101010-aaaa"),
            meta: SessionMeta::default(),
        };
        let text = t(
            CompactionOutcome::MESSAGE_KEY,
            Lang::En,
            &outcome.message_args(),
        )
        .unwrap();
        assert_eq!(
            text,
            "Compacted 12 messages into a summary. New session 20260929-153012-3f9a; \
             the previous session 20260928-101010-aaaa is kept."
        );
        assert!(
            t(
                CompactionOutcome::MESSAGE_KEY,
                Lang::Tr,
                &outcome.message_args()
            )
            .unwrap()
            .contains("20260928-101010-aaaa")
        );
    }

    #[test]
    fn the_new_title_is_given_then_old_then_first_user_line() {
        let old = SessionMeta {
            title: Some("old title".into()),
            channel: Some("telegram".into()),
            role: Some("fast".into()),
            ..SessionMeta::default()
        };
        let given = SessionMeta {
            channel: Some("terminal".into()),
            ..SessionMeta::default()
        };
        let meta = new_session_meta(
            given.clone(),
            Some(old.clone()),
            None,
            "a",
            ContextMode::Summarize,
        );
        assert_eq!(meta.title.as_deref(), Some("old title"));
        assert_eq!(meta.channel.as_deref(), Some("terminal"));
        assert_eq!(meta.role.as_deref(), Some("fast"));
        assert_eq!(meta.context, Some(ContextMode::Summarize));
        assert_eq!(meta.compacted_from.as_deref(), Some("a"));
        assert_eq!(meta.compacted_to, None);

        let meta = new_session_meta(given, None, Some("first".into()), "a", ContextMode::Sliding);
        assert_eq!(meta.title.as_deref(), Some("first"));

        let messages = vec![
            Message::assistant_text("hello"),
            Message::user_text("\n  Water the plants  \nat six"),
        ];
        assert_eq!(
            first_user_line(&messages).as_deref(),
            Some("Water the plants")
        );
        assert_eq!(first_user_line(&[Message::user_text(" ")]), None);
    }
}
