//! `<TAU_HOME>/.env`: a small dotenv parser. Its values fill an [`Env`] snapshot (never the process
//! environment).
//!
//! Syntax, one assignment per line: `KEY=VALUE`, optionally preceded by `export `; spaces around
//! `=` are allowed; blank lines and lines starting with `#` are skipped. Values:
//! - unquoted: the rest of the line, trailing spaces trimmed; ` #` (whitespace then `#`) starts a
//!   comment, a `#` inside a word does not (`URL=http://x/#top`);
//! - `'single quoted'`: taken literally;
//! - `"double quoted"`: `\n`, `\t`, `\r`, `\\`, `\"` and `\$` are escapes (any other backslash is
//!   kept as written).
//!
//! Quoted values may span lines; after the closing quote only a comment may follow. There is no
//! `${VAR}` expansion: values are literal. A name given twice takes its last value.
//!
//! Invariants: parsing never fails as a whole. A line that cannot be read is skipped and reported
//! as a [`DotenvProblem`] naming `file:line`, so a caller can show it; the lines around it still
//! count. `.env` never overrides a variable that is already set (even to `""`): [`Dotenv::pairs_to_set`]
//! returns only the unset ones. TAU_HOME is refused in `.env` (it decides where `.env` is).
//! Nothing here touches the process environment: callers fill an [`Env`] with
//! [`Env::fill_from`](crate::env::Env::fill_from).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::env::Env;

/// Variables `.env` may not set, with the reason given in the problem report.
const REFUSED: &[(&str, &str)] = &[(
    "TAU_HOME",
    "TAU_HOME cannot be set in .env (it decides which .env is read); set it in the environment; ignored",
)];

/// `.env` could not be read at all (a missing file is not an error: see [`load`]).
#[derive(Debug, thiserror::Error)]
pub enum DotenvError {
    /// The file exists but could not be read (permissions, not UTF-8, a directory …).
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The `.env` file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// A line of `.env` that was skipped, with why. `Display` is `file:line: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DotenvProblem {
    /// The `.env` file.
    pub path: PathBuf,
    /// 1-based line number (the first line of a multi-line value).
    pub line: usize,
    /// What is wrong, in one line.
    pub message: String,
}

impl fmt::Display for DotenvProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)
    }
}

/// A parsed `.env` file: its assignments in first-appearance order and the lines it skipped.
#[derive(Clone, PartialEq, Eq)]
pub struct Dotenv {
    /// The file it was read from (used in problem reports).
    pub path: PathBuf,
    /// `(name, value)` pairs, each name once (its last value).
    pub vars: Vec<(String, String)>,
    /// Skipped lines. Callers must show these (they are never fatal).
    pub problems: Vec<DotenvProblem>,
}

impl fmt::Debug for Dotenv {
    /// Names only: values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dotenv")
            .field("path", &self.path)
            .field(
                "names",
                &self
                    .vars
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("problems", &self.problems)
            .finish()
    }
}

impl Dotenv {
    /// Parses `.env` text; `path` only labels problem reports.
    pub fn parse(path: impl Into<PathBuf>, text: &str) -> Self {
        let path = path.into();
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let lines: Vec<&str> = text
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect();
        let mut out = Self {
            path,
            vars: Vec::new(),
            problems: Vec::new(),
        };
        let mut i = 0;
        while i < lines.len() {
            let line_no = i + 1;
            match parse_assignment(&lines, &mut i) {
                Ok(None) => {}
                Ok(Some((name, value))) => {
                    if let Some((_, why)) = REFUSED.iter().find(|(n, _)| *n == name) {
                        out.problem(line_no, (*why).to_string());
                    } else if value.contains('\0') {
                        out.problem(line_no, format!("the value of {name} contains a NUL byte"));
                    } else if let Some(slot) = out.vars.iter_mut().find(|(n, _)| *n == name) {
                        slot.1 = value;
                    } else {
                        out.vars.push((name, value));
                    }
                }
                Err(message) => out.problem(line_no, message),
            }
            i += 1;
        }
        out
    }

    fn problem(&mut self, line: usize, message: String) {
        self.problems.push(DotenvProblem {
            path: self.path.clone(),
            line,
            message,
        });
    }

    /// The pairs to set: those whose name is not set in `env` (a variable set to `""` counts as
    /// set and is never overridden).
    pub fn pairs_to_set(&self, env: &Env) -> Vec<(String, String)> {
        self.vars
            .iter()
            .filter(|(name, _)| !env.is_set(name))
            .cloned()
            .collect()
    }
}

