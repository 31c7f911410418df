//! The one place where domain errors become `tonic::Status`.
//!
//! Invariants: a status message never carries a secret (a token, a path under the user's home is
//! fine); authentication failures are UNAUTHENTICATED, a wrong peer is PERMISSION_DENIED; each
//! [`CoreError`] kind has one code; a lagged subscriber gets RESOURCE_EXHAUSTED with the seq to
//! resume after, in the message and in the `tau-resume-after-seq` trailer; a context mismatch is
//! FAILED_PRECONDITION marked for clients (`tau_api::error_marks`), and so is a decision from an
//! attachment cut off for falling behind (marked `cut-off`: the client decides again with the
//! attachment of its resumed stream). A status message is one line of at most
//! [`MAX_STATUS_MESSAGE`] bytes: errors may quote stored data (a damaged record's value), and a
//! message too long for the client's header limit would reach it as a broken HTTP/2 stream.

use tau_api::error_marks::{mark_context_mismatch, mark_cut_off};

use super::auth::AuthError;
use crate::hub::{CoreError, Lagged};

/// The trailer naming the seq a cut-off subscriber resumes after.
pub const RESUME_TRAILER: &str = "tau-resume-after-seq";

/// The longest status message, in bytes (before escaping on the wire).
pub const MAX_STATUS_MESSAGE: usize = 1024;

/// `message` as one line (control characters escaped) of at most [`MAX_STATUS_MESSAGE`] bytes,
/// cut on a character boundary and marked with `…` when cut.
pub fn status_message(message: &str) -> String {
    let mut line = String::with_capacity(message.len().min(MAX_STATUS_MESSAGE));
    for ch in message.chars() {
        let piece: String = if ch.is_control() {
            ch.escape_default().collect()
        } else {
            ch.into()
        };
        if line.len() + piece.len() > MAX_STATUS_MESSAGE - '…'.len_utf8() {
            line.push('…');
            return line;
        }
        line.push_str(&piece);
    }
    line
}

impl From<CoreError> for tonic::Status {
    fn from(err: CoreError) -> Self {
        let message = status_message(&err.to_string());
        match err {
            CoreError::InvalidArgument(_) => tonic::Status::invalid_argument(message),
            CoreError::NotFound(_) => tonic::Status::not_found(message),
            CoreError::FailedPrecondition(_) => tonic::Status::failed_precondition(message),
            CoreError::ResourceExhausted(_) => tonic::Status::resource_exhausted(message),
            CoreError::Unavailable(_) => tonic::Status::unavailable(message),
            CoreError::ContextMismatch(mismatch) => {
                let mut status = tonic::Status::failed_precondition(message);
                mark_context_mismatch(&mut status, &mismatch.session_id, &mismatch.recorded);
                status
            }
            CoreError::CutOff(_) => {
                let mut status = tonic::Status::failed_precondition(message);
                mark_cut_off(&mut status);
                status
            }
        }
    }
}

/// The status that cuts off a subscriber that fell too far behind.
pub fn lagged(lagged: Lagged) -> tonic::Status {
    let mut status = tonic::Status::resource_exhausted(lagged.to_string());
    if let Ok(value) = lagged.resume_after_seq.to_string().parse() {
        status.metadata_mut().insert(RESUME_TRAILER, value);
    }
    status
}

