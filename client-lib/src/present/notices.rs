//! The translated notices the presenter builds lines from: why a turn stopped, what became of a
//! tool call that did not succeed, and a tool's progress.
//!
//! Invariants: every text of the chrome comes from the message table in the UI language; text from
//! the hub or a tool goes through [`crate::sanitize`]; a normal end has no notice.

use tau_api::i18n::Messages;
use tau_api::lang::Lang;
use tau_api::proto::v1 as pb;

use super::stored::ToolCallFacts;
use crate::sanitize::{one_line, sanitize};

/// The turn limits of the configuration, for the stop notices that name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `[agent] max_turns`.
    pub max_turns: u32,
    /// `[agent] max_total_tokens`.
    pub max_total_tokens: Option<u64>,
}

/// The one-line notice for a turn that did not end normally; `None` for a normal end.
pub fn stop_notice(
    messages: &Messages,
    lang: Lang,
    end: &pb::TurnEnded,
    limits: Limits,
) -> Option<String> {
    let error = || {
        if end.notice.is_empty() {
            one_line(&end.stop_reason, 60)
        } else {
            sanitize(&end.notice)
        }
    };
    let text = match end.stop_reason.as_str() {
        "" | "end_turn" | "tool_use" | "stop_sequence" => return None,
        "cancelled" => messages.t_or_key("notice.cancelled", lang, &[]),
        "max_tokens" => messages.t_or_key("notice.max_tokens", lang, &[]),
        "content_filtered" | "guardrail_intervened" => {
            messages.t_or_key("notice.content_filtered", lang, &[])
        }
        "limit_turns" => {
            messages.t_or_key("notice.max_turns", lang, &[("limit", &limits.max_turns)])
        }
        "limit_total_tokens" => match limits.max_total_tokens {
            Some(limit) => messages.t_or_key("notice.token_budget", lang, &[("limit", &limit)]),
            None => messages.t_or_key("notice.error", lang, &[("error", &error())]),
        },
        _ => messages.t_or_key("notice.error", lang, &[("error", &error())]),
    };
    Some(text)
}

/// How a finished tool call is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolLine {
    /// It did not run: not approved, not registered (red `✗`).
    Refused(String),
    /// It ran and failed (red `✗`).
    Failed(String),
}

/// The line for a finished tool call that did not succeed, or `None` when nothing more needs
/// saying (it succeeded: its facts say so; it was cancelled: the turn's notice says so).
pub fn tool_call_line(messages: &Messages, lang: Lang, call: &ToolCallFacts) -> Option<ToolLine> {
    let tool = sanitize(call.tool.as_deref().unwrap_or("?"));
    match call.status.as_deref()? {
        "refused" => {
            let key = if call.tier.is_none() {
                "tool.unknown"
            } else if call.approval.as_deref() == Some("timeout") {
                "approval.timed_out"
            } else {
                "approval.rejected"
            };
            Some(ToolLine::Refused(messages.t_or_key(
                key,
                lang,
                &[("tool", &tool)],
            )))
        }
        "error" => {
            let error = one_line(call.result_summary.as_deref().unwrap_or_default(), 200);
            Some(ToolLine::Failed(messages.t_or_key(
                "tool.failed",
                lang,
                &[("tool", &tool), ("error", &error)],
            )))
        }
        _ => None,
    }
}

