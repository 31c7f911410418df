//! The approval vocabulary the gate and the hub share, and its string forms, in one place.
//!
//! - [`ApprovalRequest`]: the record of one pending approval, made by the gate, kept and shown by
//!   the hub.
//! - [`ApprovalOutcome`]: how one tier-2 question ended. The gate's verdict, the hub's registry,
//!   the `DecideApproval` answer, the `approval_resolved` event and the stored `approval` event all
//!   speak of an approval's fate with it.
//! - [`ApprovalState`]: the `status` of a stored `approval` event: `pending` when asked, then the
//!   outcome. A separate type because "still pending" is not an outcome.
//! - [`CallApproval`]: the `approval` of a stored `tool_call` event: a call that needed no question
//!   (`not_required`), one an exemption let through (`exempt`), or the outcome of its question.
//!   A separate type because most calls are never asked.
//! - [`ApprovalAnswer`]: what a person may answer (approve or reject). A separate type because an
//!   answer is an input with two values, while an outcome is what the registry chose.
//!
//! Invariants (ARCHITECTURE.md, "Rules that never bend"): every word these types read or write
//! comes from [`ApprovalOutcome::as_str`] or the three words of the wrappers (`pending`,
//! `not_required`, `exempt`); they are the stored vocabulary of events.jsonl and never change
//! meaning, so records written by older versions read the same (see the tests). Only
//! [`ApprovalOutcome::Approved`] approves.

use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::format::format_approval_arguments;
use crate::tool::Tier;

/// The record of one pending approval: everything a person needs to decide one tier-2 call. The
/// gate makes it; the hub keeps it while the question is open and shows it to clients (with where
/// and when it was asked, `crate::hub::PendingInfo`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Unique per question; the `approval` events and the hub's decide call use it.
    pub approval_id: String,
    pub tool: String,
    pub tier: Tier,
    /// The model's arguments, untrusted: show them with [`ApprovalRequest::formatted_arguments`].
    pub arguments: Value,
    /// The tool's effect sentence (English).
    pub effect: String,
    pub session_id: String,
    /// The channel the call came from; only a decision from that channel counts.
    pub channel: String,
    pub tool_use_id: String,
    /// How long the question stays open, when a timeout applies.
    pub timeout: Option<Duration>,
}

impl ApprovalRequest {
    /// The arguments as shown to a person: sorted JSON, control and bidi characters escaped.
    pub fn formatted_arguments(&self) -> String {
        format_approval_arguments(&self.arguments)
    }
}

/// How one approval question ended. Only `Approved` lets the call run.
///
/// The gate records the outcome its approver returns; the hub's approver returns the registry's
/// winner as the gate records it ([`ApprovalOutcome::as_recorded_by_gate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalOutcome {
    /// A person approved it: the only outcome that runs the tool.
    Approved,
    /// A person (or the approver) rejected it.
    Rejected,
    /// Nobody decided before the deadline.
    Timeout,
    /// The approver failed (or panicked). Only the gate records it; the hub reports it as
    /// `Cancelled`.
    Error,
    /// The approver answered something that is not a decision. Only the gate records it; the hub
    /// reports it as `Cancelled`.
    Invalid,
    /// The wait was cancelled (turn cancelled, client gone, hub stopping).
    Cancelled,
    /// The last client shown it went away, or none was attached when it was asked (a closed dialog
    /// never approves). Only the hub reports it; the gate records it as `Rejected`.
    ChannelClosed,
    /// Found pending in a stored session when the hub started: the hub that asked stopped without
    /// deciding it, and its tool never ran. Recorded by the start-up scan only.
    ExpiredByRestart,
}

impl ApprovalOutcome {
    /// Every outcome, in declaration order.
    pub const ALL: [Self; 8] = [
        Self::Approved,
        Self::Rejected,
        Self::Timeout,
        Self::Error,
        Self::Invalid,
        Self::Cancelled,
        Self::ChannelClosed,
        Self::ExpiredByRestart,
    ];

