//! The model's window over a long session under `[agent] context = "summarize"`, and the one entry
//! point [`model_window`] that also covers `sliding`, so a caller switches on [`ContextMode`] in one
//! place.
//!
//! The store keeps every message; a [`Window`] is what the model sees. Under `summarize` it is the
//! recorded summary (a user message, followed by [`SEED_ACKNOWLEDGEMENT`] so roles keep
//! alternating) and then every stored message from `removed_message_count` on. The summary covers
//! exactly the stored messages before `removed_message_count`.
//!
//! The functions here work on a stretch of the stored history that runs to its newest message:
//! `history[i]` is stored message `first + i` (`first` is 0 for the whole history). An agent holds
//! only such a stretch, starting at a place no later window starts before (the recorded summary's
//! start, or a sliding cut for at least the window): every cut computed from it is the one the
//! whole history gives. A summary that has to fold in messages older than the stretch cannot be
//! made from it ([`summary_span`] says which; the caller reads them and passes a longer stretch).
//!
//! Invariants:
//! - The recent part never splits a toolUse/toolResult pair and starts at a clean user message
//!   (the cut points come from [`sliding_window_start`]).
//! - The newest `window_size` messages are never summarized: a summary never covers a message at
//!   or after the sliding cut for `window_size` ([`sliding_window_start`]: pair-safe, starting at
//!   a clean user message), so they always reach the model verbatim.
//! - A new summary is made only when the window has to move past messages the summary does not
//!   cover yet, i.e. when that sliding cut lies beyond `removed_message_count`. It then folds the
//!   old summary and the newly dropped messages into one and cuts exactly at the sliding cut. The
//!   model therefore sees the summary and the last `window_size` messages (fewer when the cut had
//!   to move forward to a clean start, more only when a long tool chain has no clean start); the
//!   price is a summary call on each turn that moves the window.
//! - A recorded state that does not fit the history (a count beyond it, a count without a summary,
//!   a cut that is not a clean start) is not trusted: it is reset and, if needed, summarized anew.
//!   A count before the stretch cannot be checked until the messages from it are read.
//! - Nothing here writes to the store: the caller persists [`Window::state`] when
//!   [`Window::state_changed`].

use std::borrow::Borrow;
use std::ops::Range;

use crate::context::compaction::SEED_ACKNOWLEDGEMENT;
use crate::context::compaction_error::CompactionError;
use crate::context::sliding::{is_clean_start, sliding_window_start, sliding_window_start_in_tail};
use crate::context::summary_call::{SummaryCall, summarize};
use crate::message::Message;
use crate::store::ContextMode;
use crate::store::ConversationManagerState;

/// The first line of a summarizing window's summary message.
pub const WINDOW_SUMMARY_HEADER: &str = "Summary of the earlier conversation:";

/// What the model sees of a session, and the conversation manager state that goes with it. `M`
/// is how the messages are held: [`Message`]s, or shared ones (`Arc<Message>`: the stored
/// messages in the window are then the caller's own objects, not copies).
#[derive(Debug, Clone, PartialEq)]
pub struct Window<M = Message> {
    /// The messages for the model: the `prepended` summary pair (if any), then the stored messages
    /// from `start` on, as given.
    pub messages: Vec<M>,
    /// The stored id (position in the full history) of the first stored message in `messages`
    /// (= `state.removed_message_count` under `summarize`).
    pub start: usize,
    /// How many messages at the front of `messages` are not stored messages: 2 (the summary and
    /// its acknowledgement) or 0.
    pub prepended: usize,
    /// The conversation manager state after this window; persist it when `state_changed`.
    pub state: ConversationManagerState,
    /// Whether `state` differs from the recorded one.
    pub state_changed: bool,
    /// How many stored messages were newly folded into the summary by this call (0: no model call).
    pub summarized: usize,
}

impl<M> Window<M> {
    /// The index in the full history of `messages[position]`, or `None` for a prepended message.
    pub fn stored_index(&self, position: usize) -> Option<usize> {
        position.checked_sub(self.prepended).map(|i| self.start + i)
    }
}