/// A tool's progress report as one short line: its message and, when known, how far it got
/// (`3/10`, or the count alone), sanitized.
pub fn progress_text(progress: &pb::ToolProgress) -> String {
    let number = |n: f64| {
        if n.fract() == 0.0 && n.abs() < 1e15 {
            format!("{n:.0}")
        } else {
            format!("{n:.1}")
        }
    };
    let count = match (progress.progress, progress.total) {
        (Some(done), Some(total)) => Some(format!("{}/{}", number(done), number(total))),
        (Some(done), None) => Some(number(done)),
        _ => None,
    };
    let message = one_line(&progress.message, 120);
    match (message.is_empty(), count) {
        (false, Some(count)) => format!("{message} ({count})"),
        (false, None) => message,
        (true, Some(count)) => count,
        (true, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_turns: 12,
        max_total_tokens: Some(5000),
    };

    fn end(stop_reason: &str, notice: &str) -> pb::TurnEnded {
        pb::TurnEnded {
            stop_reason: stop_reason.into(),
            notice: notice.into(),
            ..Default::default()
        }
    }

    #[test]
    fn normal_ends_have_no_notice() {
        let messages = Messages::builtin();
        for reason in ["end_turn", "tool_use", "stop_sequence", ""] {
            assert_eq!(
                stop_notice(&messages, Lang::En, &end(reason, ""), LIMITS),
                None
            );
        }
    }

    #[test]
    fn other_ends_get_a_notice_in_the_ui_language() {
        let messages = Messages::builtin();
        let notice = |reason: &str, text: &str, lang| {
            stop_notice(&messages, lang, &end(reason, text), LIMITS).unwrap()
        };
        assert_eq!(notice("cancelled", "", Lang::En), "Cancelled.");
        assert_eq!(notice("cancelled", "", Lang::Tr), "İptal edildi.");
        assert!(notice("limit_turns", "", Lang::En).contains("12 model calls"));
        assert!(notice("limit_total_tokens", "", Lang::En).contains("5000 tokens"));
        assert!(notice("max_tokens", "", Lang::En).contains("output limit"));
        assert!(notice("content_filtered", "", Lang::En).contains("content filter"));
        assert_eq!(
            notice("error", "model call failed: boom", Lang::En),
            "Error: model call failed: boom"
        );
        assert_eq!(notice("error", "", Lang::En), "Error: error");
    }

    fn call(status: pb::ToolCallStatus, tier: pb::Tier, approval: &str) -> pb::ToolCallFinished {
        pb::ToolCallFinished {
            tool: "demo_physical_action".into(),
            tier: tier as i32,
            status: status as i32,
            approval: approval.into(),
            result_summary: "bad\nthing".into(),
            ..Default::default()
        }
    }

    #[test]
    fn refusals_and_failures_get_a_cross() {
        let messages = Messages::builtin();
        let line = |c: &pb::ToolCallFinished, lang| {
            tool_call_line(&messages, lang, &ToolCallFacts::live(c))
        };
        let refused = call(pb::ToolCallStatus::Refused, pb::Tier::Physical, "rejected");
        assert_eq!(
            line(&refused, Lang::En),
            Some(ToolLine::Refused(
                "✗ demo_physical_action: not approved".into()
            ))
        );
        assert_eq!(
            line(&refused, Lang::Tr),
            Some(ToolLine::Refused(
                "✗ demo_physical_action: onaylanmadı".into()
            ))
        );
        let closed = call(pb::ToolCallStatus::Refused, pb::Tier::Physical, "cancelled");
        assert!(
            matches!(line(&closed, Lang::En), Some(ToolLine::Refused(t)) if t.contains("not approved"))
        );
        let timed_out = call(pb::ToolCallStatus::Refused, pb::Tier::Physical, "timeout");
        assert!(
            matches!(line(&timed_out, Lang::En), Some(ToolLine::Refused(t)) if t.contains("no answer in time"))
        );
        let unknown = call(pb::ToolCallStatus::Refused, pb::Tier::Unspecified, "");
        assert!(
            matches!(line(&unknown, Lang::En), Some(ToolLine::Refused(t)) if t.contains("not a registered tool"))
        );
        let failed = call(pb::ToolCallStatus::Error, pb::Tier::Read, "not_required");
        assert_eq!(
            line(&failed, Lang::En),
            Some(ToolLine::Failed(
                "✗ demo_physical_action: failed: bad⏎thing".into()
            ))
        );
        let ok = call(pb::ToolCallStatus::Success, pb::Tier::Physical, "approved");
        assert_eq!(line(&ok, Lang::En), None);
    }
}