    /// The stored, logged and `--json` name: the one place these words are spelled.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Timeout => "timeout",
            Self::Error => "error",
            Self::Invalid => "invalid",
            Self::Cancelled => "cancelled",
            Self::ChannelClosed => "channel_closed",
            Self::ExpiredByRestart => "expired_by_restart",
        }
    }

    /// The outcome named `word` (exactly as [`ApprovalOutcome::as_str`] spells it).
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == word)
    }

    /// Whether this outcome lets the call run: only `Approved` does.
    pub fn is_approved(self) -> bool {
        self == Self::Approved
    }

    /// Whether a person (or a closed dialog) decided it, as opposed to it running out or failing.
    pub fn is_decision(self) -> bool {
        matches!(self, Self::Approved | Self::Rejected | Self::ChannelClosed)
    }

    /// Reads a raw answer from a channel: `approved`/`APPROVED` approve, `rejected`/`REJECTED`
    /// reject, anything else is `Invalid` (which refuses, like every non-approval).
    pub fn from_answer(raw: &str) -> Self {
        ApprovalAnswer::parse(raw).map_or(Self::Invalid, ApprovalAnswer::outcome)
    }

    /// The outcome the gate records and acts on when the hub's registry chose `self`: the gate's
    /// records know no closed channel (a closed dialog is recorded as a rejection) and no restart
    /// (the start-up scan records that one itself). Every other outcome is kept.
    pub fn as_recorded_by_gate(self) -> Self {
        match self {
            Self::ChannelClosed => Self::Rejected,
            Self::ExpiredByRestart => Self::Cancelled,
            other => other,
        }
    }
}

/// The `status` of a stored `approval` event: `pending` when the question is asked, then how it
/// ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApprovalState {
    Pending,
    Ended(ApprovalOutcome),
}

impl ApprovalState {
    const PENDING: &'static str = "pending";

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => Self::PENDING,
            Self::Ended(outcome) => outcome.as_str(),
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        if word == Self::PENDING {
            return Some(Self::Pending);
        }
        ApprovalOutcome::parse(word).map(Self::Ended)
    }

    /// How it ended; `None` while pending.
    pub fn outcome(self) -> Option<ApprovalOutcome> {
        match self {
            Self::Pending => None,
            Self::Ended(outcome) => Some(outcome),
        }
    }
}

impl From<ApprovalOutcome> for ApprovalState {
    fn from(outcome: ApprovalOutcome) -> Self {
        Self::Ended(outcome)
    }
}

/// How a tool call was approved, as its `tool_call` event records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallApproval {
    /// Tier 0 or 1, or a call refused before any question (unknown tool).
    NotRequired,
    /// A tier-2 call an exemption let through without a question.
    Exempt,
    /// A tier-2 call whose question ended so.
    Asked(ApprovalOutcome),
}

impl CallApproval {
    const NOT_REQUIRED: &'static str = "not_required";
    const EXEMPT: &'static str = "exempt";

    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotRequired => Self::NOT_REQUIRED,
            Self::Exempt => Self::EXEMPT,
            Self::Asked(outcome) => outcome.as_str(),
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        match word {
            Self::NOT_REQUIRED => Some(Self::NotRequired),
            Self::EXEMPT => Some(Self::Exempt),
            _ => ApprovalOutcome::parse(word).map(Self::Asked),
        }
    }
}

/// A client's answer to an approval: a person's two, or the client's own deadline passing with
/// no answer from its person (which ends it as a timeout, never as an approval).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalAnswer {
    Approve,
    Reject,
    TimedOut,
}

impl ApprovalAnswer {
    /// The outcome this answer gives when it wins.
    pub fn outcome(self) -> ApprovalOutcome {
        match self {
            Self::Approve => ApprovalOutcome::Approved,
            Self::Reject => ApprovalOutcome::Rejected,
            Self::TimedOut => ApprovalOutcome::Timeout,
        }
    }

    /// Reads a raw answer a channel sent, ignoring case and surrounding blanks: the outcome's
    /// word (`approved`, `rejected`); anything else is no answer.
    pub fn parse(raw: &str) -> Option<Self> {
        let word = raw.trim().to_ascii_lowercase();
        [Self::Approve, Self::Reject]
            .into_iter()
            .find(|answer| answer.outcome().as_str() == word)
    }
}

/// Serde through the words above, so the stored vocabulary has exactly one spelling.
macro_rules! serde_as_word {
    ($($ty:ty),*) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let word = String::deserialize(deserializer)?;
                Self::parse(&word).ok_or_else(|| {
                    D::Error::custom(format!(
                        "unknown {} {word:?}",
                        stringify!($ty)
                    ))
                })
            }
        }
    )*};
}

