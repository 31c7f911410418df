//! Machine-readable marks on the hub's error statuses, so a client can recognise a refusal and
//! say it in its own UI language instead of showing the hub's English message.
//!
//! A marked status carries the metadata key [`KIND_KEY`] (`tau-error`) with a stable kind name,
//! and per kind the details a client needs. Marks are added by the hub's rpc layer and read by
//! clients; the status code and message stay what they were, so an unmarked client loses nothing.
//!
//! Invariants: a mark only carries visible ASCII (a detail that is not is left out, and a mark
//! without its details is not recognised); reading never fails, it answers `None`.

use tonic::metadata::MetadataValue;

/// The metadata key naming the kind of a marked refusal.
pub const KIND_KEY: &str = "tau-error";

/// The kind of a session recorded under another `[agent] context` mode.
pub const CONTEXT_MISMATCH: &str = "context-mismatch";

/// The metadata key with the session id of a [`CONTEXT_MISMATCH`].
pub const SESSION_ID_KEY: &str = "tau-session-id";

/// The metadata key with the recorded context mode of a [`CONTEXT_MISMATCH`].
pub const CONTEXT_MODE_KEY: &str = "tau-context-mode";

/// The kind of a decision refused because the stream of its attachment was cut off for falling
/// behind: the client resumes its stream (Subscribe) and decides again with the new attachment.
pub const CUT_OFF: &str = "cut-off";

/// A session was recorded under another `[agent] context` mode than the hub runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextMismatch {
    /// The session.
    pub session_id: String,
    /// The mode it was recorded with (`sliding`, `summarize`, or a manager name tau does not know).
    pub recorded_mode: String,
}

/// Marks `status` as a [`CONTEXT_MISMATCH`] of `session_id`, recorded with `recorded_mode`.
pub fn mark_context_mismatch(status: &mut tonic::Status, session_id: &str, recorded_mode: &str) {
    let (Ok(id), Ok(mode)) = (
        MetadataValue::try_from(session_id),
        MetadataValue::try_from(recorded_mode),
    ) else {
        return;
    };
    let metadata = status.metadata_mut();
    metadata.insert(KIND_KEY, MetadataValue::from_static(CONTEXT_MISMATCH));
    metadata.insert(SESSION_ID_KEY, id);
    metadata.insert(CONTEXT_MODE_KEY, mode);
}

/// The context mismatch `status` is marked with, if it is one.
pub fn context_mismatch(status: &tonic::Status) -> Option<ContextMismatch> {
    let metadata = status.metadata();
    let text = |key: &str| metadata.get(key)?.to_str().ok().map(str::to_owned);
    if text(KIND_KEY)? != CONTEXT_MISMATCH {
        return None;
    }
    Some(ContextMismatch {
        session_id: text(SESSION_ID_KEY)?,
        recorded_mode: text(CONTEXT_MODE_KEY)?,
    })
}

/// Marks `status` as a [`CUT_OFF`] refusal (it has no details).
pub fn mark_cut_off(status: &mut tonic::Status) {
    status
        .metadata_mut()
        .insert(KIND_KEY, MetadataValue::from_static(CUT_OFF));
}

/// Whether `status` is marked as a [`CUT_OFF`] refusal.
pub fn is_cut_off(status: &tonic::Status) -> bool {
    status
        .metadata()
        .get(KIND_KEY)
        .is_some_and(|kind| kind.to_str().ok() == Some(CUT_OFF))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_mismatch_reads_back() {
        let mut status = tonic::Status::failed_precondition("Session s1 was recorded …");
        mark_context_mismatch(&mut status, "20261130-010203-abcd", "summarize");
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert_eq!(
            context_mismatch(&status),
            Some(ContextMismatch {
                session_id: "20261130-010203-abcd".into(),
                recorded_mode: "summarize".into(),
            })
        );
    }

    #[test]
    fn unmarked_or_unprintable_statuses_are_not_mismatches() {
        let plain = tonic::Status::failed_precondition("different [agent] context");
        assert_eq!(context_mismatch(&plain), None);
        let mut odd = tonic::Status::failed_precondition("x");
        mark_context_mismatch(&mut odd, "s1", "weird\nmode");
        assert_eq!(context_mismatch(&odd), None);
        assert!(odd.metadata().get(KIND_KEY).is_none());
    }

    #[test]
    fn a_marked_cut_off_reads_back_and_is_no_mismatch() {
        let mut status = tonic::Status::failed_precondition("attachment \"a1\" was cut off");
        assert!(!is_cut_off(&status));
        mark_cut_off(&mut status);
        assert!(is_cut_off(&status));
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert_eq!(status.message(), "attachment \"a1\" was cut off");
        assert_eq!(context_mismatch(&status), None);
        let mut mismatch = tonic::Status::failed_precondition("x");
        mark_context_mismatch(&mut mismatch, "s1", "summarize");
        assert!(!is_cut_off(&mismatch));
    }
}
