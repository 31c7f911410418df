//! One persona file on disk, watched by its `(mtime, size)` stamp.
//!
//! Owns: reading a persona file, removing the HTML comments meant for humans, and keeping the last
//! good version. Invariants:
//! - the file is re-read only when its stamp (modification time to the nanosecond, size) changes;
//!   an I/O error is retried on the next call, since fixing permissions does not touch the mtime;
//! - once a good version was read, a later breakage (deleted, emptied, not UTF-8, unreadable) never
//!   replaces it: the last good text stays in use until the file is fixed;
//! - each problem is logged once when it appears (and once more only after the file was good again
//!   or the problem changed), never on every model call;
//! - an *optional* file (user.md) may legitimately be missing or empty: that is "absent", not a
//!   problem, and it drops the previous text (the user removed their facts on purpose).
//!
//! The cache lock is held only for a stat and, when the stamp changed, the read of one small file.
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

impl Stamp {
    fn of(metadata: &std::fs::Metadata) -> Self {
        Self {
            modified: metadata.modified().ok(),
            len: metadata.len(),
        }
    }
}

/// Why a file could not be used. Equality decides whether a problem is "the same" (logged once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Problem {
    Missing,
    /// Empty, or nothing left once the HTML comments are removed.
    Empty,
    NotUtf8,
    Unreadable(io::ErrorKind),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Missing => f.write_str("the file does not exist"),
            Problem::Empty => f.write_str("the file is empty"),
            Problem::NotUtf8 => f.write_str("the file is not valid UTF-8"),
            Problem::Unreadable(kind) => write!(f, "the file cannot be read ({kind})"),
        }
    }
}

/// The outcome of one look at the file.
enum Read {
    Text(Arc<str>),
    Broken(Problem, Option<io::Error>),
}

/// A first read of a required file failed.
#[derive(Debug)]
pub(crate) struct FirstReadError {
    pub(crate) problem: Problem,
    pub(crate) source: Option<io::Error>,
}

#[derive(Debug)]
struct State {
    /// Stamp of the version last read (successfully or not); `None` forces the next read.
    stamp: Option<Stamp>,
    /// The last good text; `None` = absent (optional file) or never read.
    good: Option<Arc<str>>,
    /// The problem currently reported, so it is logged once.
    problem: Option<Problem>,
}

/// A persona file with a stamp-keyed cache and a last-good fallback. Safe to share between threads.
#[derive(Debug)]
pub(crate) struct WatchedFile {
    path: PathBuf,
    /// Missing or empty means "absent" (no text) instead of a problem.
    optional: bool,
    state: Mutex<State>,
}

impl WatchedFile {
    /// Reads a required file (persona.md) for the first time; any problem is an error.
    pub(crate) fn required(path: PathBuf) -> Result<Self, FirstReadError> {
        let (stamp, read) = look(&path);
        match read {
            Read::Text(text) => Ok(Self {
                path,
                optional: false,
                state: Mutex::new(State {
                    stamp,
                    good: Some(text),
                    problem: None,
                }),
            }),
            Read::Broken(problem, source) => Err(FirstReadError { problem, source }),
        }
    }

