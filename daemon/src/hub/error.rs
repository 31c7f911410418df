//! [`CoreError`]: every way a hub call can fail, sorted by what the caller should do about it. The
//! rpc layer maps each variant to one gRPC code in one place.
//!
//! Invariants: messages are one line, carry no secret, and show ids taken from a request escaped
//! (`{:?}`); a store failure is `Unavailable` (the caller may retry), never a panic. Imports
//! nothing else of the hub: a refusal of another part (an approval's decision, an attachment) is
//! turned into a `CoreError` where that refusal is defined.

use crate::store::{SessionContextMismatch, SessionError};

/// A hub call that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// The request is malformed (empty text, a bad id, an unknown enum value).
    #[error("{0}")]
    InvalidArgument(String),
    /// Something named in the request does not exist (session, turn, role).
    #[error("{0}")]
    NotFound(String),
    /// The request is valid but the hub's state refuses it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// A bound was hit (queued turns).
    #[error("{0}")]
    ResourceExhausted(String),
    /// The hub cannot serve it now (the store failed, the hub is stopping).
    #[error("{0}")]
    Unavailable(String),
    /// The session was recorded under another `[agent] context` mode (a failed precondition
    /// that clients recognise by its mark, `tau_api::error_marks`).
    #[error(transparent)]
    ContextMismatch(SessionContextMismatch),
    /// A decision from an attachment whose stream was cut off for falling behind (a failed
    /// precondition that clients recognise by its mark and retry with their new attachment).
    #[error("{0}")]
    CutOff(String),
}

impl CoreError {
    /// `Session <id> not found.`
    pub fn session_not_found(session_id: &str) -> Self {
        Self::NotFound(format!("session {session_id:?} not found"))
    }

    /// A model role tau.toml does not define.
    pub fn unknown_role(role: &str) -> Self {
        Self::NotFound(format!(
            "model role {:?} is not defined in tau.toml ([models.roles.<role>])",
            role.chars().take(80).collect::<String>()
        ))
    }
}

impl From<SessionError> for CoreError {
    fn from(error: SessionError) -> Self {
        match error {
            SessionError::InvalidId { .. } => Self::InvalidArgument(error.to_string()),
            SessionError::SessionNotFound(id) => Self::session_not_found(&id),
            SessionError::AgentNotFound { .. } | SessionError::MessageNotFound { .. } => {
                Self::NotFound(error.to_string())
            }
            SessionError::ContextMismatch(mismatch) => Self::ContextMismatch(mismatch),
            SessionError::UnsupportedFormat { .. } => Self::FailedPrecondition(error.to_string()),
            other => Self::Unavailable(format!("session store: {other}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::IdKind;

    #[test]
    fn store_errors_sort_into_what_the_caller_can_do() {
        let bad = SessionError::InvalidId {
            kind: IdKind::Session,
            id: "../x".into(),
            reason: "not a plain name",
        };
        assert!(matches!(
            CoreError::from(bad),
            CoreError::InvalidArgument(_)
        ));
        assert_eq!(
            CoreError::from(SessionError::SessionNotFound("s1".into())),
            CoreError::NotFound("session \"s1\" not found".into())
        );
        let mismatch = SessionError::ContextMismatch(SessionContextMismatch {
            session_id: "s1".into(),
            recorded: "summarize".into(),
        });
        let mapped = CoreError::from(mismatch);
        assert!(matches!(mapped, CoreError::ContextMismatch(_)));
        assert!(mapped.to_string().contains("different [agent] context"));
        let io = SessionError::Random("no entropy".into());
        assert!(matches!(CoreError::from(io), CoreError::Unavailable(_)));
    }
}
