//! The end notice of a turn whose model call failed: `notice.model_error` ("The model call failed:
//! {error}") with a cleaned reason.
//!
//! Invariants: the reason is one line of at most [`MAX_REASON_CHARS`] characters without control
//! characters, and anything that looks like a credential (an `sk-…` key, an AWS access key id, the
//! word after `Bearer`, a `key=`/`token=`/`signature=`/`secret=` value, a long opaque token) is
//! replaced by `[redacted]`, so the notice can be shown to a client and stored in the history.
//! A file path (a word starting with `/` or `~/`) is kept whole, however long, unless one of its
//! components looks opaque itself ([`opaque_component`]): a notice that names a broken file names
//! it, and a base64 secret that happens to start with `/` is still redacted.

use tau_api::i18n::t;
use tau_api::lang::Lang;

use crate::model::ModelError;

/// The longest reason kept in a notice (characters); longer ones end with `…`.
pub const MAX_REASON_CHARS: usize = 200;

const REDACTED: &str = "[redacted]";

/// The turn's end notice for a failed model call.
pub(crate) fn model_error_notice(error: &ModelError) -> String {
    let reason = clean_reason(&error.to_string());
    t("notice.model_error", Lang::En, &[("error", &reason)])
        .unwrap_or_else(|_| format!("The model call failed: {reason}"))
}

/// The first non-empty line of `text`, without control characters or secret-looking words, cut
/// to [`MAX_REASON_CHARS`].
pub(crate) fn clean_reason(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("");
    let line: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut words: Vec<String> = Vec::new();
    let mut after_bearer = false;
    for word in line.split_whitespace() {
        if after_bearer || looks_secret(word) {
            words.push(REDACTED.to_owned());
        } else {
            words.push(word.to_owned());
        }
        after_bearer = word.eq_ignore_ascii_case("bearer");
    }
    let joined = words.join(" ");
    if joined.is_empty() {
        return "unknown error".to_owned();
    }
    if joined.chars().count() > MAX_REASON_CHARS {
        let cut: String = joined.chars().take(MAX_REASON_CHARS - 1).collect();
        return format!("{}…", cut.trim_end());
    }
    joined
}

fn looks_secret(word: &str) -> bool {
    let bare = word.trim_matches(|c: char| "\"'`,;:()[]{}<>".contains(c));
    let lower = bare.to_ascii_lowercase();
    if [
        "key=",
        "token=",
        "signature=",
        "secret=",
        "password=",
        "credential=",
    ]
    .iter()
    .any(|marker| lower.contains(marker))
    {
        return true;
    }
    if lower.starts_with("sk-") && bare.len() > 8 {
        return true;
    }
    let aws_key_id = (bare.starts_with("AKIA") || bare.starts_with("ASIA"))
        && bare.len() >= 16
        && bare
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    if aws_key_id {
        return true;
    }
    if let Some(path) = bare.strip_prefix('/').or_else(|| bare.strip_prefix("~/")) {
        return path.split('/').any(opaque_component);
    }
    // A long opaque run of token characters with letters and digits (a key, a signature).
    bare.len() >= 32
        && bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+/=_-.".contains(c))
        && bare.chars().any(|c| c.is_ascii_digit())
        && bare.chars().any(|c| c.is_ascii_alphabetic())
}

/// Whether one component of a path looks like a piece of a secret rather than a name: 12 or more
/// characters (after a leading `.`) with a digit, or with upper and lower case letters past its
/// first character. A random base64 run of that length almost always has both; names like
/// `spend.json`, `.local` or `pi2` have neither, and a secret cut by `/` into pieces under 12
/// characters would need several slashes in a row of 40 characters.
fn opaque_component(component: &str) -> bool {
    let name = component.strip_prefix('.').unwrap_or(component);
    if name.chars().count() < 12 {
        return false;
    }
    let rest = name.chars().skip(1);
    name.chars().any(|c| c.is_ascii_digit())
        || (rest.clone().any(|c| c.is_ascii_uppercase())
            && rest.clone().any(|c| c.is_ascii_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_names_the_error() {
        let notice = model_error_notice(&ModelError::Request("401 invalid x-api-key".into()));
        assert_eq!(
            notice,
            "The model call failed: the model request failed: 401 invalid x-api-key"
        );
    }

    #[test]
    fn secrets_are_redacted() {
        let text = "bad key sk-ant-api03-abcdefghijkl, header Authorization: Bearer abc.def \
                    id AKIAIOSFODNN7EXAMPLE url https://x/?X-Amz-Signature=0a1b2c \
                    blob 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let cleaned = clean_reason(text);
        for secret in [
            "sk-ant",
            "abc.def",
            "AKIAIOSFODNN7EXAMPLE",
            "0a1b2c",
            "9f86d081884c7d659a2f",
        ] {
            assert!(!cleaned.contains(secret), "{secret} in {cleaned}");
        }
        assert!(
            cleaned.starts_with("bad key [redacted] header Authorization: Bearer [redacted] id"),
            "{cleaned}"
        );
    }

    #[test]
    fn a_file_path_is_kept_and_a_secret_starting_with_a_slash_is_not() {
        let text = "cannot read /home/pi2/.local/share/tau/spend.json or \
                    ~/.config/tau/routines/morning-lights.toml: bad";
        assert_eq!(
            clean_reason(text),
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        for secret in [
            "/wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAAYEBQYFBAYG",
            "/tmp/0123456789abcdef0123456789abcdef/spend.json",
        ] {
            let cleaned = clean_reason(&format!("at {secret} now"));
            assert_eq!(cleaned, "at [redacted] now", "{secret}");
        }
    }

    #[test]
    fn the_reason_is_one_short_line() {
        assert_eq!(clean_reason("\n  first\tline  \nsecond line"), "first line");
        assert_eq!(clean_reason("  \n "), "unknown error");
        let long = "word ".repeat(100);
        let cleaned = clean_reason(&long);
        assert_eq!(cleaned.chars().count(), MAX_REASON_CHARS);
        assert!(cleaned.ends_with('…'));
    }
}
