//! The clock and the time zone tau lives in, shared by the persona's `## Now` block and the
//! `current_time` tool.
//!
//! Owns: where "now" comes from (injectable, so tests fix the time) and how it is written for the
//! model. Invariant: the time is always shown in Europe/Istanbul, resolved from the time-zone
//! database bundled into the binary (no dependence on the host's zoneinfo); a time that cannot be
//! represented reads `unknown` instead of failing the model call.
use std::time::SystemTime;

use jiff::Timestamp;
use jiff::tz::{Offset, TimeZone, TimeZoneDatabase};

/// The IANA name of the only time zone tau shows.
pub const TIME_ZONE: &str = "Europe/Istanbul";

/// Where "now" comes from. Any `Fn() -> SystemTime` is a clock.
pub trait Clock: Send + Sync {
    fn now(&self) -> SystemTime;
}

/// The real wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock stopped at one instant (tests, benchmarks).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub SystemTime);

impl From<Timestamp> for FixedClock {
    fn from(instant: Timestamp) -> Self {
        Self(SystemTime::from(instant))
    }
}

impl Clock for FixedClock {
    fn now(&self) -> SystemTime {
        self.0
    }
}

impl<F> Clock for F
where
    F: Fn() -> SystemTime + Send + Sync,
{
    fn now(&self) -> SystemTime {
        self()
    }
}

/// Europe/Istanbul from the bundled database. Turkey has kept UTC+03:00 all year since 2016, so if
/// the bundled entry were ever missing, that fixed offset is the same answer for current dates.
pub fn istanbul() -> TimeZone {
    match TimeZoneDatabase::bundled().get(TIME_ZONE) {
        Ok(zone) => zone,
        Err(err) => {
            tracing::warn!(
                "time zone {TIME_ZONE} not in the bundled database ({err}); using UTC+03:00"
            );
            TimeZone::fixed(Offset::constant(3))
        }
    }
}

/// `29.09.2026 15:30, Tuesday (Europe/Istanbul)`, or `None` for a time out of range.
pub(crate) fn format_now(now: SystemTime, zone: &TimeZone) -> Option<String> {
    match Timestamp::try_from(now) {
        Ok(timestamp) => {
            let local = timestamp.to_zoned(zone.clone());
            Some(format!(
                "{} ({TIME_ZONE})",
                local.strftime("%d.%m.%Y %H:%M, %A")
            ))
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(rfc3339: &str) -> SystemTime {
        let ts: Timestamp = rfc3339.parse().unwrap();
        SystemTime::from(ts)
    }

    #[test]
    fn the_seed_example_reads_exactly() {
        let zone = istanbul();
        assert_eq!(
            format_now(at("2026-09-29T12:30:00Z"), &zone).as_deref(),
            Some("29.09.2026 15:30, Tuesday (Europe/Istanbul)")
        );
    }

    #[test]
    fn istanbul_is_utc_plus_three_in_winter_and_summer() {
        let zone = istanbul();
        assert_eq!(
            format_now(at("2027-01-15T21:05:00Z"), &zone).as_deref(),
            Some("16.01.2027 00:05, Saturday (Europe/Istanbul)")
        );
        assert_eq!(
            format_now(at("2027-07-15T21:05:00Z"), &zone).as_deref(),
            Some("16.07.2027 00:05, Friday (Europe/Istanbul)")
        );
    }

    #[test]
    fn the_zone_comes_from_the_bundled_database() {
        assert_eq!(istanbul().iana_name(), Some(TIME_ZONE));
    }

    #[test]
    fn a_time_out_of_range_has_no_text() {
        // About the year 14600, past what a calendar date can show.
        let far = UNIX_EPOCH + Duration::from_secs(400_000_000_000);
        assert_eq!(format_now(far, &istanbul()), None);
    }

    #[test]
    fn closures_are_clocks() {
        let fixed = at("2026-01-01T00:00:00Z");
        let clock = move || fixed;
        assert_eq!(Clock::now(&clock), fixed);
    }
}
