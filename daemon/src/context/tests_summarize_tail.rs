//! The summarizing window over a held stretch of the history (stored ids from `first`), as an
//! agent with bounded memory holds it: every window, state and summary input is the one the whole
//! history gives, and a summary that needs older messages says so.

use super::*;
use crate::context::tests_histories::{tool_turn, turn};
use crate::model::ModelRequest;
use crate::testing::{FakeModel, FakeReply};
use tokio_util::sync::CancellationToken;

/// A conversation of plain turns and tool turns, some with chains longer than small windows.
fn conversation() -> Vec<Message> {
    let mut history = Vec::new();
    for n in 0..14 {
        match n % 5 {
            1 => history.extend(tool_turn(n, 1)),
            3 => history.extend(tool_turn(n, 5)),
            _ => history.extend(turn(n)),
        }
    }
    history
}

fn fresh() -> ConversationManagerState {
    ConversationManagerState::new(ContextMode::Summarize)
}

fn summary_texts(model: &FakeModel) -> Vec<String> {
    model
        .requests()
        .iter()
        .map(|r: &ModelRequest| r.messages.iter().map(|m| m.text()).collect())
        .collect()
}

/// What an agent with bounded memory may forget of `held` (stored ids from `first`): what the
/// summary covers, or what lies before twice the window (as `modes::SummarizingWindow` says).
fn forgettable(
    held: &[Message],
    first: usize,
    state: &ConversationManagerState,
    w: usize,
) -> usize {
    let covered = usize::try_from(state.removed_message_count)
        .ok()
        .filter(|_| state.summary_message.is_some())
        .and_then(|removed| removed.checked_sub(first))
        .filter(|&at| at < held.len() && is_clean_start(held, at))
        .unwrap_or(0);
    let keep = (2 * w).max(1);
    let twice = if held.len() > keep {
        sliding_window_start(held, keep)
    } else {
        0
    };
    covered.max(twice)
}

/// The conversation grows one message at a time; after each message the whole history and a held
/// stretch (forgetting what it may, reading back from the whole history what a summary needs, as
/// the window reads the store) give the same window. Some summaries fail, so the recorded
/// summary falls behind the held messages.
#[tokio::test]
async fn a_held_stretch_gives_the_window_of_the_whole_history() {
    let history = conversation();
    let mut reads_back = 0;
    for w in 1..9 {
        let script = |n: usize| {
            (0..n).map(|i| {
                if i % 4 == 1 {
                    FakeReply::error("down")
                } else {
                    FakeReply::text("sum")
                }
            })
        };
        let whole_model = FakeModel::scripted(script(200));
        let held_model = FakeModel::scripted(script(200));
        let whole_call = SummaryCall::new(&whole_model, CancellationToken::new());
        let held_call = SummaryCall::new(&held_model, CancellationToken::new());
        let (mut whole_state, mut held_state) = (fresh(), fresh());
        let mut first = 0;
        for len in 1..=history.len() {
            let whole = summarizing_window(&history[..len], 0, &whole_state, w, &whole_call).await;
            let mut from = first;
            let mut held: Vec<Message> = history[first..len].to_vec();
            while let Some(span) = summary_span(&held, from, &held_state, w)
                && span.start < from
            {
                reads_back += 1;
                let mut older = history[span.start..from].to_vec();
                older.extend(held);
                held = older;
                from = span.start;
            }
            let bounded = summarizing_window(&held, from, &held_state, w, &held_call).await;
            match (whole, bounded) {
                (Ok(whole), Ok(bounded)) => {
                    assert_eq!(whole, bounded, "window {w}, {len} messages");
                    whole_state = whole.state;
                    held_state = bounded.state;
                }
                (Err(_), Err(_)) => {}
                (whole, bounded) => panic!("window {w}, {len}: {whole:?} / {bounded:?}"),
            }
            let held = &history[first..len];
            first += forgettable(held, first, &held_state, w);
            assert!(first == 0 || is_clean_start(&history, first));
        }
        assert_eq!(summary_texts(&whole_model), summary_texts(&held_model));
        assert!(whole_model.call_count() > 2, "window {w}");
    }
    assert!(
        reads_back > 0,
        "some summaries read messages no longer held"
    );
}

#[tokio::test]
async fn a_summary_of_messages_not_held_is_refused_until_they_are_given() {
    let history: Vec<Message> = (0..10).flat_map(turn).collect();
    let mut state = fresh();
    state.removed_message_count = 2;
    state.summary_message = Some(Message::user_text("q0 and a0"));
    // Held from 12: the window for 4 starts at 16, so messages 2 to 16 are folded in.
    assert_eq!(summary_span(&history[12..], 12, &state, 4), Some(2..16));
    let model = FakeModel::scripted([FakeReply::text("all but the last")]);
    let call = SummaryCall::new(&model, CancellationToken::new());
    let err = summarizing_window(&history[12..], 12, &state, 4, &call)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CompactionError::NotHeld {
                needed: 2,
                first: 12
            }
        ),
        "{err}"
    );
    assert_eq!(model.call_count(), 0);
    let window = summarizing_window(&history[2..], 2, &state, 4, &call)
        .await
        .unwrap();
    assert_eq!((window.start, window.summarized), (16, 14));
    assert_eq!(&window.messages[2..], &history[16..]);
    // Covered already: the held stretch alone gives the recorded window.
    let covered = recorded_summary_window(&history[16..], 16, &window.state);
    assert_eq!(covered.messages, window.messages);
    assert!(!covered.state_changed);
}

#[test]
fn a_restored_agent_holds_from_the_summary_or_the_window() {
    let history: Vec<Message> = (0..20).flat_map(turn).collect();
    let tail = &history[32..];
    let mut state = fresh();
    // No summary: the sliding window for 4 in a tail of 8.
    assert_eq!(
        summarizing_window_start_in_tail(tail, 32, &state, 4, false),
        Some(4)
    );
    // The summary ends inside the tail: the view starts there, and so does memory.
    state.summary_message = Some(Message::user_text("earlier"));
    state.removed_message_count = 34;
    assert_eq!(
        summarizing_window_start_in_tail(tail, 32, &state, 4, false),
        Some(2)
    );
    // Before the tail: the window (the next summary reads what it folds in).
    state.removed_message_count = 20;
    assert_eq!(
        summarizing_window_start_in_tail(tail, 32, &state, 4, false),
        Some(4)
    );
    // Not a clean start, or past the end: not trusted; the window.
    for removed in [35, 40, 99] {
        state.removed_message_count = removed;
        assert_eq!(
            summarizing_window_start_in_tail(tail, 32, &state, 4, false),
            Some(4),
            "{removed}"
        );
    }
    // A tail without a clean start cannot tell.
    let chain = tool_turn(0, 6);
    assert_eq!(
        summarizing_window_start_in_tail(&chain[3..], 3, &fresh(), 4, false),
        None
    );
}
