//! The grace period of an attachment whose stream was cut off for falling behind.
//!
//! A slow subscriber is cut off (RESOURCE_EXHAUSTED) and resumes from its last seq; without a
//! grace, dropping its stream would drop its attachment and, were it the last one on its channel,
//! reject the approvals pending there before the client could come back. So a cut-off stream hands
//! its [`Attachment`] to [`Attachment::hold_after_lag`].
//!
//! Invariants:
//! - A held attachment still counts as attached on its session and channel (approvals pending
//!   there stay pending) but no longer decides ([`super::DecideError::CutOff`]); the client decides
//!   with the attachment of its new stream.
//! - The hold ends after the grace or when the hub stops, whichever comes first; then the
//!   attachment drops with the usual rule (the last one on a channel closes its approvals). A
//!   client that resubscribed on the same session and channel within the grace holds its own
//!   attachment there, so its approvals stay pending.
//! - No lock is held across the wait; without a tokio runtime the attachment drops at once.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::info;

use super::Attachment;

/// How long a cut-off client's attachment is held for it to resubscribe.
pub const LAG_GRACE: Duration = Duration::from_secs(10);

impl Attachment {
    /// Holds this attachment for `grace` (or until `stop`), then drops it; meanwhile it keeps its
    /// channel's approvals pending but no longer decides.
    pub fn hold_after_lag(self, grace: Duration, stop: &CancellationToken) {
        self.registry.hold(&self.id);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        info!(
            attachment_id = %self.id,
            session_id = %self.session_id,
            channel = %self.channel,
            grace_secs = grace.as_secs(),
            "client cut off for falling behind; holding its attachment for it to resubscribe"
        );
        let stop = stop.clone();
        runtime.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(grace) => {}
                () = stop.cancelled() => {}
            }
            drop(self);
        });
    }
}
