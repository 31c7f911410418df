//! A turn of the scripted hub: the test feeds its events one by one, and may move it to the
//! Subscribe stream that resumed it after a cut-off.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tau_api::proto::v1::{self as pb, start_turn_response};
use tonic::Status;

use super::{EventSender, Notices, SubscribeSender, WAIT, session};

/// The event stream every scripted turn is accepted on.
pub const STREAM: &str = "stream-1";

pub struct Turn {
    /// The turn's StartTurn stream.
    pub events: EventSender,
    /// The Subscribe that resumed the turn after a cut-off: events go there from then on.
    pub resumed: Option<SubscribeSender>,
    pub seq: u64,
}

impl Turn {
    pub fn send(&self, kind: start_turn_response::Kind) {
        self.events
            .blocking_send(Ok(pb::StartTurnResponse { kind: Some(kind) }))
            .unwrap();
    }

    pub fn event(&mut self, kind: pb::session_event::Kind) {
        self.seq += 1;
        self.event_at(self.seq, kind);
    }

    /// Sends an event numbered `seq` (an earlier one when replaying) on the live stream.
    pub fn event_at(&self, seq: u64, kind: pb::session_event::Kind) {
        let event = pb::SessionEvent {
            seq,
            session_id: session().session_id,
            turn_id: "turn-1".into(),
            kind: Some(kind),
            ..Default::default()
        };
        match &self.resumed {
            Some(resumed) => resumed
                .blocking_send(Ok(pb::SubscribeResponse {
                    kind: Some(pb::subscribe_response::Kind::Event(event)),
                }))
                .unwrap(),
            None => self.send(start_turn_response::Kind::Event(event)),
        }
    }

    /// Cuts the turn's stream off as lagging, as the hub does, naming `after_seq` in the trailer.
    pub fn cut_off(&self, after_seq: u64) {
        let mut status = Status::resource_exhausted("lagged behind the turn's events");
        status.metadata_mut().insert(
            "tau-resume-after-seq",
            after_seq.to_string().parse().unwrap(),
        );
        self.events.blocking_send(Err(status)).unwrap();
    }

    /// Waits for the Subscribe that resumes the turn and answers it with a snapshot naming the
    /// new `attachment_id`; later events go to it. Returns the request.
    pub fn resume(&mut self, notices: &Notices, attachment_id: &str) -> pb::SubscribeRequest {
        let (request, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
        sender
            .blocking_send(Ok(pb::SubscribeResponse {
                kind: Some(pb::subscribe_response::Kind::Snapshot(
                    pb::SessionSnapshot {
                        last_seq: self.seq,
                        attachment_id: attachment_id.into(),
                        stream_id: STREAM.into(),
                        ..Default::default()
                    },
                )),
            }))
            .unwrap();
        self.resumed = Some(sender);
        request
    }

    pub fn text(&mut self, text: &str) {
        self.event(pb::session_event::Kind::TextDelta(pb::TextDelta {
            text: text.into(),
        }));
    }

    pub fn approval(&mut self, id: &str, channel: &str) {
        self.event(pb::session_event::Kind::ApprovalRequested(
            pb::ApprovalRequested {
                approval: Some(pb::PendingApproval {
                    approval_id: id.into(),
                    channel: channel.into(),
                    tool: "demo_physical_action".into(),
                    tier: 2,
                    arguments: "{\"action\": \"turn on the desk lamp\"}".into(),
                    effect: "Demo: simulates a physical action; no real device moves.".into(),
                    ..Default::default()
                }),
            },
        ));
    }

    pub fn refused(&mut self) {
        self.event(pb::session_event::Kind::ToolCall(pb::ToolCallFinished {
            tool: "demo_physical_action".into(),
            tier: pb::Tier::Physical as i32,
            status: pb::ToolCallStatus::Refused as i32,
            approval: "rejected".into(),
            ..Default::default()
        }));
    }

    pub fn end(&mut self, stop_reason: &str, text: &str) {
        self.event(pb::session_event::Kind::TurnEnded(pb::TurnEnded {
            stop_reason: stop_reason.into(),
            text: text.into(),
            ..Default::default()
        }));
    }
}
