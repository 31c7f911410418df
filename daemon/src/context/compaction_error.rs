//! [`CompactionError`]: why a summary could not be made, for `/compact` and for a summarizing
//! window alike, and the UI message a channel prints for it.
//!
//! Invariants: every failure of a summary (empty history, model call, deadline, cancel, store) is
//! one variant here, and each names its UI message key ([`CompactionError::message_key`]).

use std::time::Duration;

use crate::model::{ModelError, StopReason};
use crate::store::SessionError;

/// Why a compaction (or a summarizing window) could not summarize.
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// There is nothing to summarize; the model was not called.
    #[error("the session has no messages to summarize")]
    EmptyHistory,
    /// The model call failed (the request or its stream).
    #[error("the summary call failed: {0}")]
    Model(#[source] ModelError),
    /// The model stopped without a usable summary (content filter, guardrail).
    #[error("the model stopped without a summary ({0})")]
    Stopped(StopReason),
    /// The call was cancelled.
    #[error("the summary call was cancelled")]
    Cancelled,
    /// The call did not finish within its deadline.
    #[error("the summary call took longer than {} seconds", .0.as_secs())]
    TimedOut(Duration),
    /// The model answered with no text.
    #[error("the model returned an empty summary")]
    EmptyReply,
    /// A window's summary has to fold in stored messages older than those it was given.
    #[error("the summary needs stored messages from {needed} on, but was given them from {first}")]
    NotHeld { needed: usize, first: usize },
    /// The session store failed.
    #[error(transparent)]
    Store(#[from] SessionError),
    /// A store task ended without an answer (it panicked or the runtime is shutting down).
    #[error("the session store task ended unexpectedly")]
    StoreTask,
}

impl CompactionError {
    /// The UI message key a channel prints for this error: `compact.empty` for an empty history,
    /// otherwise `compact.failed` with `reason` = this error's text.
    pub fn message_key(&self) -> &'static str {
        match self {
            CompactionError::EmptyHistory => "compact.empty",
            _ => "compact.failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_api::i18n::t;
    use tau_api::lang::Lang;

    #[test]
    fn errors_name_their_message() {
        assert_eq!(CompactionError::EmptyHistory.message_key(), "compact.empty");
        let err = CompactionError::TimedOut(Duration::from_secs(180));
        assert_eq!(err.message_key(), "compact.failed");
        let text = t(err.message_key(), Lang::En, &[("reason", &err)]).unwrap();
        assert_eq!(
            text,
            "Could not compact the session: the summary call took longer than 180 seconds. Nothing changed."
        );
        assert!(t("compact.empty", Lang::Tr, &[]).is_ok());
    }
}