/// Reads and parses `path`. A missing file is `Ok(None)`; an unreadable one is an error.
pub fn load(path: &Path) -> Result<Option<Dotenv>, DotenvError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(Dotenv::parse(path, &text))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(DotenvError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Parses the assignment starting at `lines[*i]`. A quoted value spanning lines advances `*i` to
/// its last line. `Ok(None)` for a blank or comment line.
fn parse_assignment(lines: &[&str], i: &mut usize) -> Result<Option<(String, String)>, String> {
    let line = lines[*i].trim_start();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let line = match line.strip_prefix("export") {
        Some(rest) if rest.starts_with([' ', '\t']) => rest.trim_start(),
        _ => line,
    };
    let Some((name, rest)) = line.split_once('=') else {
        return Err(format!(
            "expected NAME=VALUE, found {:?}",
            shorten(lines[*i].trim())
        ));
    };
    let name = name.trim_end_matches([' ', '\t']);
    let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "{:?} is not a variable name (letters, digits and _, not starting with a digit)",
            shorten(name)
        ));
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let value = match rest.chars().next() {
        Some(q @ ('"' | '\'')) => quoted(lines, i, &rest[1..], q, name)?,
        _ => unquoted(rest),
    };
    Ok(Some((name.to_string(), value)))
}

/// An unquoted value: up to a whitespace-preceded `#`, trailing whitespace trimmed.
fn unquoted(rest: &str) -> String {
    let mut end = rest.len();
    let mut prev_space = false;
    for (pos, c) in rest.char_indices() {
        if c == '#' && prev_space {
            end = pos;
            break;
        }
        prev_space = c == ' ' || c == '\t';
    }
    rest[..end].trim_end().to_string()
}

/// A quoted value starting just after the opening quote `q` in `first`; may continue on the
/// following lines.
fn quoted(
    lines: &[&str],
    i: &mut usize,
    first: &str,
    q: char,
    name: &str,
) -> Result<String, String> {
    let start = *i;
    let mut value = String::new();
    let mut current = first;
    loop {
        let mut chars = current.char_indices();
        while let Some((pos, c)) = chars.next() {
            if c == q {
                let tail = current[pos + 1..].trim();
                if tail.is_empty() || tail.starts_with('#') {
                    return Ok(value);
                }
                return Err(format!(
                    "unexpected text after the closing quote of {name}: {:?}",
                    shorten(tail)
                ));
            }
            if c == '\\' && q == '"' {
                match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, 't')) => value.push('\t'),
                    Some((_, 'r')) => value.push('\r'),
                    Some((_, e @ ('\\' | '"' | '$'))) => value.push(e),
                    Some((_, other)) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => value.push('\\'),
                }
                continue;
            }
            value.push(c);
        }
        if *i + 1 >= lines.len() {
            *i = start;
            let kind = if q == '"' { "double" } else { "single" };
            return Err(format!("the {kind}-quoted value of {name} is never closed"));
        }
        *i += 1;
        value.push('\n');
        current = lines[*i];
    }
}

