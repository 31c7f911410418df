//! Bounds on the strings a client sends that the core keeps, forwards to a model, compares or
//! echoes: each is refused with `InvalidArgument` naming the field and its limit, before anything
//! is touched.
//!
//! Invariants: every limit is in bytes (what the hub holds in memory and the wire carries); an
//! empty value is always within its limit (callers decide what empty means); ids the store
//! validates (session ids) and channels (`core::check_channel`) have their own checks.

use super::error::CoreError;

/// The longest user text of a turn, in bytes.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;
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
}
