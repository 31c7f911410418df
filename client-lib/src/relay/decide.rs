//! Sending a decision (once more, with the resumed stream's attachment, when the hub refused it as
//! cut off) and cancelling the turn; both within the call deadline and giving way to the front's
//! interrupt.

use std::future::Future;

use tau_api::error_marks;
use tau_api::proto::v1 as pb;
use tonic::client::GrpcService;
use tonic::codegen::{Body, Bytes, StdError};

use super::{Front, Outcome, Relay};
use crate::call::{CallError, within};
use crate::feed::Reattached;

/// What one attempt at sending a decision came to.
enum Attempt {
    Answered(pb::DecideApprovalResponse),
    /// The front interrupted while it was on its way.
    Interrupted,
    /// Refused; `true` when refused as cut off.
    Refused(CallError, bool),
}

impl<C, F> Relay<'_, C, F>
where
    C: GrpcService<tonic::body::Body> + Clone,
    C::Error: Into<StdError>,
    C::ResponseBody: Body<Data = Bytes> + Send + 'static,
    <C::ResponseBody as Body>::Error: Into<StdError> + Send,
    F: Front,
{
    /// Sends the decision with the attachment of the stream live now and hands the hub's answer to
    /// the front; `Some(outcome)` when the relay ends meanwhile.
    pub(super) async fn decide(
        &mut self,
        approval: &pb::PendingApproval,
        approve: bool,
    ) -> Option<Outcome> {
        let mut attachment = self.feed.attachment().to_owned();
        let mut retried = false;
        let response = loop {
            let (error, cut_off) = match self.send(approval, approve, &attachment).await {
                Attempt::Answered(response) => break response,
                Attempt::Interrupted => return self.interrupted_decision().await,
                Attempt::Refused(error, cut_off) => (error, cut_off),
            };
            if retried || !cut_off {
                return self.failed(error);
            }
            retried = true;
            // The hub cut the stream off before the decision arrived: read on to the resumed one.
            let deadline = self.deadline;
            let reattached = tokio::select! {
                reattached = self.feed.reattach(&attachment, &mut self.backlog, deadline) => {
                    reattached
                }
                () = self.front.interrupted() => return self.interrupted_decision().await,
            };
            match reattached {
                Ok(Reattached::Attached(resumed)) => attachment = resumed,
                Ok(Reattached::Ended | Reattached::TimedOut) => {
                    return self.failed(error);
                }
                Err(lost) => {
                    let go_on = self.front.decision_failed(error, Some(&lost));
                    return Some(if go_on {
                        Outcome::StreamLost(Some(lost))
                    } else {
                        Outcome::Stopped
                    });
                }
            }
        };
        self.front.decided(approval, approve, &response);
        None
    }

    /// A decision the hub refused: the front says whether the relay goes on.
    fn failed(&mut self, error: CallError) -> Option<Outcome> {
        if self.front.decision_failed(error, None) {
            None
        } else {
            Some(Outcome::Stopped)
        }
    }

    /// An interrupt while a decision was on its way cancels the turn, as during a reply.
    async fn interrupted_decision(&mut self) -> Option<Outcome> {
        if self.cancel().await {
            None
        } else {
            Some(Outcome::Detached)
        }
    }

    /// One DecideApproval with `attachment`.
    async fn send(
        &mut self,
        approval: &pb::PendingApproval,
        approve: bool,
        attachment: &str,
    ) -> Attempt {
        let request = crate::approvals::request(
            &approval.approval_id,
            crate::approvals::decision(approve),
            attachment,
        );
        let mut client = self.client.clone();
        match self.call(client.decide_approval(request)).await {
            Ok(response) => Attempt::Answered(response),
            Err(CallError::Interrupted) => Attempt::Interrupted,
            Err(error) => {
                let cut_off =
                    matches!(&error, CallError::Hub(status) if error_marks::is_cut_off(status));
                Attempt::Refused(error, cut_off)
            }
        }
    }

    /// Asks the hub to cancel the turn; `false` when interrupted again while asking (detach).
    pub(super) async fn cancel(&mut self) -> bool {
        self.cancel_sent = true;
        self.front.cancelling();
        let request = pb::CancelTurnRequest {
            session_id: self.session_id.clone(),
            turn_id: self.turn_id.clone(),
        };
        let mut client = self.client.clone();
        match self.call(client.cancel_turn(request)).await {
            Ok(_) => true,
            Err(CallError::Interrupted) => false,
            Err(error) => {
                self.front.cancel_failed(&error);
                true
            }
        }
    }

    /// Waits for `request` within the deadline, and not after the front's interrupt.
    async fn call<T, R>(&mut self, request: R) -> Result<T, CallError>
    where
        R: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        tokio::select! {
            answer = within(self.deadline, request) => answer,
            () = self.front.interrupted() => Err(CallError::Interrupted),
        }
    }
}
