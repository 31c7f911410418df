//! What `tau chat` prints: streamed reply text, chrome lines, and the pure mappings from the hub's
//! events (tool calls, stop reasons) to the lines a person reads (stored messages: `history.rs`).
//!
//! Invariants:
//! - Text that came from a model, a tool or a hub message is printed through [`sanitize`]: no
//!   escape sequence, other control character (apart from newline and tab), bidirectional
//!   control or invisible character reaches the terminal unescaped.
//! - A chrome line never starts in the middle of streamed text: [`Printer`] ends the open line
//!   first.
//! - Every text of the chrome comes from the message table in the chat's current language.
//! - A failed write (stdout closed) is remembered, never a panic; the chat loop ends on it.

use std::io::{self, Write};

use tau_api::display::{is_hiding_char, is_hiding_char_in_prose};
use tau_api::i18n::Messages;
use tau_api::lang::Lang;
use tau_api::proto::v1 as pb;

use super::style::Style;

/// Writes the chat to stdout (or to any writer in tests), tracking whether streamed text left a
/// line open.
pub struct Printer {
    out: Box<dyn Write + Send>,
    style: Style,
    /// Streamed text was written and its line is not ended yet.
    open_line: bool,
    /// Reply text was streamed since the last [`Printer::begin_reply`].
    streamed: bool,
    /// The last character of the reply streamed so far (an emoji's selector may come next).
    last_reply_char: Option<char>,
    /// A write failed; nothing more is written.
    broken: bool,
    /// The width of the progress line on screen (not ended by a newline), 0 when none.
    progress_width: usize,
}

impl Printer {
    /// A printer on this process's stdout.
    pub fn stdout(style: Style) -> Self {
        Self::new(Box::new(io::stdout()), style)
    }

    /// A printer on `out`.
    pub fn new(out: Box<dyn Write + Send>, style: Style) -> Self {
        Self {
            out,
            style,
            open_line: false,
            streamed: false,
            last_reply_char: None,
            broken: false,
            progress_width: 0,
        }
    }

    /// The decoration in use.
    pub fn style(&self) -> Style {
        self.style
    }

    /// Whether a write failed (stdout is gone).
    pub fn broken(&self) -> bool {
        self.broken
    }

    fn write(&mut self, text: &str) {
        if self.broken {
            return;
        }
        if self.out.write_all(text.as_bytes()).is_err() || self.out.flush().is_err() {
            self.broken = true;
        }
    }

    /// Ends a line left open by streamed text.
    pub fn end_stream(&mut self) {
        if self.open_line {
            self.open_line = false;
            self.write("\n");
        }
    }

    /// Shows `text` (already sanitized) dim on the one progress line, in place of the previous
    /// progress; whatever is printed next replaces the line.
    pub fn progress(&mut self, text: &str) {
        self.clear_progress();
        self.end_stream();
        let shown = self.style.dim(text);
        self.write(&shown);
        self.progress_width = text.chars().count().max(1);
    }

    /// Clears the progress line, if one is shown (the cursor returns to its start).
    pub fn clear_progress(&mut self) {
        if self.progress_width == 0 {
            return;
        }
        let clear = if self.style.is_on() {
            "\r\x1b[2K".to_owned()
        } else {
            // No escape sequences without colour: overwrite with blanks.
            format!("\r{}\r", " ".repeat(self.progress_width))
        };
        self.progress_width = 0;
        self.write(&clear);
    }

    /// One line of chrome (already decorated), after ending any open streamed line.
    pub fn line(&mut self, text: &str) {
        self.clear_progress();
        self.end_stream();
        self.write(text);
        self.write("\n");
    }

    /// One dim line.
    pub fn dim(&mut self, text: &str) {
        let text = self.style.dim(text);
        self.line(&text);
    }

    /// One red line (a refusal, a failure).
    pub fn red(&mut self, text: &str) {
        let text = self.style.red(text);
        self.line(&text);
    }

    /// One yellow line (a stop notice).
    pub fn notice(&mut self, text: &str) {
        let text = self.style.yellow(text);
        self.line(&text);
    }

