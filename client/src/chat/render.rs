//! What `tau chat` prints: streamed reply text, chrome lines, and the presenter's lines
//! ([`Printer::presented`]: an event's line is `tau_client::present`'s, the one `tau tui` shows;
//! stored messages: `history.rs`).
//!
//! Invariants:
//! - Text that came from a model, a tool or a hub message is printed through [`sanitize`]
//!   (`tau_client::sanitize`, re-exported here): no escape sequence, other control character
//!   (apart from newline and tab), bidirectional control or invisible character reaches the
//!   terminal unescaped.
//! - A chrome line never starts in the middle of streamed text: [`Printer`] ends the open line
//!   first.
//! - Every text of the chrome comes from the message table in the chat's current language.
//! - A failed write (stdout closed) is remembered, never a panic; the chat loop ends on it.

use std::io::{self, Write};

use tau_client::present::{Line, LineKind};
pub use tau_client::sanitize::{one_line, sanitize, sanitize_prose};

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

    /// One line of the presentation (`tau_client::present`), the chat's way: progress in place,
    /// a stop as a notice, an error red, the rest dim; the approval lines are left out, since the
    /// chat asks and answers its questions itself.
    pub fn presented(&mut self, line: &Line) {
        match line.kind {
            LineKind::Asked | LineKind::Answered => {}
            LineKind::Progress => self.progress(&line.text),
            LineKind::Stopped => self.notice(&line.text),
            LineKind::Discarded => {
                // The terminal cannot take back what it printed: say that it no longer counts,
                // and count the reply as not streamed yet (so a final text that never streams
                // again is still shown at the end).
                self.dim(&line.text);
                self.begin_reply();
            }
            _ if line.error => self.red(&line.text),
            _ => self.dim(&line.text),
        }
    }

    /// Writes terminal control bytes of tau's own (the screen clear of `/clear`).
    pub fn control(&mut self, bytes: &str) {
        self.clear_progress();
        self.end_stream();
        self.write(bytes);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer whose bytes the test reads back.
    #[derive(Clone, Default)]
    pub(crate) struct Shared(Arc<Mutex<Vec<u8>>>);

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
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
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
        let report = |message: &str, progress, total| tau_api::proto::v1::ToolProgress {
            message: message.into(),
            progress,
            total,
            ..Default::default()
        };
        assert_eq!(
            tau_client::present::progress_text(&report("copying", Some(2.0), Some(5.0))),
            "copying (2/5)"
        );
        assert_eq!(
            tau_client::present::progress_text(&report("", Some(0.5), None)),
            "0.5"
        );
        assert_eq!(
            tau_client::present::progress_text(&report("a\nb", None, None)),
            "a⏎b"
        );
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
}
