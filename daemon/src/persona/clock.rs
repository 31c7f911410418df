//! The clock and the time zone of the `## Now` block.
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

/// Where the `## Now` block gets the current time. Any `Fn() -> SystemTime` is a clock.
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
pub(crate) fn istanbul() -> TimeZone {
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

/// `29.09.2026 15:30, Tuesday (Europe/Istanbul)`, or `unknown` for a time out of range.
pub(crate) fn format_now(now: SystemTime, zone: &TimeZone) -> String {
    match Timestamp::try_from(now) {
        Ok(timestamp) => {
            let local = timestamp.to_zoned(zone.clone());
            format!("{} ({TIME_ZONE})", local.strftime("%d.%m.%Y %H:%M, %A"))
        }
        Err(_) => super::UNKNOWN.to_owned(),
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
            format_now(at("2026-09-29T12:30:00Z"), &zone),
            "29.09.2026 15:30, Tuesday (Europe/Istanbul)"
        );
    }

    #[test]
    fn istanbul_is_utc_plus_three_in_winter_and_summer() {
        let zone = istanbul();
        assert_eq!(
            format_now(at("2027-01-15T21:05:00Z"), &zone),
            "16.01.2027 00:05, Saturday (Europe/Istanbul)"
        );
        assert_eq!(
            format_now(at("2027-07-15T21:05:00Z"), &zone),
            "16.07.2027 00:05, Friday (Europe/Istanbul)"
        );
    }

    #[test]
    fn the_zone_comes_from_the_bundled_database() {
        assert_eq!(istanbul().iana_name(), Some(TIME_ZONE));
    }

    #[test]
    fn a_time_out_of_range_reads_unknown() {
        // About the year 14600, past what a calendar date can show.
        let far = UNIX_EPOCH + Duration::from_secs(400_000_000_000);
        assert_eq!(format_now(far, &istanbul()), "unknown");
    }

    #[test]
    fn closures_are_clocks() {
        let fixed = at("2026-01-01T00:00:00Z");
        let clock = move || fixed;
        assert_eq!(Clock::now(&clock), fixed);
    }
}