    /// Streamed reply text from the model, sanitized.
    pub fn text(&mut self, delta: &str) {
        if delta.is_empty() {
            return;
        }
        self.clear_progress();
        let clean = sanitize_prose(self.last_reply_char, delta);
        self.last_reply_char = delta.chars().last().or(self.last_reply_char);
        self.write(&clean);
        self.open_line = !clean.ends_with('\n');
        self.streamed = true;
    }

    /// Starts a reply: nothing of it was streamed yet.
    pub fn begin_reply(&mut self) {
        self.streamed = false;
        self.last_reply_char = None;
    }

    /// Whether reply text was streamed since [`Printer::begin_reply`].
    pub fn streamed(&self) -> bool {
        self.streamed
    }

    /// A question the person answers on the same line (no newline after it).
    pub fn prompt(&mut self, text: &str) {
        self.clear_progress();
        self.end_stream();
        self.write(text);
        self.open_line = true;
    }

    /// The person answered the prompt: with a line (its Enter ended the line on screen) or not
    /// (Ctrl-D, Ctrl-C: the line is still open).
    pub fn answered(&mut self, with_a_line: bool) {
        if with_a_line {
            self.open_line = false;
        }
    }

    /// Writes terminal control bytes of tau's own (the screen clear of `/clear`).
    pub fn control(&mut self, bytes: &str) {
        self.clear_progress();
        self.end_stream();
        self.write(bytes);
    }
}

/// A model's reply text made safe to print like [`sanitize`], except that emoji sequences (an
/// emoji with its presentation selector or joiner, `tau_api::display::is_hiding_char_in_prose`)
/// read as themselves; `previous` is the character printed just before `text`.
pub fn sanitize_prose(previous: Option<char>, text: &str) -> String {
    escape_where(previous, text, is_hiding_char_in_prose)
}

/// Untrusted text made safe to print: newline and tab pass, every other control character (C0,
/// DEL, C1; so every escape sequence) and every other character that could hide or reorder text
/// (format and private-use characters, unassigned code points, line/paragraph separators, default
/// ignorables such as variation selectors, tags and fillers: `tau_api::display`, the gate's set)
/// is written visibly as `\u{..}`.
pub fn sanitize(text: &str) -> String {
    escape_where(None, text, |_, c| is_hiding_char(c))
}

/// `text` with every character `hides(previous, c)` names, but newline and tab, written `\u{..}`.
fn escape_where(
    mut previous: Option<char>,
    text: &str,
    hides: impl Fn(Option<char>, char) -> bool,
) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\n' || c == '\t' || !hides(previous, c) {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
        previous = Some(c);
    }
    out
}

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

