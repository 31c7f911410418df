//! How a running tool reports progress: the [`ProgressReporter`] a tool finds in its context, the
//! [`ToolProgress`] it reports, and the [`ProgressWatch`] its caller reads them from.
//!
//! Invariants: reporting never blocks and never fails (a tool nobody listens to reports into
//! nothing); only the latest report is kept (a `watch` slot, so a chatty tool costs one value of
//! memory, never a queue); a message is cut to [`MAX_PROGRESS_MESSAGE`] characters. How often
//! reports reach clients is the caller's (the agent's) rate limit.

use tokio::sync::watch;

/// Most characters of a progress message kept (longer ones are cut, with `…`).
pub const MAX_PROGRESS_MESSAGE: usize = 200;

/// One progress report of a running tool.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolProgress {
    /// What the tool is doing (may be empty when only numbers are known).
    pub message: String,
    /// Work done so far (in the tool's units; grows).
    pub progress: Option<f64>,
    /// Work in all, when known.
    pub total: Option<f64>,
}

impl ToolProgress {
    /// A report with a message only.
    pub fn message(text: impl Into<String>) -> Self {
        Self {
            message: text.into(),
            ..Self::default()
        }
    }
}

/// The handle a tool reports progress through; cheap to clone. A disabled reporter (the default)
/// drops every report.
#[derive(Debug, Clone, Default)]
pub struct ProgressReporter {
    slot: Option<watch::Sender<Option<ToolProgress>>>,
}

impl ProgressReporter {
    /// A reporter nobody reads.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// A reporter and the watch its caller reads the latest report from.
    pub fn channel() -> (Self, ProgressWatch) {
        let (sender, receiver) = watch::channel(None);
        (Self { slot: Some(sender) }, ProgressWatch { receiver })
    }

    /// Reports progress; replaces any report not yet read.
    pub fn report(&self, progress: ToolProgress) {
        let Some(slot) = &self.slot else {
            return;
        };
        let progress = ToolProgress {
            message: cut(&progress.message),
            progress: progress.progress.filter(|p| p.is_finite()),
            total: progress.total.filter(|t| t.is_finite()),
        };
        // No receiver only means nobody listens any more.
        slot.send_replace(Some(progress));
    }
}

/// The reading side of a [`ProgressReporter`].
#[derive(Debug)]
pub struct ProgressWatch {
    receiver: watch::Receiver<Option<ToolProgress>>,
}

impl ProgressWatch {
    /// The next report not yet read (the latest one when several came since the last read);
    /// `None` once every reporter is gone.
    pub async fn next(&mut self) -> Option<ToolProgress> {
        loop {
            self.receiver.changed().await.ok()?;
            if let Some(progress) = self.receiver.borrow_and_update().clone() {
                return Some(progress);
            }
        }
    }
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_PROGRESS_MESSAGE {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(MAX_PROGRESS_MESSAGE - 1).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_latest_report_wins_and_the_watch_ends_with_its_reporters() {
        let (reporter, mut watch) = ProgressReporter::channel();
        reporter.report(ToolProgress::message("one"));
        reporter.report(ToolProgress::message("two"));
        assert_eq!(watch.next().await, Some(ToolProgress::message("two")));
        reporter.report(ToolProgress {
            message: "x".repeat(500),
            progress: Some(f64::NAN),
            total: Some(10.0),
        });
        let long = watch.next().await.unwrap_or_default();
        assert_eq!(long.message.chars().count(), MAX_PROGRESS_MESSAGE);
        assert!(long.message.ends_with('…'));
        assert_eq!((long.progress, long.total), (None, Some(10.0)));
        drop(reporter);
        assert_eq!(watch.next().await, None);
    }

    #[test]
    fn a_disabled_reporter_drops_reports() {
        ProgressReporter::disabled().report(ToolProgress::message("nobody listens"));
    }
}