/// The window for `mode` over `history` (stored messages from id `first` to the newest):
/// [`sliding_window`] (no model call) or [`summarizing_window`].
pub async fn model_window(
    mode: ContextMode,
    history: &[Message],
    first: usize,
    state: &ConversationManagerState,
    window_size: usize,
    call: &SummaryCall<'_>,
) -> Result<Window, CompactionError> {
    match mode {
        ContextMode::Sliding => Ok(sliding_window(history, first, state, window_size)),
        ContextMode::Summarize => {
            summarizing_window(history, first, state, window_size, call).await
        }
    }
}

/// The sliding window: the last `window_size` messages (see [`sliding_window_start`]), no summary.
/// `removed_message_count` becomes the window start; the rest of the state is kept.
pub fn sliding_window(
    history: &[Message],
    first: usize,
    state: &ConversationManagerState,
    window_size: usize,
) -> Window {
    let cut = sliding_window_start(history, window_size);
    let start = first.saturating_add(cut);
    let mut new_state = state.clone();
    new_state.removed_message_count = start as u64;
    Window {
        messages: history[cut..].to_vec(),
        start,
        prepended: 0,
        state_changed: new_state != *state,
        state: new_state,
        summarized: 0,
    }
}

/// The summarizing window as recorded, without a model call: the summary (if any) and every held
/// message it does not cover (all held ones when it covers fewer). What a caller shows the model
/// when a new summary failed, and what `/compact` summarizes.
pub fn recorded_summary_window<M: Borrow<Message> + Clone + From<Message>>(
    history: &[M],
    first: usize,
    state: &ConversationManagerState,
) -> Window<M> {
    let (trusted, changed) = trusted_state(history, first, state);
    view(history, first, trusted, changed, 0)
}

/// Where a new summary would cut the history (a stored id), or `None` when the recorded summary
/// still covers everything the window has to drop (no model call needed).
pub fn summary_cut<M: Borrow<Message>>(
    history: &[M],
    first: usize,
    state: &ConversationManagerState,
    window_size: usize,
) -> Option<usize> {
    summary_span(history, first, state, window_size).map(|span| span.end)
}

/// The stored messages a new summary would fold in (from where the recorded one ends, 0 when it
/// is not trusted, to the cut), or `None` when no summary is needed. A span that starts before
/// `first` needs the older messages read: pass them with the history.
pub fn summary_span<M: Borrow<Message>>(
    history: &[M],
    first: usize,
    state: &ConversationManagerState,
    window_size: usize,
) -> Option<Range<usize>> {
    let (trusted, _) = trusted_state(history, first, state);
    let covered = recorded_start(history, first, &trusted)?;
    let needed = first.saturating_add(sliding_window_start(history, window_size));
    (needed > covered).then_some(covered..needed)
}

/// The summarizing window; summarizes with `call` when [`summary_cut`] says so.
///
/// A failed summary is an error and the recorded state stays as it was; the caller may fall back
/// to [`recorded_summary_window`]. A summary that needs messages before `first`
/// ([`summary_span`]) is [`CompactionError::NotHeld`].
pub async fn summarizing_window<M: Borrow<Message> + Clone + From<Message>>(
    history: &[M],
    first: usize,
    state: &ConversationManagerState,
    window_size: usize,
    call: &SummaryCall<'_>,
) -> Result<Window<M>, CompactionError> {
    let (mut trusted, changed) = trusted_state(history, first, state);
    let Some(span) = summary_span(history, first, &trusted, window_size) else {
        return Ok(view(history, first, trusted, changed, 0));
    };
    if span.start < first {
        return Err(CompactionError::NotHeld {
            needed: span.start,
            first,
        });
    }
    let folded = &history[span.start - first..span.end - first];
    let mut input: Vec<Message> = Vec::with_capacity(folded.len() + 1);
    input.extend(trusted.summary_message.iter().map(Message::for_model));
    input.extend(folded.iter().map(|message| message.borrow().for_model()));
    let summary = summarize(call, &input, None).await?;
    trusted.summary_message = Some(Message::user_text(format!(
        "{WINDOW_SUMMARY_HEADER}\n{summary}"
    )));
    trusted.removed_message_count = span.end as u64;
    Ok(view(history, first, trusted, true, span.len()))
}

