//! Session and agent ids: generation (`20260929-153012-3f9a`, UTC time plus four random hex digits)
//! and validation.
//!
//! Invariant: every store operation validates its ids with [`validate_id`] before it touches the disk
//! or the database. A valid id is a plain name: 1 to [`MAX_ID_LEN`] ASCII letters, digits, `-`, `_`
//! or `.`, not starting with `.` (so `.`, `..` and hidden names are out, and temporary files, which
//! start with `.`, never look like sessions). Separators, control characters, spaces and non-ASCII
//! text are refused.

use jiff::Timestamp;

use crate::store::store_error::{IdKind, SessionError};

/// The longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// Checks that `id` is a plain name; see the module documentation for the rule.
pub fn validate_id(kind: IdKind, id: &str) -> Result<(), SessionError> {
    let refuse = |reason: &'static str| SessionError::InvalidId {
        kind,
        id: id.chars().take(80).collect(),
        reason,
    };
    if id.is_empty() {
        return Err(refuse("it is empty"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(refuse("it is longer than 128 bytes"));
    }
    if id.starts_with('.') {
        return Err(refuse("it starts with '.'"));
    }
    for ch in id.chars() {
        if ch == '/' || ch == '\\' {
            return Err(refuse("it contains a path separator"));
        }
        if ch.is_control() {
            return Err(refuse("it contains a control character"));
        }
        if !(ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.')) {
            return Err(refuse(
                "only ASCII letters, digits, '-', '_' and '.' are allowed",
            ));
        }
    }
    Ok(())
}

/// A new session id for `now`: `YYYYMMDD-HHMMSS-xxxx` in UTC with four random hex digits.
pub fn new_session_id(now: Timestamp) -> Result<String, SessionError> {
    let mut suffix = [0u8; 2];
    getrandom::fill(&mut suffix).map_err(|err| SessionError::Random(err.to_string()))?;
    Ok(format!(
        "{}-{:02x}{:02x}",
        now.strftime("%Y%m%d-%H%M%S"),
        suffix[0],
        suffix[1]
    ))
}

/// Eight random hex digits, for temporary file names.
pub(crate) fn random_hex8() -> Result<String, SessionError> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|err| SessionError::Random(err.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_have_the_documented_shape_and_are_valid() {
        let now: Timestamp = "2026-09-29T15:30:12.5Z".parse().unwrap();
        let id = new_session_id(now).unwrap();
        assert_eq!(id.len(), "20260929-153012-3f9a".len());
        assert!(id.starts_with("20260929-153012-"), "{id}");
        assert!(id[16..].chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        validate_id(IdKind::Session, &id).unwrap();
    }

    #[test]
    fn generated_ids_differ() {
        let now = Timestamp::now();
        let ids: std::collections::HashSet<String> =
            (0..20).map(|_| new_session_id(now).unwrap()).collect();
        assert!(ids.len() > 1, "the random suffix never changed");
    }

    #[test]
    fn plain_names_pass() {
        for id in [
            "tau",
            "20260929-153012-3f9a",
            "a.b_c-D9",
            &"x".repeat(MAX_ID_LEN),
        ] {
            validate_id(IdKind::Session, id).unwrap();
        }
    }

    #[test]
    fn non_plain_names_are_refused() {
        let long = "x".repeat(MAX_ID_LEN + 1);
        for id in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "../etc",
            "a\\b",
            "a\0b",
            "a\nb",
            "a\u{7f}",
            "a b",
            "é",
            "a\u{202e}b",
            long.as_str(),
        ] {
            let err = validate_id(IdKind::Agent, id).unwrap_err();
            assert!(
                matches!(
                    err,
                    SessionError::InvalidId {
                        kind: IdKind::Agent,
                        ..
                    }
                ),
                "{id:?} -> {err}"
            );
        }
    }

    #[test]
    fn refused_ids_are_shown_escaped_and_short() {
        let id = format!("a\nb{}", "y".repeat(500));
        let text = validate_id(IdKind::Session, &id).unwrap_err().to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.len() < 200, "{text}");
    }
}