impl From<AuthError> for tonic::Status {
    fn from(err: AuthError) -> Self {
        match err {
            AuthError::MissingToken | AuthError::WrongToken => {
                tonic::Status::unauthenticated(err.to_string())
            }
            AuthError::UnknownPeer => tonic::Status::unauthenticated(err.to_string()),
            AuthError::ForeignPeer { .. } => tonic::Status::permission_denied(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_have_one_code_each() {
        let cases = [
            (
                CoreError::InvalidArgument("x".into()),
                tonic::Code::InvalidArgument,
            ),
            (CoreError::NotFound("x".into()), tonic::Code::NotFound),
            (
                CoreError::FailedPrecondition("x".into()),
                tonic::Code::FailedPrecondition,
            ),
            (
                CoreError::ResourceExhausted("x".into()),
                tonic::Code::ResourceExhausted,
            ),
            (CoreError::Unavailable("x".into()), tonic::Code::Unavailable),
        ];
        for (err, code) in cases {
            let status = tonic::Status::from(err);
            assert_eq!((status.code(), status.message()), (code, "x"));
        }
        let mismatch = tonic::Status::from(CoreError::ContextMismatch(
            crate::store::SessionContextMismatch {
                session_id: "s1".into(),
                recorded: "summarize".into(),
            },
        ));
        assert_eq!(mismatch.code(), tonic::Code::FailedPrecondition);
        assert!(mismatch.message().contains("different [agent] context"));
        let marked = tau_api::error_marks::context_mismatch(&mismatch).unwrap();
        assert_eq!(
            (marked.session_id.as_str(), marked.recorded_mode.as_str()),
            ("s1", "summarize")
        );
        let status = lagged(Lagged {
            resume_after_seq: 41,
        });
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(status.message(), "lagged; resume with after_seq = 41");
        assert_eq!(status.metadata().get(RESUME_TRAILER).unwrap(), "41");
    }

    #[tokio::test]
    async fn a_decision_from_a_cut_off_attachment_is_marked_for_a_retry() {
        use std::sync::Arc;
        use std::time::Duration;

        use tau_api::error_marks::is_cut_off;
        use tokio_util::sync::CancellationToken;

        use crate::hub::{ApprovalAnswer, ApprovalRegistry, EventBus, PendingInfo};

        let registry = ApprovalRegistry::new();
        let bus = Arc::new(EventBus::new("s1"));
        let cut = registry.attach(&bus, "terminal").unwrap();
        let cut_id = cut.id().to_owned();
        let info = PendingInfo {
            request: crate::gate::ApprovalRequest {
                approval_id: "a1".into(),
                tool: "demo_physical_action".into(),
                tier: crate::tool::Tier::Physical,
                arguments: serde_json::json!({}),
                effect: "moves nothing".into(),
                session_id: "s1".into(),
                channel: "terminal".into(),
                tool_use_id: "tu-1".into(),
                timeout: None,
            },
            turn_id: "turn-1".into(),
            held: false,
            asked_at: "now".into(),
            deadline: None,
        };
        let _ticket = registry.register(&bus, info);
        let stop = CancellationToken::new();
        cut.hold_after_lag(Duration::from_secs(60), &stop);
        let refusal = |attachment: &str| {
            let error = registry
                .decide("a1", ApprovalAnswer::Approve, attachment)
                .unwrap_err();
            tonic::Status::from(CoreError::from(error))
        };
        let status = refusal(&cut_id);
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert!(status.message().contains("was cut off"), "{status:?}");
        assert!(is_cut_off(&status), "{status:?}");
        let forged = refusal("att-forged");
        assert_eq!(forged.code(), tonic::Code::FailedPrecondition);
        assert!(!is_cut_off(&forged), "{forged:?}");
        assert_eq!(registry.pending_count(), 1);
        stop.cancel();
    }

    #[test]
    fn status_messages_are_one_bounded_line() {
        assert_eq!(status_message("plain"), "plain");
        assert_eq!(status_message("a\nb\u{1b}"), "a\\nb\\u{1b}");
        let long = status_message(&"é".repeat(5000));
        assert!(long.len() <= MAX_STATUS_MESSAGE, "{}", long.len());
        assert!(long.ends_with('…'));
        let status = tonic::Status::from(CoreError::Unavailable(format!(
            "session store: {}\n",
            "x".repeat(100_000)
        )));
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert!(status.message().len() <= MAX_STATUS_MESSAGE);
        assert!(!status.message().contains('\n'));
    }

    #[test]
    fn codes() {
        assert_eq!(
            tonic::Status::from(AuthError::MissingToken).code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            tonic::Status::from(AuthError::WrongToken).code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            tonic::Status::from(AuthError::UnknownPeer).code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            tonic::Status::from(AuthError::ForeignPeer { uid: 7 }).code(),
            tonic::Code::PermissionDenied
        );
    }
}
