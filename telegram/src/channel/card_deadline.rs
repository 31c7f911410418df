//! When an approval card's question ends: the hub's own deadline when the hub gives one (a
//! routine's question is held for `[routines] approval_timeout`; the card lives as long as it),
//! else the channel's configured `approval_timeout_seconds` (the hub would wait without end).
//!
//! Invariants: the hub's deadline is a number from outside: one that cannot be read counts as
//! none, one in the past as now, and none is further off than the longest configurable approval
//! timeout; every sum is checked (one that cannot be represented is now, never "for ever"); with
//! a hub deadline the card's timer acts [`HUB_DEADLINE_GRACE`] after it, so the hub ends its own
//! question first and the card shows how it ended.

use std::time::Duration;

use tau_api::config::APPROVAL_TIMEOUT_BOUNDS;
use tokio::time::Instant;

/// How long past the hub's own deadline a card waits to hear the hub end its question before it
/// asks the hub itself.
pub const HUB_DEADLINE_GRACE: Duration = Duration::from_secs(5);

/// When a card's question ends, and when its timer acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CardDeadline {
    /// The deadline the card shows, past which it is not sent again.
    pub deadline: Instant,
    /// When the card's timer ends it if it is still shown.
    pub expiry: Instant,
}

/// The deadline of a card for an approval whose hub deadline is `hub_deadline` (RFC 3339, empty
/// when the hub gives none), with `configured_seconds` the channel's own timeout.
pub(super) fn card_deadline(configured_seconds: u64, hub_deadline: &str) -> CardDeadline {
    let hub_left = time_left(hub_deadline, jiff::Timestamp::now());
    deadline_from(
        Instant::now(),
        Duration::from_secs(configured_seconds),
        hub_left,
    )
}

/// [`card_deadline`] from `now`, the configured timeout and what is left of the hub's deadline.
fn deadline_from(now: Instant, configured: Duration, hub_left: Option<Duration>) -> CardDeadline {
    let longest = Duration::from_secs(APPROVAL_TIMEOUT_BOUNDS.1);
    let (left, grace) = match hub_left {
        Some(left) => (left, HUB_DEADLINE_GRACE),
        None => (configured, Duration::ZERO),
    };
    let deadline = now.checked_add(left.min(longest)).unwrap_or(now);
    let expiry = deadline.checked_add(grace).unwrap_or(deadline);
    CardDeadline { deadline, expiry }
}

/// What is left at `now` of the hub's `deadline`: `None` when it gives none (or none that can be
/// read), zero when it has passed.
fn time_left(deadline: &str, now: jiff::Timestamp) -> Option<Duration> {
    let at = deadline.parse::<jiff::Timestamp>().ok()?;
    let left = at
        .as_millisecond()
        .saturating_sub(now.as_millisecond())
        .max(0);
    Some(Duration::from_millis(u64::try_from(left).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const TEN_MINUTES: Duration = Duration::from_secs(600);

    #[test]
    fn the_hubs_deadline_wins_over_a_shorter_configured_timeout() {
        let now = Instant::now();
        let hour = Duration::from_secs(3600);
        let card = deadline_from(now, TEN_MINUTES, Some(hour));
        assert_eq!(card.deadline, now + hour);
        assert_eq!(card.expiry, now + hour + HUB_DEADLINE_GRACE);
        // And over a longer one: the hub ends the question then, so the card does too.
        let card = deadline_from(now, hour, Some(TEN_MINUTES));
        assert_eq!(card.deadline, now + TEN_MINUTES);
    }

    #[test]
    fn without_a_hub_deadline_the_configured_timeout_ends_the_card() {
        let now = Instant::now();
        let card = deadline_from(now, TEN_MINUTES, None);
        assert_eq!(card.deadline, now + TEN_MINUTES);
        assert_eq!(card.expiry, card.deadline, "no grace: nobody else ends it");
    }

    #[test]
    fn a_hub_deadline_is_capped_and_read_safely() {
        let now = Instant::now();
        let longest = Duration::from_secs(APPROVAL_TIMEOUT_BOUNDS.1);
        let card = deadline_from(now, TEN_MINUTES, Some(Duration::MAX));
        assert_eq!(card.deadline, now + longest);
        let card = deadline_from(now, Duration::MAX, None);
        assert_eq!(card.deadline, now + longest);

        let at: jiff::Timestamp = "2030-01-01T00:00:00Z".parse().unwrap();
        let later = "2030-01-01T00:01:30Z";
        assert_eq!(time_left(later, at), Some(Duration::from_secs(90)));
        assert_eq!(time_left("2029-12-31T23:59:00Z", at), Some(Duration::ZERO));
        for unreadable in ["", "soon", "99999-01-01T00:00:00Z", "2030-13-01T00:00:00Z"] {
            assert_eq!(time_left(unreadable, at), None, "{unreadable}");
        }
        // The farthest apart two readable instants can be: no overflow, no panic.
        let far = time_left("9999-12-30T00:00:00Z", jiff::Timestamp::MIN).unwrap();
        assert!(far > Duration::from_secs(86_400 * 365 * 10_000), "{far:?}");
    }
}