/// Where an agent under `summarize` starts holding a session restored from its newest stored
/// messages `tail` (stored ids from `tail_first`; `whole`: the tail is the entire history), as an
/// index into `tail`: where the recorded summary ends when the tail holds that message (the
/// model's view starts there), else where the sliding window starts
/// ([`sliding_window_start_in_tail`]; the next summary reads the older messages it folds in).
/// `None` when the tail cannot tell: read every message.
pub fn summarizing_window_start_in_tail(
    tail: &[Message],
    tail_first: usize,
    state: &ConversationManagerState,
    window_size: usize,
    whole: bool,
) -> Option<usize> {
    let recorded = usize::try_from(state.removed_message_count)
        .ok()
        .filter(|_| state.summary_message.is_some())
        .and_then(|removed| removed.checked_sub(tail_first))
        .filter(|&at| at < tail.len() && is_clean_start(tail, at));
    recorded.or_else(|| sliding_window_start_in_tail(tail, window_size, whole))
}

/// The recorded window start, if the state fits the history. A start before `first` is taken
/// on trust (its messages are not here to check).
fn recorded_start<M: Borrow<Message>>(
    history: &[M],
    first: usize,
    state: &ConversationManagerState,
) -> Option<usize> {
    let removed = usize::try_from(state.removed_message_count).ok()?;
    let end = first.saturating_add(history.len());
    let fits = match (removed, &state.summary_message) {
        (0, None) => true,
        (0, Some(_)) | (_, None) => false,
        (removed, Some(_)) => {
            removed == end
                || removed < first
                || (removed < end && is_clean_start(history, removed - first))
        }
    };
    fits.then_some(removed)
}

/// The state if it fits the history, else a reset one (no summary, nothing removed); and whether
/// it was reset.
fn trusted_state<M: Borrow<Message>>(
    history: &[M],
    first: usize,
    state: &ConversationManagerState,
) -> (ConversationManagerState, bool) {
    if recorded_start(history, first, state).is_some() {
        return (state.clone(), false);
    }
    tracing::warn!(
        removed = state.removed_message_count,
        messages = first.saturating_add(history.len()),
        has_summary = state.summary_message.is_some(),
        "the recorded conversation summary does not fit the stored history; starting it again"
    );
    let mut reset = state.clone();
    reset.removed_message_count = 0;
    reset.summary_message = None;
    (reset, true)
}

/// The summary pair and the held messages from the recorded start (all held ones when it lies
/// before them).
fn view<M: Borrow<Message> + Clone + From<Message>>(
    history: &[M],
    first: usize,
    state: ConversationManagerState,
    state_changed: bool,
    summarized: usize,
) -> Window<M> {
    let start = recorded_start(history, first, &state)
        .unwrap_or(0)
        .max(first);
    let shown = &history[(start - first).min(history.len())..];
    let mut messages = Vec::with_capacity(shown.len() + 2);
    if let Some(summary) = &state.summary_message {
        messages.push(M::from(summary.clone()));
        messages.push(M::from(Message::assistant_text(SEED_ACKNOWLEDGEMENT)));
    }
    let prepended = messages.len();
    messages.extend_from_slice(shown);
    Window {
        messages,
        start,
        prepended,
        state,
        state_changed,
        summarized,
    }
}