    /// Reads an optional file (user.md) for the first time; a problem is logged and means absent.
    pub(crate) fn optional(path: PathBuf) -> Self {
        let file = Self {
            path,
            optional: true,
            state: Mutex::new(State {
                stamp: None,
                good: None,
                problem: None,
            }),
        };
        // The first call fills the cache (and logs a problem once, if there is one).
        let _ = file.current();
        file
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The text to use now: the current version when it is good, else the last good one.
    /// `None` when an optional file is absent (or was never readable).
    pub(crate) fn current(&self) -> Option<Arc<str>> {
        let mut state = self.lock();
        let stamp = match std::fs::metadata(&self.path) {
            Ok(metadata) => Stamp::of(&metadata),
            Err(err) => {
                state.stamp = None;
                let problem = io_problem(&err);
                return self.settle(&mut state, Read::Broken(problem, Some(err)));
            }
        };
        if state.stamp == Some(stamp) {
            return state.good.clone();
        }
        let (read_stamp, read) = look(&self.path);
        state.stamp = match &read {
            // An I/O error may go away without the stamp changing (chmod): try again next time.
            Read::Broken(Problem::Unreadable(_) | Problem::Missing, _) => None,
            _ => read_stamp,
        };
        self.settle(&mut state, read)
    }

    /// Records the outcome of a look, logs a new problem once, and returns the text to use.
    fn settle(&self, state: &mut State, read: Read) -> Option<Arc<str>> {
        match read {
            Read::Text(text) => {
                if let Some(problem) = state.problem.take() {
                    tracing::info!(
                        path = %self.path.display(),
                        "persona file is usable again (it was: {problem})"
                    );
                }
                state.good = Some(text);
            }
            Read::Broken(Problem::Missing | Problem::Empty, _) if self.optional => {
                state.problem = None;
                state.good = None;
            }
            Read::Broken(problem, source) => {
                if state.problem != Some(problem) {
                    state.problem = Some(problem);
                    let detail = source.map(|err| format!(": {err}")).unwrap_or_default();
                    let keeping = if state.good.is_some() {
                        "keeping the last good version"
                    } else {
                        "no earlier version to keep"
                    };
                    tracing::warn!(
                        path = %self.path.display(),
                        "persona file problem: {problem}{detail}; {keeping}"
                    );
                }
            }
        }
        state.good.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is a plain cache; a panic elsewhere cannot leave it inconsistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Stats and reads the file once: its stamp (taken from the opened file) and what it holds.
fn look(path: &Path) -> (Option<Stamp>, Read) {
    use std::io::Read as _;
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(err) => return (None, Read::Broken(io_problem(&err), Some(err))),
    };
    let stamp = match file.metadata() {
        Ok(metadata) => Stamp::of(&metadata),
        Err(err) => return (None, Read::Broken(io_problem(&err), Some(err))),
    };
    let mut bytes = Vec::with_capacity(usize::try_from(stamp.len).unwrap_or(0).min(1 << 20));
    if let Err(err) = file.read_to_end(&mut bytes) {
        return (None, Read::Broken(io_problem(&err), Some(err)));
    }
    let read = match String::from_utf8(bytes) {
        Err(_) => Read::Broken(Problem::NotUtf8, None),
        Ok(raw) => {
            let text = clean(&raw);
            if text.is_empty() {
                Read::Broken(Problem::Empty, None)
            } else {
                Read::Text(Arc::from(text))
            }
        }
    };
    (Some(stamp), read)
}

fn io_problem(err: &io::Error) -> Problem {
    match err.kind() {
        io::ErrorKind::NotFound => Problem::Missing,
        kind => Problem::Unreadable(kind),
    }
}

/// What the model reads of a persona file: HTML comments removed, a byte-order mark dropped,
/// trailing spaces trimmed, runs of blank lines (often left by removed comments) collapsed to one,
/// and no blank lines at either end.
pub(crate) fn clean(raw: &str) -> String {
    let raw = raw.strip_prefix('\u{feff}').unwrap_or(raw);
    let stripped = strip_html_comments(raw);
    let mut out = String::with_capacity(stripped.len());
    let mut pending_blank = false;
    for line in stripped.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            pending_blank = !out.is_empty();
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
            if pending_blank {
                out.push('\n');
            }
        }
        pending_blank = false;
        out.push_str(line);
    }
    out
}

/// Removes every `<!-- ... -->`, also across lines. An unclosed `<!--` runs to the end of the
/// text, as in HTML, so a note for humans never reaches the model half-open.
pub(crate) fn strip_html_comments(text: &str) -> String {
    const OPEN: &str = "<!--";
    const CLOSE: &str = "-->";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let inside = &rest[start + OPEN.len()..];
        rest = match inside.find(CLOSE) {
            Some(end) => &inside[end + CLOSE.len()..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_line_comments_are_removed() {
        assert_eq!(strip_html_comments("a <!-- note --> b <!--x-->c"), "a  b c");
    }

    #[test]
    fn multi_line_comments_are_removed() {
        let raw = "Keep this.\n<!--\n  A note\n  over lines\n-->\nAnd this.";
        assert_eq!(clean(raw), "Keep this.\n\nAnd this.");
    }

    #[test]
    fn an_unclosed_comment_runs_to_the_end() {
        assert_eq!(
            strip_html_comments("visible <!-- never closed\nsecret"),
            "visible "
        );
    }

    #[test]
    fn comment_markers_inside_a_comment_do_not_reopen_it() {
        assert_eq!(strip_html_comments("a<!-- <!-- inner -->b-->"), "ab-->");
    }

    #[test]
    fn clean_collapses_blank_runs_and_trims() {
        let raw = "\u{feff}\n\n# Title  \r\n\r\n<!-- c -->\n\n\nBody\n\n";
        assert_eq!(clean(raw), "# Title\n\nBody");
    }

    #[test]
    fn a_file_of_only_comments_is_empty() {
        assert_eq!(clean("<!-- only -->\n  \n<!--\nnotes\n-->\n"), "");
    }
}
