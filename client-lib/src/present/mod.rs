//! One presentation of a session's events: [`Presenter`] turns a live event (`SessionEvent`) and a
//! stored one (`StoredEvent`, read once into [`Stored`]) into the same typed, translated
//! [`Line`]s. `tau chat` prints them, `tau tui` puts them in its panes, and `/resume` and the TUI's
//! replay show stored events through the same calls, so one event reads one way everywhere.
//!
//! - `stored.rs`: a stored event read once ([`read_stored`]), and the facts a live event and its
//!   stored record share ([`ToolCallFacts`], [`ApprovalFacts`]).
//! - `notices.rs`: the translated texts (why a turn stopped, a refused or failed call, progress).
//! - `names.rs`: the lower-case names of statuses; `json.rs`: `tau ask --json`'s event objects.
//!
//! Invariants: the same event gives the same lines, live or replayed, whichever client shows it
//! (a client may leave out the approval lines of a question it asks itself, [`LineKind::Asked`]
//! and [`LineKind::Answered`], since its prompt and decision line say them); a stored record that
//! is not JSON, or lacks a field, shows `?` for what is missing rather than failing; a tier is the
//! number people read (`tau_api::tiers`); every text from the hub goes through
//! [`crate::sanitize`]; every chrome text comes from the message table in the UI language.

pub mod json;
mod names;
mod notices;
mod stored;

use tau_api::i18n::Messages;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, session_event::Kind};

pub use self::names::{resolution_name, tool_status_name};
pub use self::notices::{Limits, ToolLine, progress_text, stop_notice, tool_call_line};
pub use self::stored::{ApprovalFacts, Stored, ToolCallFacts, read_stored};
use crate::sanitize::{one_line, sanitize};

/// What a line says, so each client can place and colour it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// A tool started (`→ tool`).
    ToolRunning,
    /// A tool's latest progress (each replaces the one before).
    Progress,
    /// A finished call's facts (`✓ tool · tier 2 · success · approved · 7 ms`).
    ToolCall,
    /// A call that did not run (`✗ tool: not approved`).
    Refused,
    /// A call that ran and failed.
    Failed,
    /// A question was asked (`? tool (tier 2) [channel]`).
    Asked,
    /// A question ended (`= tool: approved`).
    Answered,
    /// A question an earlier hub left pending, expired when the hub restarted.
    Expired,
    /// The reply streamed so far no longer counts.
    Discarded,
    /// The provider throttled; the call is retried.
    Throttled,
    /// An error the agent reported.
    Error,
    /// A turn that stopped early (`■ …`).
    Stopped,
    /// A turn that began by repairing an unfinished history (`↺ …`).
    Repaired,
    /// A stored event of a kind this client does not know (its type name).
    Other,
}

/// One line of the presentation: what it is, its text (one line, sanitized), and whether it reads
/// as an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub kind: LineKind,
    pub text: String,
    pub error: bool,
}

impl Line {
    fn new(kind: LineKind, text: String) -> Self {
        let error = matches!(
            kind,
            LineKind::Refused | LineKind::Failed | LineKind::Expired | LineKind::Error
        );
        Self { kind, text, error }
    }
}

/// Turns events into lines in one UI language.
#[derive(Clone, Copy)]
pub struct Presenter<'m> {
    messages: &'m Messages,
    lang: Lang,
    limits: Limits,
}

impl<'m> Presenter<'m> {
    /// A presenter in `lang`, knowing no configured limits.
    pub fn new(messages: &'m Messages, lang: Lang) -> Self {
        Self {
            messages,
            lang,
            limits: Limits {
                max_turns: 0,
                max_total_tokens: None,
            },
        }
    }

    /// The same, naming `limits` where a stop's own record does not say them.
    pub fn with_limits(self, limits: Limits) -> Self {
        Self { limits, ..self }
    }

    fn t(&self, key: &str, args: &tau_api::i18n::Args<'_>) -> String {
        self.messages.t_or_key(key, self.lang, args)
    }

    /// The lines of a live event; none for text, reasoning and turn bookkeeping.
    pub fn live(&self, kind: &Kind) -> Vec<Line> {
        match kind {
            Kind::ToolUseStarted(started) => {
                let tool = one_line(&started.name, 80);
                vec![Line::new(
                    LineKind::ToolRunning,
                    self.t("tool.running", &[("tool", &tool)]),
                )]
            }
            Kind::ToolProgress(progress) => {
                let tool = one_line(&progress.tool, 40);
                let report = progress_text(progress);
                let text = self.t("tool.progress", &[("tool", &tool), ("progress", &report)]);
                vec![Line::new(LineKind::Progress, one_line(&text, 100))]
            }
            Kind::ToolCall(call) => self.tool_call(&ToolCallFacts::live(call)),
            Kind::ApprovalRequested(requested) => requested
                .approval
                .as_ref()
                .map(|approval| self.approval(&ApprovalFacts::requested(approval)))
                .unwrap_or_default(),
            Kind::ApprovalResolved(resolved) => self.approval(&ApprovalFacts::resolved(resolved)),
            Kind::OutputDiscarded(_) => vec![Line::new(
                LineKind::Discarded,
                self.t("chat.output_discarded", &[]),
            )],
            Kind::Throttled(throttled) => {
                let seconds = throttled.delay_ms.div_ceil(1000).max(1);
                vec![Line::new(
                    LineKind::Throttled,
                    self.t("notice.throttled", &[("seconds", &seconds)]),
                )]
            }
            Kind::Error(error) => self.error(Some(&error.message), Some(&error.tool)),
            Kind::TurnEnded(end) => self
                .stop(
                    &end.stop_reason,
                    &end.notice,
                    Some(u64::from(end.model_calls)),
                )
                .into_iter()
                .collect(),
            Kind::TextDelta(_)
            | Kind::ReasoningDelta(_)
            | Kind::TurnQueued(_)
            | Kind::TurnStarted(_)
            | Kind::RoleSwitched(_) => Vec::new(),
        }
    }

