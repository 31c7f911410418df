//! What `tau doctor` found: one [`Check`] per line (ok / warn / fail, a message and, when something
//! is wrong, the fix in one line, with a path in it as one shell word: [`shell_quote`]), and how
//! the report is printed for a person and for a script.
//!
//! Invariants: a message or a fix is one line (newlines are flattened when a check is built); no
//! check carries a secret's value (checks name variables only); the exit code is 1 exactly when a
//! check failed.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Worth knowing; tau still works.
    Warn,
    /// Something tau needs is wrong; `tau doctor` exits 1.
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked (`config`, `role brain`, `permissions`, …).
    pub check: String,
    /// The outcome.
    pub status: Status,
    /// What was found.
    pub message: String,
    /// What to do about it (for warn and fail).
    pub fix: Option<String>,
}

impl Check {
    /// A check with `status`.
    pub fn new(check: impl Into<String>, status: Status, message: impl Into<String>) -> Self {
        Self {
            check: check.into(),
            status,
            message: one_line(&message.into()),
            fix: None,
        }
    }

    /// A passing check.
    pub fn ok(check: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(check, Status::Ok, message)
    }

    /// A warning.
    pub fn warn(check: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(check, Status::Warn, message)
    }

    /// A failure.
    pub fn fail(check: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(check, Status::Fail, message)
    }

    /// With the fix a person should apply.
    #[must_use]
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(one_line(&fix.into()));
        self
    }
}

fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every check, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The checks.
    pub checks: Vec<Check>,
}

#[derive(Serialize)]
struct Counts {
    ok: usize,
    warn: usize,
    fail: usize,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    ok: bool,
    counts: Counts,
    next: Option<&'a str>,
    checks: &'a [Check],
}

impl Report {
    /// Adds a check.
    pub fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }

    /// Whether no check failed.
    pub fn passed(&self) -> bool {
        self.count(Status::Fail) == 0
    }

    /// The fix of the first failure, else of the first warning.
    pub fn next(&self) -> Option<&str> {
        [Status::Fail, Status::Warn].into_iter().find_map(|status| {
            self.checks
                .iter()
                .filter(|c| c.status == status)
                .find_map(|c| c.fix.as_deref())
        })
    }

    /// 0 when nothing failed, else 1.
    pub fn exit_code(&self) -> ExitCode {
        if self.passed() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }

    /// The report for a person: one line per check, a summary, and the next step when something is
    /// wrong.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for c in &self.checks {
            let _ = write!(out, "{:<5} {}: {}", c.status.as_str(), c.check, c.message);
            if let Some(fix) = &c.fix
                && c.status != Status::Ok
            {
                let _ = write!(out, "; fix: {fix}");
            }
            out.push('\n');
        }
        let plural = |n: usize, word: &str| {
            if n == 1 {
                format!("{n} {word}")
            } else {
                format!("{n} {word}s")
            }
        };
        let _ = writeln!(
            out,
            "{} ok, {}, {}",
            self.count(Status::Ok),
            plural(self.count(Status::Warn), "warning"),
            plural(self.count(Status::Fail), "failure")
        );
        if let Some(next) = self.next() {
            let _ = writeln!(out, "next: {next}");
        }
        out
    }

    /// The report for a script.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(&JsonReport {
            ok: self.passed(),
            counts: Counts {
                ok: self.count(Status::Ok),
                warn: self.count(Status::Warn),
                fail: self.count(Status::Fail),
            },
            next: self.next(),
            checks: &self.checks,
        })
    }
}

/// `path` as one shell word: as is when it only has safe characters, else single-quoted.
pub(super) fn shell_quote(path: &Path) -> String {
    let text = path.display().to_string();
    let safe = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c));
    if safe {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote(Path::new("/a/b.c")), "/a/b.c");
        assert_eq!(shell_quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }

    #[test]
    fn text_has_one_line_per_check_and_the_next_step() {
        let mut report = Report::default();
        report.push(Check::ok("config", "fine").fix("never shown for ok"));
        report.push(Check::warn("persona", "no user.md").fix("write it"));
        report.push(Check::fail("permissions", "a\nb").fix("chmod 600 x"));
        let text = report.to_text();
        assert_eq!(
            text,
            "ok    config: fine\n\
             warn  persona: no user.md; fix: write it\n\
             fail  permissions: a b; fix: chmod 600 x\n\
             1 ok, 1 warning, 1 failure\n\
             next: chmod 600 x\n"
        );
        assert!(!report.passed());
    }

    #[test]
    fn json_shape() {
        let mut report = Report::default();
        report.push(Check::ok("config", "fine"));
        report.push(Check::warn("hub", "odd").fix("look"));
        let json: serde_json::Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["counts"]["warn"], 1);
        assert_eq!(json["next"], "look");
        assert_eq!(json["checks"][0]["status"], "ok");
        assert!(json["checks"][0]["fix"].is_null());
        assert!(report.passed());
    }
}
