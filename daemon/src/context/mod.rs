//! What the model sees of a session: the conversation windows (one per `[agent] context` mode), the
//! summary model call and `/compact`. This room uses the model and the store's contract; storage
//! itself never calls a model.
//!
//! - [`sliding`]: the sliding cut and the context-mode check of a stored agent record;
//! - [`summarize`](mod@summarize): the summarizing window and `model_window`; [`summary_call`]: the summary model
//!   call; [`compaction`]: `/compact`, a fresh session seeded with a summary;
//!   [`compaction_error`]: why a summary could not be made (for both);
//! - [`modes`]: the agent's [`crate::agent::ConversationWindow`] for each mode, as the hub builds it.
//!
//! Invariants: a window only chooses what the model sees; the store keeps every message.

mod compaction;
mod compaction_error;
pub mod modes;
mod sliding;
mod summarize;
mod summary_call;
#[cfg(test)]
mod tests_histories;

pub use compaction::{
    CompactRequest, CompactionOutcome, SEED_ACKNOWLEDGEMENT, compact_session, seed_messages,
};
pub use compaction_error::CompactionError;
pub use sliding::{sliding_window_start, sliding_window_start_in_tail};
pub use summarize::{
    WINDOW_SUMMARY_HEADER, Window, model_window, recorded_summary_window, sliding_window,
    summarizing_window, summarizing_window_start_in_tail, summary_cut, summary_span,
};
pub use summary_call::{
    CONTINUATION_PROMPT, DEFAULT_SUMMARY_TIMEOUT, SUMMARY_INSTRUCTION, SummaryCall,
    TOOL_TEXT_MAX_CHARS, summarize, summary_request, summary_system_prompt,
};
