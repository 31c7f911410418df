//! The lower-case names of the wire's statuses (`success`, `approved`, …): the words the stored
//! events use, so a live status and a stored one read alike in a line and in `tau ask --json`.
//!
//! Invariants: a value the wire does not know, or an unset one, is `unknown`; never a number.

use tau_api::proto::v1 as pb;

/// The lower-case name of a tool call's status.
pub fn tool_status_name(status: i32) -> &'static str {
    match pb::ToolCallStatus::try_from(status) {
        Ok(pb::ToolCallStatus::Success) => "success",
        Ok(pb::ToolCallStatus::Error) => "error",
        Ok(pb::ToolCallStatus::Refused) => "refused",
        Ok(pb::ToolCallStatus::Cancelled) => "cancelled",
        Ok(pb::ToolCallStatus::Unspecified) | Err(_) => "unknown",
    }
}

/// The lower-case name of an approval resolution.
pub fn resolution_name(resolution: i32) -> &'static str {
    match pb::ApprovalResolution::try_from(resolution) {
        Ok(pb::ApprovalResolution::Approved) => "approved",
        Ok(pb::ApprovalResolution::Rejected) => "rejected",
        Ok(pb::ApprovalResolution::Timeout) => "timeout",
        Ok(pb::ApprovalResolution::Cancelled) => "cancelled",
        Ok(pb::ApprovalResolution::ChannelClosed) => "channel_closed",
        Ok(pb::ApprovalResolution::ExpiredByRestart) => "expired_by_restart",
        Ok(pb::ApprovalResolution::Unspecified) | Err(_) => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_are_named_unknown() {
        assert_eq!(
            tool_status_name(pb::ToolCallStatus::Refused as i32),
            "refused"
        );
        assert_eq!(tool_status_name(99), "unknown");
        assert_eq!(
            resolution_name(pb::ApprovalResolution::ExpiredByRestart as i32),
            "expired_by_restart"
        );
        assert_eq!(resolution_name(0), "unknown");
    }
}
