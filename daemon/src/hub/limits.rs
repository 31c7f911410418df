//! Every check on the strings and numbers a client sends that the hub keeps, forwards to a model,
//! compares or echoes, with its bound: each is refused with `InvalidArgument` naming the field
//! (and its limit), before anything is touched. See ARCHITECTURE.md, "hub/".
//!
//! Invariants: byte limits are what the hub holds in memory and the wire carries (a user text is
//! bounded in characters, which bounds its bytes); an empty value is within every length limit (callers decide what
//! empty means, except where a check here says); session ids are plain names the store accepts;
//! channels are short plain names, and an empty one is [`DEFAULT_CHANNEL`].

use super::error::CoreError;
use crate::store::{IdKind, validate_id};

/// The channel a request names when it names none.
pub const DEFAULT_CHANNEL: &str = "api";
/// The longest channel name, in bytes.
pub const MAX_CHANNEL_LEN: usize = 64;
/// The longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;
/// The longest user text of a turn, in characters (Unicode scalar values): the one text limit,
/// stated in `turns.proto` and the README. It bounds the bytes too (at most four per character).
pub const MAX_TEXT_CHARS: usize = 100_000;
/// The longest compaction focus, in bytes.
pub const MAX_FOCUS_BYTES: usize = 4 * 1024;
/// The longest model role name, in bytes.
pub const MAX_ROLE_LEN: usize = 64;
/// The longest id a request names that the hub made (approval, attachment, turn, event stream) or
/// only compares (an excluded session), in bytes.
pub const MAX_REF_ID_LEN: usize = 128;

/// `value` of request field `field`, refused when longer than `max` bytes.
pub fn check_len(field: &str, value: &str, max: usize) -> Result<(), CoreError> {
    if value.len() > max {
        return Err(CoreError::InvalidArgument(format!(
            "{field} is {} bytes long; at most {max} are allowed",
            value.len()
        )));
    }
    Ok(())
}

/// An id the hub made or only compares (field `field`), at most [`MAX_REF_ID_LEN`] bytes.
pub fn check_ref_id(field: &str, value: &str) -> Result<(), CoreError> {
    check_len(field, value, MAX_REF_ID_LEN)
}

/// `channel`, or the default for an empty one; refused unless a short plain name.
pub fn check_channel(channel: &str) -> Result<String, CoreError> {
    if channel.is_empty() {
        return Ok(DEFAULT_CHANNEL.to_owned());
    }
    check_len("channel", channel, MAX_CHANNEL_LEN)?;
    let plain = channel
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !plain {
        return Err(CoreError::InvalidArgument(format!(
            "channel {:?} is not a plain name (letters, digits, '-', '_', '.'; at most {MAX_CHANNEL_LEN})",
            channel.chars().take(80).collect::<String>()
        )));
    }
    Ok(channel.to_owned())
}

/// A session id from a request: not empty, and a plain name the store accepts.
pub fn check_session_id(session_id: &str) -> Result<(), CoreError> {
    if session_id.is_empty() {
        return Err(CoreError::InvalidArgument("session_id is empty".to_owned()));
    }
    validate_id(IdKind::Session, session_id).map_err(CoreError::from)
}

/// A turn's user text: not blank, at most [`MAX_TEXT_CHARS`] characters.
pub fn check_text(text: &str) -> Result<(), CoreError> {
    if text.trim().is_empty() {
        return Err(CoreError::InvalidArgument("text is empty".to_owned()));
    }
    // Counted only up to one past the limit, so a huge text costs no more than a long one.
    if text.chars().take(MAX_TEXT_CHARS + 1).count() > MAX_TEXT_CHARS {
        return Err(CoreError::InvalidArgument(format!(
            "text is longer than {MAX_TEXT_CHARS} characters"
        )));
    }
    Ok(())
}

/// A turn's idempotency key: `None` when empty (no deduplication), refused past
/// [`MAX_IDEMPOTENCY_KEY_LEN`] bytes.
pub fn check_idempotency_key(key: &str) -> Result<Option<String>, CoreError> {
    check_len("idempotency_key", key, MAX_IDEMPOTENCY_KEY_LEN)?;
    Ok((!key.is_empty()).then(|| key.to_owned()))
}

/// A model role name, at most [`MAX_ROLE_LEN`] bytes.
pub fn check_role(role: &str) -> Result<(), CoreError> {
    check_len("role", role, MAX_ROLE_LEN)
}

/// A compaction focus, at most [`MAX_FOCUS_BYTES`] bytes.
pub fn check_focus(focus: &str) -> Result<(), CoreError> {
    check_len("focus", focus, MAX_FOCUS_BYTES)
}

/// A 1-based index into a listing.
pub fn check_listing_index(index: u32) -> Result<(), CoreError> {
    if index == 0 {
        return Err(CoreError::InvalidArgument("index is 1-based".to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_over_the_limit_is_refused_naming_field_and_limit() {
        assert!(check_len("role", &"r".repeat(MAX_ROLE_LEN), MAX_ROLE_LEN).is_ok());
        assert!(check_len("role", "", MAX_ROLE_LEN).is_ok());
        let err = check_len("role", &"r".repeat(MAX_ROLE_LEN + 1), MAX_ROLE_LEN).unwrap_err();
        assert_eq!(
            err,
            CoreError::InvalidArgument("role is 65 bytes long; at most 64 are allowed".into())
        );
    }

    #[test]
    fn channels_are_short_plain_names_and_empty_is_the_default() {
        assert_eq!(check_channel("").unwrap(), DEFAULT_CHANNEL);
        assert_eq!(check_channel("cli-2.a_b").unwrap(), "cli-2.a_b");
        assert_eq!(
            check_channel(&"c".repeat(MAX_CHANNEL_LEN + 1)).unwrap_err(),
            CoreError::InvalidArgument("channel is 65 bytes long; at most 64 are allowed".into())
        );
        assert!(check_channel("a b").is_err());
        assert!(check_channel("é").is_err());
    }

    #[test]
    fn texts_are_not_blank_and_bounded_in_characters() {
        assert_eq!(
            check_text(" \n").unwrap_err(),
            CoreError::InvalidArgument("text is empty".into())
        );
        assert!(check_text(&"a".repeat(MAX_TEXT_CHARS)).is_ok());
        assert!(check_text(&"a".repeat(MAX_TEXT_CHARS + 1)).is_err());
        // Characters, not bytes: three bytes each, at the limit, pass.
        assert!(check_text(&"€".repeat(MAX_TEXT_CHARS)).is_ok());
        assert!(check_text(&"€".repeat(MAX_TEXT_CHARS + 1)).is_err());
    }

    #[test]
    fn an_empty_key_means_no_deduplication() {
        assert_eq!(check_idempotency_key("").unwrap(), None);
        assert_eq!(check_idempotency_key("k").unwrap(), Some("k".to_owned()));
        assert_eq!(
            check_idempotency_key(&"k".repeat(MAX_IDEMPOTENCY_KEY_LEN + 1)).unwrap_err(),
            CoreError::InvalidArgument(
                "idempotency_key is 129 bytes long; at most 128 are allowed".into()
            )
        );
    }

    #[test]
    fn session_ids_and_indexes_are_checked() {
        assert_eq!(
            check_session_id("").unwrap_err(),
            CoreError::InvalidArgument("session_id is empty".into())
        );
        assert!(check_session_id("../x").is_err());
        assert!(check_listing_index(0).is_err());
        assert!(check_listing_index(1).is_ok());
    }
}