#[cfg(test)]
#[path = "tests_summarize_tail.rs"]
mod tests_summarize_tail;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tests_histories::{tool_turn, turn};
    use crate::message::Role;
    use crate::testing::{FakeModel, FakeReply};
    use tokio_util::sync::CancellationToken;

    fn fresh() -> ConversationManagerState {
        ConversationManagerState::new(ContextMode::Summarize)
    }

    /// The window's stored part is a suffix of the history starting cleanly, and every toolUse in
    /// it has its result right after it.
    fn assert_well_formed(history: &[Message], window: &Window) {
        assert_eq!(
            &window.messages[window.prepended..],
            &history[window.start..]
        );
        if window.start < history.len() {
            assert!(is_clean_start(history, window.start), "{}", window.start);
        }
        if window.prepended == 2 {
            assert_eq!(window.messages[0].role, Role::User);
            assert_eq!(window.messages[1].text(), SEED_ACKNOWLEDGEMENT);
        }
        let roles: Vec<Role> = window.messages.iter().map(|m| m.role).collect();
        assert!(roles.windows(2).all(|w| w[0] != w[1]), "{roles:?}");
        for (i, message) in window.messages.iter().enumerate() {
            for tool_use in message.tool_uses() {
                let next = &window.messages[i + 1];
                assert!(
                    next.tool_results()
                        .any(|r| r.tool_use_id == tool_use.tool_use_id)
                );
            }
        }
    }

    #[tokio::test]
    async fn a_short_history_needs_no_summary() {
        let history: Vec<Message> = (0..3).flat_map(turn).collect();
        let model = FakeModel::scripted([]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let window = summarizing_window(&history, 0, &fresh(), 10, &call)
            .await
            .unwrap();
        assert_eq!(window.messages, history);
        assert_eq!(
            (window.start, window.prepended, window.summarized),
            (0, 0, 0)
        );
        assert!(!window.state_changed);
        assert_eq!(model.call_count(), 0);
    }

    #[tokio::test]
    async fn older_messages_are_summarized_and_the_state_returned() {
        let history: Vec<Message> = (0..10).flat_map(turn).collect();
        let model = FakeModel::scripted([FakeReply::text("The user asked q0 to q5.")]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let window = summarizing_window(&history, 0, &fresh(), 8, &call)
            .await
            .unwrap();
        // Over the window (20 > 8): cut at the sliding start for the window; the newest 8
        // messages stay verbatim.
        assert_eq!(window.start, 12);
        assert_eq!(window.summarized, 12);
        assert!(window.state_changed);
        assert_eq!(window.state.removed_message_count, 12);
        let summary =
            Message::user_text(format!("{WINDOW_SUMMARY_HEADER}\nThe user asked q0 to q5."));
        assert_eq!(window.state.summary_message.as_ref(), Some(&summary));
        assert_eq!(window.messages[0], summary);
        assert_eq!(window.messages.len(), 2 + 8);
        assert_eq!(&window.messages[2..], &history[12..]);
        assert_well_formed(&history, &window);
        // The call saw the dropped messages and nothing after the cut.
        let request = model.last_request().unwrap();
        let seen: String = request.messages.iter().map(|m| m.text()).collect();
        assert!(seen.contains("q0") && seen.contains("a5"));
        assert!(!seen.contains("q6"));
        assert!(request.tools.is_empty());
    }

    #[tokio::test]
    async fn a_covered_history_is_not_summarized_again_until_the_window_moves() {
        let mut history: Vec<Message> = (0..10).flat_map(turn).collect();
        let model = FakeModel::scripted([FakeReply::text("first"), FakeReply::text("second")]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let first = summarizing_window(&history, 0, &fresh(), 8, &call)
            .await
            .unwrap();
        let state = first.state;
        // The same history again: the summary covers what the window drops; no new call.
        let again = summarizing_window(&history, 0, &state, 8, &call)
            .await
            .unwrap();
        assert!(!again.state_changed);
        assert_eq!(again.summarized, 0);
        assert_eq!(again.messages, first.messages);
        assert_eq!(model.call_count(), 1);
        // A new turn moves the window: the new summary folds in the old one and only the two
        // messages that left the window.
        history.extend(turn(10));
        assert_eq!(summary_cut(&history, 0, &state, 8), Some(14));
        let window = summarizing_window(&history, 0, &state, 8, &call)
            .await
            .unwrap();
        assert_eq!(model.call_count(), 2);
        assert_eq!(window.start, 14);
        assert_eq!(window.summarized, 2);
        assert_eq!(&window.messages[2..], &history[14..]);
        let request = model.last_request().unwrap();
        let seen: String = request.messages.iter().map(|m| m.text()).collect();
        assert!(request.messages[0].text().contains("first"));
        assert!(seen.contains("q6") && seen.contains("a6"));
        assert!(!seen.contains("q7"), "{seen}");
        assert_eq!(
            window.messages[0].text(),
            format!("{WINDOW_SUMMARY_HEADER}\nsecond")
        );
        assert_well_formed(&history, &window);
    }

    #[tokio::test]
    async fn tool_pairs_stay_together_and_the_newest_messages_are_kept() {
        let mut history = turn(0);
        history.extend(tool_turn(1, 3));
        history.extend(turn(2));
        history.extend(tool_turn(3, 4));
        for window_size in 1..history.len() + 2 {
            let model = FakeModel::scripted([FakeReply::text("summary")]);
            let call = SummaryCall::new(&model, CancellationToken::new());
            let window = summarizing_window(&history, 0, &fresh(), window_size, &call)
                .await
                .unwrap();
            assert_well_formed(&history, &window);
            // Never cut past the sliding start: the newest window_size messages are kept.
            assert_eq!(
                window.start,
                sliding_window_start(&history, window_size),
                "{window_size}"
            );
        }
    }

    #[tokio::test]
    async fn a_window_over_shared_messages_shares_them() {
        let history: Vec<std::sync::Arc<Message>> =
            (0..10).flat_map(turn).map(std::sync::Arc::new).collect();
        let model = FakeModel::scripted([FakeReply::text("sum")]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let window = summarizing_window(&history, 0, &fresh(), 4, &call)
            .await
            .unwrap();
        assert_eq!((window.prepended, window.start), (2, 16));
        let shown = &window.messages[window.prepended..];
        assert_eq!(shown.len(), 4);
        assert!(
            shown
                .iter()
                .zip(&history[16..])
                .all(|(a, b)| std::sync::Arc::ptr_eq(a, b))
        );
    }

    #[tokio::test]
    async fn a_failed_summary_changes_nothing_and_the_recorded_window_remains() {
        let history: Vec<Message> = (0..10).flat_map(turn).collect();
        let model = FakeModel::scripted([FakeReply::error("down")]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let err = summarizing_window(&history, 0, &fresh(), 4, &call)
            .await
            .unwrap_err();
        assert!(matches!(err, CompactionError::Model(_)), "{err}");
        let fallback = recorded_summary_window(&history, 0, &fresh());
        assert_eq!(fallback.messages, history);
        assert!(!fallback.state_changed);
    }

    #[tokio::test]
    async fn a_state_that_does_not_fit_is_reset() {
        let history: Vec<Message> = (0..3).flat_map(turn).collect();
        let mut state = fresh();
        state.removed_message_count = 40;
        state.summary_message = Some(Message::user_text("stale"));
        let window = recorded_summary_window(&history, 0, &state);
        assert!(window.state_changed);
        assert_eq!(window.messages, history);
        assert_eq!(window.state.summary_message, None);
        assert_eq!(window.state.removed_message_count, 0);

        // A count at an assistant message, or without a summary, is not trusted either.
        state.removed_message_count = 1;
        assert!(recorded_summary_window(&history, 0, &state).state_changed);
        state.removed_message_count = 2;
        state.summary_message = None;
        assert!(recorded_summary_window(&history, 0, &state).state_changed);
        state.summary_message = Some(Message::user_text("ok"));
        let window = recorded_summary_window(&history, 0, &state);
        assert!(!window.state_changed);
        assert_eq!(window.start, 2);
        assert_eq!(window.stored_index(0), None);
        assert_eq!(window.stored_index(2), Some(2));
    }

    #[tokio::test]
    async fn window_zero_keeps_only_the_summary() {
        let history: Vec<Message> = (0..2).flat_map(turn).collect();
        let model = FakeModel::scripted([FakeReply::text("all of it")]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let window = summarizing_window(&history, 0, &fresh(), 0, &call)
            .await
            .unwrap();
        assert_eq!(window.start, 4);
        assert_eq!(window.messages.len(), 2);
        assert_eq!(window.messages[1].text(), SEED_ACKNOWLEDGEMENT);
    }

    #[tokio::test]
    async fn model_window_switches_on_the_mode() {
        let history: Vec<Message> = (0..10).flat_map(turn).collect();
        let model = FakeModel::scripted([FakeReply::text("sum")]);
        let call = SummaryCall::new(&model, CancellationToken::new());
        let sliding_state = ConversationManagerState::new(ContextMode::Sliding);
        let window = model_window(ContextMode::Sliding, &history, 0, &sliding_state, 4, &call)
            .await
            .unwrap();
        assert_eq!(model.call_count(), 0);
        assert_eq!(window.start, 16);
        assert_eq!(window.messages, history[16..].to_vec());
        assert_eq!(window.prepended, 0);
        assert!(window.state_changed);
        assert_eq!(window.state.removed_message_count, 16);
        assert_eq!(window.state.name, sliding_state.name);
        let again = sliding_window(&history, 0, &window.state, 4);
        assert!(!again.state_changed);

        let window = model_window(ContextMode::Summarize, &history, 0, &fresh(), 4, &call)
            .await
            .unwrap();
        assert_eq!(model.call_count(), 1);
        assert_eq!(window.prepended, 2);
        assert_eq!(window.start, 16);
    }
}
