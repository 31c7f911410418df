//! Ids the hub hands out (turns, attachments): a prefix, 16 hex digits from a randomly keyed hash of
//! a counter and the clock, and the counter's low bits, e.g. `turn-3f9a…-0002`.
//!
//! Invariants: unique within a process (the counter), unpredictable across processes (the random
//! hasher key), plain names (ASCII letters, digits and `-`), no global state.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

/// A new id; `counter` must differ between calls of one process (an `AtomicU64` the caller owns).
pub fn new_id(prefix: &str, counter: u64) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(counter);
    hasher.write_u128(nanos);
    format!("{prefix}-{:016x}-{:04x}", hasher.finish(), counter & 0xffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_plain_and_distinct() {
        let a = new_id("turn", 1);
        let b = new_id("turn", 2);
        assert_ne!(a, b);
        assert!(a.starts_with("turn-"));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
        assert_eq!(a.len(), "turn-".len() + 16 + 1 + 4);
    }
}