serde_as_word!(ApprovalOutcome, ApprovalState, CallApproval);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_approved_approves() {
        let approving: Vec<_> = ApprovalOutcome::ALL
            .into_iter()
            .filter(|o| o.is_approved())
            .collect();
        assert_eq!(approving, vec![ApprovalOutcome::Approved]);
        let decided: Vec<_> = ApprovalOutcome::ALL
            .into_iter()
            .filter(|o| o.is_decision())
            .map(ApprovalOutcome::as_str)
            .collect();
        assert_eq!(decided, vec!["approved", "rejected", "channel_closed"]);
    }

    /// The words older versions wrote in `approval` and `tool_call` events read as they meant.
    #[test]
    fn stored_words_of_older_versions_read_the_same() {
        use ApprovalOutcome as O;
        let states = [
            ("pending", ApprovalState::Pending),
            ("approved", ApprovalState::Ended(O::Approved)),
            ("rejected", ApprovalState::Ended(O::Rejected)),
            ("timeout", ApprovalState::Ended(O::Timeout)),
            ("error", ApprovalState::Ended(O::Error)),
            ("invalid", ApprovalState::Ended(O::Invalid)),
            ("cancelled", ApprovalState::Ended(O::Cancelled)),
            (
                "expired_by_restart",
                ApprovalState::Ended(O::ExpiredByRestart),
            ),
        ];
        for (word, state) in states {
            assert_eq!(
                serde_json::from_value::<ApprovalState>(json!(word)).unwrap(),
                state
            );
            assert_eq!(serde_json::to_value(state).unwrap(), json!(word));
        }
        let calls = [
            ("not_required", CallApproval::NotRequired),
            ("approved", CallApproval::Asked(O::Approved)),
            ("rejected", CallApproval::Asked(O::Rejected)),
            ("timeout", CallApproval::Asked(O::Timeout)),
            ("error", CallApproval::Asked(O::Error)),
            ("invalid", CallApproval::Asked(O::Invalid)),
            ("cancelled", CallApproval::Asked(O::Cancelled)),
            ("exempt", CallApproval::Exempt),
        ];
        for (word, approval) in calls {
            assert_eq!(
                serde_json::from_value::<CallApproval>(json!(word)).unwrap(),
                approval
            );
            assert_eq!(serde_json::to_value(approval).unwrap(), json!(word));
        }
        assert!(serde_json::from_value::<ApprovalState>(json!("Approved")).is_err());
        assert!(serde_json::from_value::<CallApproval>(json!("pending")).is_err());
    }

    #[test]
    fn every_word_is_spelled_once_and_reads_back() {
        for outcome in ApprovalOutcome::ALL {
            assert_eq!(ApprovalOutcome::parse(outcome.as_str()), Some(outcome));
            assert_eq!(
                serde_json::to_value(outcome).unwrap(),
                json!(outcome.as_str())
            );
            assert_eq!(ApprovalState::from(outcome).as_str(), outcome.as_str());
            assert_eq!(CallApproval::Asked(outcome).as_str(), outcome.as_str());
        }
    }

    #[test]
    fn raw_answers_parse_strictly() {
        assert_eq!(
            ApprovalOutcome::from_answer("APPROVED"),
            ApprovalOutcome::Approved
        );
        assert_eq!(
            ApprovalOutcome::from_answer(" rejected "),
            ApprovalOutcome::Rejected
        );
        assert_eq!(
            ApprovalOutcome::from_answer("yes"),
            ApprovalOutcome::Invalid
        );
        assert_eq!(ApprovalOutcome::from_answer(""), ApprovalOutcome::Invalid);
        assert_eq!(ApprovalAnswer::parse("timeout"), None);
    }

    #[test]
    fn the_gate_records_a_closed_channel_as_a_rejection() {
        let recorded: Vec<_> = ApprovalOutcome::ALL
            .into_iter()
            .map(|o| o.as_recorded_by_gate().as_str())
            .collect();
        assert_eq!(
            recorded,
            vec![
                "approved",
                "rejected",
                "timeout",
                "error",
                "invalid",
                "cancelled",
                "rejected",
                "cancelled"
            ]
        );
    }
}