    /// The lines of a stored event: the same as its live event's.
    pub fn stored(&self, stored: &Stored) -> Vec<Line> {
        match stored {
            Stored::ToolCall(facts) => self.tool_call(facts),
            Stored::Approval(facts) => self.approval(facts),
            Stored::Error { message, tool } => self.error(message.as_deref(), tool.as_deref()),
            Stored::TurnStopped {
                stop_reason,
                notice,
                model_calls,
                ..
            } => self
                .stop(
                    stop_reason.as_deref().unwrap_or_default(),
                    notice.as_deref().unwrap_or_default(),
                    *model_calls,
                )
                .into_iter()
                .collect(),
            Stored::TurnRepaired { notice, .. } => {
                let notice = sanitize(notice.as_deref().unwrap_or_default());
                let text = self.t("history.repaired", &[("notice", &notice)]);
                vec![Line::new(LineKind::Repaired, one_line(&text, 300))]
            }
            Stored::Other(name) => vec![Line::new(LineKind::Other, one_line(name, 60))],
        }
    }

    /// A finished call: its facts, and why it did not run or what failed.
    fn tool_call(&self, facts: &ToolCallFacts) -> Vec<Line> {
        let mut lines = vec![Line {
            kind: LineKind::ToolCall,
            text: facts.line(),
            error: facts.status.as_deref() != Some("success"),
        }];
        match tool_call_line(self.messages, self.lang, facts) {
            Some(ToolLine::Refused(text)) => lines.push(Line::new(LineKind::Refused, text)),
            Some(ToolLine::Failed(text)) => lines.push(Line::new(LineKind::Failed, text)),
            None => {}
        }
        lines
    }

    /// A question asked (`pending`) or ended, and a restart's expiry said in words.
    fn approval(&self, facts: &ApprovalFacts) -> Vec<Line> {
        let tool = shown(facts.tool.as_deref());
        let tier = facts
            .tier
            .map_or_else(|| "?".to_owned(), |tier| tier.to_string());
        let status = facts.status.as_deref();
        if status == Some("pending") {
            let channel = facts
                .channel
                .as_deref()
                .map_or_else(|| "?".to_owned(), |c| one_line(c, 20));
            let text = format!("? {tool} (tier {tier}) [{channel}]");
            return vec![Line::new(LineKind::Asked, text)];
        }
        let mut lines = vec![Line::new(
            LineKind::Answered,
            format!("= {tool}: {}", shown(status)),
        )];
        if status == Some("expired_by_restart") {
            let text = self.t("approval.expired_by_restart", &[("tool", &tool)]);
            lines.push(Line::new(LineKind::Expired, text));
        }
        lines
    }

    /// An error the agent reported; none when it concerns a call (the call's line says it).
    fn error(&self, message: Option<&str>, tool: Option<&str>) -> Vec<Line> {
        if tool.is_some_and(|tool| !tool.is_empty()) {
            return Vec::new();
        }
        let message = message.map_or_else(|| "?".to_owned(), |m| one_line(m, 300));
        vec![Line::new(
            LineKind::Error,
            self.t("notice.error", &[("error", &message)]),
        )]
    }

    /// A turn's stop, in the UI language; none for a normal end. The limit a stopped turn hit is
    /// its own model call count (else the configured one); a token budget's notice names the
    /// budget the turn had, which today's configuration may not.
    fn stop(&self, reason: &str, notice: &str, model_calls: Option<u64>) -> Option<Line> {
        let text = if reason == "limit_total_tokens" && !notice.is_empty() {
            sanitize(notice)
        } else {
            let end = pb::TurnEnded {
                stop_reason: reason.to_owned(),
                notice: notice.to_owned(),
                ..Default::default()
            };
            let max_turns = model_calls
                .filter(|calls| *calls > 0)
                .and_then(|calls| u32::try_from(calls).ok())
                .unwrap_or(self.limits.max_turns);
            let limits = Limits {
                max_turns,
                ..self.limits
            };
            stop_notice(self.messages, self.lang, &end, limits)?
        };
        Some(Line {
            kind: LineKind::Stopped,
            text: one_line(&format!("■ {text}"), 400),
            error: reason == "error",
        })
    }
}

impl ToolCallFacts {
    /// Its line (`✓ tool · tier 2 · success · approved · 7 ms`).
    pub fn line(&self) -> String {
        let ok = self.status.as_deref() == Some("success");
        format!(
            "{} {} · tier {} · {} · {} · {} ms",
            if ok { "✓" } else { "✗" },
            shown(self.tool.as_deref()),
            self.tier.map_or_else(|| "?".to_owned(), |t| t.to_string()),
            shown(self.status.as_deref()),
            shown(self.approval.as_deref()),
            self.duration_ms
                .map_or_else(|| "?".to_owned(), |ms| ms.to_string()),
        )
    }
}

/// A text from the hub on one line, `?` when absent.
fn shown(text: Option<&str>) -> String {
    text.map_or_else(|| "?".to_owned(), |t| one_line(t, 60))
}

#[cfg(test)]
mod tests;
