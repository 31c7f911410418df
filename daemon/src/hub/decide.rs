//! [`HubCore::decide`]: a person's decision on an approval, from a client's attachment.
//!
//! Invariants: the registry chooses the winner ([`super::approvals`]); an approval this hub does
//! not remember (asked by an earlier hub) is answered from the stored events of the attachment's
//! session ([`stored_resolution`]), so an approval expired by restart answers `Expired` after any
//! number of restarts; that read runs through [`crate::store::store_io`] and its result is
//! remembered, so it is read at most once per id while remembered.

use tracing::warn;

use super::approvals::{ApprovalAnswer, DecideOutcome};
use super::core::HubCore;
use super::error::CoreError;
use super::limits::{MAX_REF_ID_LEN, check_len};
use super::restart::stored_resolution;
use crate::store::store_io;

impl HubCore {
    /// A person's decision, from the client holding `attachment_id`.
    pub fn decide(
        &self,
        approval_id: &str,
        answer: ApprovalAnswer,
        attachment_id: &str,
    ) -> Result<DecideOutcome, CoreError> {
        if approval_id.is_empty() {
            return Err(CoreError::InvalidArgument(
                "approval_id is empty".to_owned(),
            ));
        }
        if attachment_id.is_empty() {
            return Err(CoreError::InvalidArgument(
                "attachment_id is empty; a decision counts only from a client attached with Subscribe or StartTurn".to_owned(),
            ));
        }
        check_len("approval_id", approval_id, MAX_REF_ID_LEN)?;
        check_len("attachment_id", attachment_id, MAX_REF_ID_LEN)?;
        let outcome = self
            .registry()
            .decide(approval_id, answer, attachment_id)
            .map_err(CoreError::from)?;
        if outcome != DecideOutcome::NotFound {
            return Ok(outcome);
        }
        Ok(self.stored_outcome(approval_id, attachment_id))
    }

    /// For an approval this hub does not remember: how it ended according to the stored events of
    /// the attachment's session (an earlier hub asked it), read back once and then remembered.
    fn stored_outcome(&self, approval_id: &str, attachment_id: &str) -> DecideOutcome {
        let Some(session_id) = self.registry().session_of(attachment_id) else {
            return DecideOutcome::NotFound;
        };
        let events = match store_io(|| self.store().read_events(&session_id)) {
            Ok(events) => events,
            Err(error) => {
                warn!(%session_id, %approval_id, "cannot read the session's events to look the approval up: {error}");
                return DecideOutcome::NotFound;
            }
        };
        let Some(resolution) = stored_resolution(&events, approval_id) else {
            return DecideOutcome::NotFound;
        };
        self.registry().remember_resolved(approval_id, resolution);
        DecideOutcome::settled(Some(resolution))
    }
}