/// At most 40 characters of `s`, for problem messages.
fn shorten(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Dotenv {
        Dotenv::parse("/h/.env", text)
    }

    fn vars(d: &Dotenv) -> Vec<(&str, &str)> {
        d.vars
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    fn problems(d: &Dotenv) -> Vec<String> {
        d.problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn plain_export_spaces_blank_and_comments() {
        let d = parse(
            "# a comment\n\n  A=1\nexport B=two words  \nC = 3\n\texport\tD=4\nE=\nexported=5\n",
        );
        assert_eq!(
            vars(&d),
            vec![
                ("A", "1"),
                ("B", "two words"),
                ("C", "3"),
                ("D", "4"),
                ("E", ""),
                ("exported", "5")
            ]
        );
        assert!(d.problems.is_empty(), "{:?}", d.problems);
    }

    #[test]
    fn inline_comments_need_whitespace_before_the_hash() {
        let d = parse("URL=http://x/#top\nK=v # note\nT=v\t# tab note\nH=#start\n");
        assert_eq!(
            vars(&d),
            vec![
                ("URL", "http://x/#top"),
                ("K", "v"),
                ("T", "v"),
                ("H", "#start")
            ]
        );
    }

    #[test]
    fn quotes_single_literal_double_escaped() {
        let d = parse(concat!(
            "S='a \\n # b'\n",
            "D=\"a\\n\\t\\\"q\\\" \\\\ \\$x \\z\"  # trailing comment\n",
            "E=\"\"\n",
            "Q='it''s'\n",
        ));
        assert_eq!(d.vars[0], ("S".into(), "a \\n # b".into()));
        assert_eq!(d.vars[1], ("D".into(), "a\n\t\"q\" \\ $x \\z".into()));
        assert_eq!(d.vars[2], ("E".into(), String::new()));
        assert_eq!(
            problems(&d),
            vec!["/h/.env:4: unexpected text after the closing quote of Q: \"'s'\""]
        );
    }

    #[test]
    fn multi_line_quoted_values_and_crlf() {
        let d = parse("KEY=\"line1\r\nline2\"\r\nNEXT=x\r\n");
        assert_eq!(vars(&d), vec![("KEY", "line1\nline2"), ("NEXT", "x")]);
    }

    #[test]
    fn bad_lines_are_reported_with_file_and_line_and_the_rest_still_counts() {
        let d = parse(concat!(
            "GOOD=1\n",
            "no equals sign here\n",
            "1BAD=x\n",
            "MY-KEY=x\n",
            "=empty\n",
            "TAU_HOME=/elsewhere\n",
            "OPEN=\"never closed\n",
            "AFTER=2\n",
        ));
        assert_eq!(vars(&d), vec![("GOOD", "1"), ("AFTER", "2")]);
        assert_eq!(
            problems(&d),
            vec![
                "/h/.env:2: expected NAME=VALUE, found \"no equals sign here\"",
                "/h/.env:3: \"1BAD\" is not a variable name (letters, digits and _, not starting with a digit)",
                "/h/.env:4: \"MY-KEY\" is not a variable name (letters, digits and _, not starting with a digit)",
                "/h/.env:5: \"\" is not a variable name (letters, digits and _, not starting with a digit)",
                "/h/.env:6: TAU_HOME cannot be set in .env (it decides which .env is read); set it in the environment; ignored",
                "/h/.env:7: the double-quoted value of OPEN is never closed",
            ]
        );
    }

    #[test]
    fn an_unclosed_quote_does_not_swallow_later_lines() {
        // The unclosed value is reported and the parser resumes on the next line.
        let d = parse("A='open\nB=2\n");
        assert_eq!(vars(&d), vec![("B", "2")]);
        assert_eq!(
            problems(&d),
            vec!["/h/.env:1: the single-quoted value of A is never closed"]
        );
    }

    #[test]
    fn last_value_wins_within_the_file() {
        let d = parse("A=1\nB=x\nA=2\n");
        assert_eq!(vars(&d), vec![("A", "2"), ("B", "x")]);
    }

    #[test]
    fn never_overrides_a_variable_that_is_set() {
        let d = parse("SET=from_file\nEMPTY=from_file\nNEW=from_file\n");
        let mut env: Env = [("SET", "from_env"), ("EMPTY", "")].into_iter().collect();
        let to_set = d.pairs_to_set(&env);
        assert_eq!(to_set, vec![("NEW".to_string(), "from_file".to_string())]);
        env.fill(&to_set);
        assert_eq!(env.get("SET"), Some("from_env"));
        assert_eq!(env.get("EMPTY"), Some(""));
        assert_eq!(env.get("NEW"), Some("from_file"));
    }

    #[test]
    fn nul_bytes_are_refused() {
        let d = parse("A=x\0y\n");
        assert!(d.vars.is_empty());
        assert_eq!(
            problems(&d),
            vec!["/h/.env:1: the value of A contains a NUL byte"]
        );
    }

    #[test]
    fn load_missing_is_none_and_present_is_parsed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        assert!(load(&path).unwrap().is_none());
        std::fs::write(&path, "A=1\n").unwrap();
        let d = load(&path).unwrap().unwrap();
        assert_eq!(vars(&d), vec![("A", "1")]);
        assert_eq!(d.path, path);
        // A directory is not readable as a file.
        let err = load(dir.path()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("{}: cannot read: ", dir.path().display()))
        );
    }

    #[test]
    fn debug_hides_values() {
        let d = parse("ANTHROPIC_API_KEY=sk-secret\n");
        let shown = format!("{d:?}");
        assert!(shown.contains("ANTHROPIC_API_KEY") && !shown.contains("sk-secret"));
    }
}
