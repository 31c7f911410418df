//! [`ConfigError`]: every way loading `tau.toml` or reading a tau environment variable can fail,
//! each displayed as ONE line naming the file (or the variable), the dotted key, the bad value and
//! what was expected.
//!
//! Invariant: no variant's `Display` contains a newline (values and messages are rendered or
//! flattened onto one line, long values are shortened).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Values longer than this (in characters) are shortened in messages.
const MAX_VALUE_CHARS: usize = 60;

/// A configuration problem. `Display` is the one line a person reads.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("{}: cannot read: {source}", file.display())]
    Read {
        /// The config file.
        file: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{}:{line}:{column}: invalid TOML: {message}", file.display())]
    Syntax {
        /// The config file.
        file: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column (in characters) of the error.
        column: usize,
        /// The parser's message, on one line.
        message: String,
    },
    /// A key has a value of the wrong type or out of range.
    #[error("{}: {key} = {value}: expected {expected}", file.display())]
    Invalid {
        /// The config file.
        file: PathBuf,
        /// Dotted key, e.g. `agent.context`.
        key: String,
        /// The bad value, rendered as TOML.
        value: String,
        /// What would have been accepted (and why, where it is not obvious).
        expected: String,
    },
    /// A required key is absent.
    #[error("{}: {key} is missing: expected {expected}", file.display())]
    Missing {
        /// The config file.
        file: PathBuf,
        /// Dotted key, e.g. `models.roles.brain.model_id`.
        key: String,
        /// What the key should hold.
        expected: String,
    },
    /// A key that its table does not have (typos matter).
    #[error("{}: {key} = {value}: unknown key (expected {expected})", file.display())]
    UnknownKey {
        /// The config file.
        file: PathBuf,
        /// Dotted key as written.
        key: String,
        /// Its value, rendered as TOML.
        value: String,
        /// The keys that table accepts.
        expected: String,
    },
    /// A role (or its fallback) names a provider that is neither built in nor registered.
    #[error("{}: {key} = {value}: Unknown model provider{planned} (expected {expected})", file.display())]
    UnknownProvider {
        /// The config file.
        file: PathBuf,
        /// Dotted key, e.g. `models.roles.brain.provider`.
        key: String,
        /// The provider name, rendered as TOML.
        value: String,
        /// `; "ollama" is planned and not available yet` for a planned provider, else empty.
        planned: String,
        /// The provider names that are available.
        expected: String,
    },
    /// A tau environment variable has a value tau does not accept.
    #[error("environment variable {name} = {value}{origin}: expected {expected}")]
    Env {
        /// The variable, e.g. `TAU_PROFILE`.
        name: String,
        /// Its value, quoted.
        value: String,
        /// ` (from /path/.env)` when `.env` set it, else empty.
        origin: String,
        /// What would have been accepted.
        expected: String,
    },
}

impl ConfigError {
    /// A syntax error at byte offset `at` of `text` (line and column are computed here).
    pub(crate) fn syntax(file: &Path, text: &str, at: Option<usize>, message: &str) -> Self {
        let at = at.unwrap_or(0).min(text.len());
        let before = text.get(..at).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |p| p + 1);
        let column = before[line_start..].chars().count() + 1;
        Self::Syntax {
            file: file.to_path_buf(),
            line,
            column,
            message: one_line(message),
        }
    }

    /// An environment variable error; the value is quoted and shortened, and the `.env` file
    /// that set it (`origin`) is named.
    pub(crate) fn env(
        name: &str,
        value: &str,
        origin: Option<&Path>,
        expected: impl Into<String>,
    ) -> Self {
        Self::Env {
            name: name.to_string(),
            value: quote(value),
            origin: origin
                .map(|file| format!(" (from {})", file.display()))
                .unwrap_or_default(),
            expected: expected.into(),
        }
    }
}

/// `s` with line breaks and tabs turned into spaces.
fn one_line(s: &str) -> String {
    s.split(['\n', '\r', '\t'])
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `s` as a TOML basic string (`"…"`, escaped), shortened to [`MAX_VALUE_CHARS`].
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for (n, c) in s.chars().enumerate() {
        if n == MAX_VALUE_CHARS {
            out.push('…');
            break;
        }
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML value rendered on one line, shortened to about [`MAX_VALUE_CHARS`].
pub(crate) fn render_value(value: &toml::Value) -> String {
    let full = render_full(value);
    if full.chars().count() <= MAX_VALUE_CHARS + 2 {
        return full;
    }
    let mut short: String = full.chars().take(MAX_VALUE_CHARS).collect();
    short.push('…');
    short
}

fn render_full(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => quote(s),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(render_full).collect();
            format!("[{}]", inner.join(", "))
        }
        toml::Value::Table(t) => {
            if t.is_empty() {
                return "{}".to_string();
            }
            let inner: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", key_segment(k), render_full(v)))
                .collect();
            format!("{{ {} }}", inner.join(", "))
        }
    }
}

/// A key as it is written in a dotted path: bare when it can be, else quoted.
pub(crate) fn key_segment(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { key.to_string() } else { quote(key) }
}

/// `"a", "b" or "c"` (each quoted): how a closed set of string values is named in a message.
pub(crate) fn one_of_quoted<S: AsRef<str>>(options: &[S]) -> String {
    let quoted: Vec<String> = options.iter().map(|o| quote(o.as_ref())).collect();
    join_or(&quoted)
}

/// `a, b or c`.
pub(crate) fn join_or(items: &[String]) -> String {
    match items {
        [] => "nothing".to_string(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_position_is_line_and_character_column() {
        let text = "a = 1\nbé = x\n";
        let at = text.find('x');
        let err = ConfigError::syntax(Path::new("/t.toml"), text, at, "bad\nvalue");
        assert_eq!(err.to_string(), "/t.toml:2:6: invalid TOML: bad value");
    }

    #[test]
    fn values_render_on_one_line_and_are_shortened() {
        let v: toml::Value = toml::Value::String("a\"b\nc".into());
        assert_eq!(render_value(&v), r#""a\"b\nc""#);
        let long = toml::Value::String("x".repeat(100));
        let shown = render_value(&long);
        assert!(shown.ends_with('…') && shown.chars().count() == MAX_VALUE_CHARS + 1);
        let t: toml::Table = toml::from_str("v = { a = [1, 2.5, true], \"b c\" = {} }").unwrap();
        assert_eq!(
            render_value(&t["v"]),
            r#"{ a = [1, 2.5, true], "b c" = {} }"#
        );
    }

    #[test]
    fn lists_read_naturally() {
        assert_eq!(one_of_quoted(&["a"]), r#""a""#);
        assert_eq!(one_of_quoted(&["a", "b", "c"]), r#""a", "b" or "c""#);
        assert_eq!(key_segment("brain"), "brain");
        assert_eq!(key_segment("my role"), r#""my role""#);
    }
}