/// The line for a finished tool call, or `None` when nothing needs saying (it succeeded: its
/// start was shown; it was cancelled: the turn's notice says so).
pub fn tool_call_line(
    messages: &Messages,
    lang: Lang,
    call: &pb::ToolCallFinished,
) -> Option<ToolLine> {
    let tool = sanitize(&call.tool);
    let status = pb::ToolCallStatus::try_from(call.status).ok()?;
    match status {
        pb::ToolCallStatus::Refused => {
            let key = if call.tier == pb::Tier::Unspecified as i32 {
                "tool.unknown"
            } else if call.approval == "timeout" {
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
        pb::ToolCallStatus::Error => Some(ToolLine::Failed(messages.t_or_key(
            "tool.failed",
            lang,
            &[
                ("tool", &tool),
                ("error", &one_line(&call.result_summary, 200)),
            ],
        ))),
        pb::ToolCallStatus::Success
        | pb::ToolCallStatus::Cancelled
        | pb::ToolCallStatus::Unspecified => None,
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

/// `text` sanitized, on one line (newlines as `⏎`), cut to `max` characters with `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = sanitize(text.trim())
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer whose bytes the test reads back.
    #[derive(Clone, Default)]
    pub(in crate::chat) struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        pub(in crate::chat) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

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
    fn the_progress_line_is_replaced_in_place_and_cleared_before_other_output() {
        let out = Shared::default();
        let mut printer = Printer::new(Box::new(out.clone()), Style::new(true));
        printer.progress("one");
        printer.progress("two");
        printer.text("reply");
        printer.clear_progress();
        assert_eq!(
            out.text(),
            "\x1b[2mone\x1b[0m\r\x1b[2K\x1b[2mtwo\x1b[0m\r\x1b[2Kreply"
        );
        let report = |message: &str, progress, total| pb::ToolProgress {
            message: message.into(),
            progress,
            total,
            ..Default::default()
        };
        assert_eq!(
            progress_text(&report("copying", Some(2.0), Some(5.0))),
            "copying (2/5)"
        );
        assert_eq!(progress_text(&report("", Some(0.5), None)), "0.5");
        assert_eq!(progress_text(&report("a\nb", None, None)), "a⏎b");
    }

    #[test]
    fn sanitize_escapes_escape_sequences_and_keeps_text() {
        assert_eq!(sanitize("a\tb\nc"), "a\tb\nc");
        assert_eq!(sanitize("x\x1b[2Jy"), "x\\u{1b}[2Jy");
        assert_eq!(sanitize("\r\u{85}\u{7f}"), "\\u{d}\\u{85}\\u{7f}");
        assert_eq!(sanitize("Merhaba, ışık"), "Merhaba, ışık");
    }

    #[test]
    fn sanitize_escapes_the_invisible_characters_of_the_report() {
        assert_eq!(
            sanitize("soft\u{ad}hy\u{115f}\u{1160}\u{180e}\u{2061}\u{2064}\u{206a}\u{206f}"),
            "soft\\u{ad}hy\\u{115f}\\u{1160}\\u{180e}\\u{2061}\\u{2064}\\u{206a}\\u{206f}"
        );
        assert_eq!(
            sanitize("vs\u{fe00}\u{fe0f}\u{fff9}\u{fffb}tag\u{e0000}\u{e0041}\u{e007f}"),
            "vs\\u{fe00}\\u{fe0f}\\u{fff9}\\u{fffb}tag\\u{e0000}\\u{e0041}\\u{e007f}"
        );
        let ordinary = "café ışık İ 漢字 😀 💡\ttab\nline";
        assert_eq!(sanitize(ordinary), ordinary);
    }

    #[test]
    fn a_reply_keeps_its_emoji_sequences_across_deltas_and_chrome_does_not() {
        assert_eq!(sanitize_prose(Some('❤'), "\u{fe0f} ok"), "\u{fe0f} ok");
        assert_eq!(sanitize_prose(None, "👩\u{200d}💻"), "👩\u{200d}💻");
        assert_eq!(sanitize_prose(Some('a'), "\u{fe0f}"), "\\u{fe0f}");
        assert_eq!(sanitize_prose(None, "x\u{e0041}"), "x\\u{e0041}");
        assert_eq!(sanitize("❤\u{fe0f}"), "❤\\u{fe0f}");
    }

    #[test]
    fn sanitize_escapes_bidirectional_and_invisible_characters() {
        assert_eq!(
            sanitize("rm \u{202e}txt.exe\u{2066}"),
            "rm \\u{202e}txt.exe\\u{2066}"
        );
        assert_eq!(
            sanitize("a\u{200b}b\u{feff}c\u{2028}d\u{61c}"),
            "a\\u{200b}b\\u{feff}c\\u{2028}d\\u{61c}"
        );
        assert_eq!(one_line("lamp\u{202e}", 20), "lamp\\u{202e}");
    }

    #[test]
    fn chrome_never_starts_inside_streamed_text() {
        let out = Shared::default();
        let mut printer = Printer::new(Box::new(out.clone()), Style::new(false));
        printer.text("Hello, ");
        printer.text("world");
        printer.dim("Throttled");
        printer.text("again\n");
        printer.line("done");
        assert_eq!(out.text(), "Hello, world\nThrottled\nagain\ndone\n");
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
        let line = |c: &pb::ToolCallFinished, lang| tool_call_line(&messages, lang, c);
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

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line(" a\nb ", 10), "a⏎b");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("abcd", 4), "abcd");
    }
}
