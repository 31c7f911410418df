//! Deciding an approval and listing the pending ones: the `DecideApproval` and
//! `ListPendingApprovals` calls every client makes (`tau chat`, `tau tui`, `tau ask`,
//! `tau approvals`, tau-telegram), each with a deadline.
//!
//! Invariants: a decision is built only from what a person answered ([`request`] takes the
//! decision, never makes one); it names the attachment that was shown the question (the hub
//! refuses any other); every call ends by its deadline ([`crate::call::within`]).

use std::time::Duration;

use tau_api::proto::v1::{self as pb, tau_client::TauClient};
use tonic::client::GrpcService;
use tonic::codegen::{Body, Bytes, StdError};

use crate::call::{CallError, within};

/// The `DecideApprovalRequest` for `decision` on `approval_id`, sent with `attachment_id` (the
/// stream or watch that was shown the question).
pub fn request(
    approval_id: &str,
    decision: pb::ApprovalDecision,
    attachment_id: &str,
) -> pb::DecideApprovalRequest {
    pb::DecideApprovalRequest {
        approval_id: approval_id.to_owned(),
        decision: decision as i32,
        attachment_id: attachment_id.to_owned(),
    }
}

/// APPROVED for a person's yes, REJECTED for anything else.
pub fn decision(approve: bool) -> pb::ApprovalDecision {
    if approve {
        pb::ApprovalDecision::Approved
    } else {
        pb::ApprovalDecision::Rejected
    }
}

/// What the hub said of a decision sent from here, read once from its `DecideApprovalResponse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// This decision won: the approval ended as sent (`approved` or not).
    Applied { approved: bool },
    /// Another decision, a timeout or a cancel came first; `resolution` is how it ended
    /// (`crate::present::resolution_name`).
    AlreadyDecided { resolution: &'static str },
    /// The approval had ended (its turn or hub is gone) before the decision arrived.
    Expired { resolution: &'static str },
    /// The hub knows no approval with this id (or answered with an outcome this client does not
    /// know).
    NotFound,
}

impl Decided {
    /// The hub's `response` to a decision that approved (`approve`) or not.
    pub fn of(approve: bool, response: &pb::DecideApprovalResponse) -> Self {
        let resolution = crate::present::resolution_name(response.resolution);
        match pb::DecideOutcome::try_from(response.outcome) {
            Ok(pb::DecideOutcome::Applied) => Decided::Applied { approved: approve },
            Ok(pb::DecideOutcome::AlreadyDecided) => Decided::AlreadyDecided { resolution },
            Ok(pb::DecideOutcome::Expired) => Decided::Expired { resolution },
            Ok(pb::DecideOutcome::NotFound | pb::DecideOutcome::Unspecified) | Err(_) => {
                Decided::NotFound
            }
        }
    }
}

/// Sends `decision` on `approval_id` with `attachment_id`, within `deadline`.
pub async fn decide<C>(
    client: &mut TauClient<C>,
    approval_id: &str,
    decision: pb::ApprovalDecision,
    attachment_id: &str,
    deadline: Duration,
) -> Result<pb::DecideApprovalResponse, CallError>
where
    C: GrpcService<tonic::body::Body>,
    C::Error: Into<StdError>,
    C::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <C::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    let request = request(approval_id, decision, attachment_id);
    within(deadline, client.decide_approval(request)).await
}

/// The approvals pending in the hub, of `session_id` (every session when empty), within
/// `deadline`.
pub async fn list_pending<C>(
    client: &mut TauClient<C>,
    session_id: &str,
    deadline: Duration,
) -> Result<Vec<pb::PendingApproval>, CallError>
where
    C: GrpcService<tonic::body::Body>,
    C::Error: Into<StdError>,
    C::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <C::ResponseBody as Body>::Error: Into<StdError> + Send,
{
    let request = pb::ListPendingApprovalsRequest {
        session_id: session_id.to_owned(),
    };
    let listed = within(deadline, client.list_pending_approvals(request)).await?;
    Ok(listed.approvals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_what_the_person_answered_and_the_attachment() {
        let yes = request("apr-1", decision(true), "att-1");
        assert_eq!(yes.approval_id, "apr-1");
        assert_eq!(yes.decision, pb::ApprovalDecision::Approved as i32);
        assert_eq!(yes.attachment_id, "att-1");
        let no = request("apr-1", decision(false), "att-1");
        assert_eq!(no.decision, pb::ApprovalDecision::Rejected as i32);
    }

    #[test]
    fn the_hub_s_answer_is_read_once_into_what_became_of_the_decision() {
        let answer = |outcome: pb::DecideOutcome, resolution: pb::ApprovalResolution| {
            pb::DecideApprovalResponse {
                outcome: outcome as i32,
                resolution: resolution as i32,
            }
        };
        use pb::{ApprovalResolution as R, DecideOutcome as O};
        assert_eq!(
            Decided::of(true, &answer(O::Applied, R::Approved)),
            Decided::Applied { approved: true }
        );
        assert_eq!(
            Decided::of(false, &answer(O::Applied, R::Rejected)),
            Decided::Applied { approved: false }
        );
        assert_eq!(
            Decided::of(true, &answer(O::AlreadyDecided, R::Timeout)),
            Decided::AlreadyDecided {
                resolution: "timeout"
            }
        );
        assert_eq!(
            Decided::of(true, &answer(O::Expired, R::Cancelled)),
            Decided::Expired {
                resolution: "cancelled"
            }
        );
        assert_eq!(
            Decided::of(true, &answer(O::Unspecified, R::Approved)),
            Decided::NotFound,
            "an outcome not known is never read as applied"
        );
    }

    #[tokio::test]
    async fn a_hub_that_does_not_answer_ends_the_call_at_its_deadline() {
        // Nothing listens on port 9: the lazy channel fails or stalls; either way the call ends.
        let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
        let mut client = TauClient::new(channel);
        let result = list_pending(&mut client, "", Duration::from_millis(500)).await;
        assert!(result.is_err(), "{result:?}");
    }
}
