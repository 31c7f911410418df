//! When a routine fires: a cron expression, a fixed interval, or one local time.
//!
//! Owns: the stored shape of a schedule, how a person writes one (`0 7 * * 1-5`, `90m`,
//! `2026-12-24 18:00`), and [`Schedule::next_after`]. Invariants: local times are read in the
//! zone given (the engine always passes Europe/Istanbul; tests pass others to cross a DST
//! change); an interval is elapsed time from its anchor, so a DST change neither shortens nor
//! lengthens it; `next_after` is strictly after its argument, so an instant that was handled is
//! never returned again.

use std::time::Duration;

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use super::cron_expr::CronExpr;
use super::instant_text as stamp;

/// The shortest interval a routine may have.
pub const MIN_INTERVAL: Duration = Duration::from_secs(60);

/// A schedule as stored in `routines.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Schedule {
    /// A five-field cron expression in local time.
    Cron {
        #[serde(with = "cron_text")]
        expr: CronExpr,
    },
    /// Every `every_seconds`, counted from `anchor`.
    Interval {
        every_seconds: u64,
        #[serde(with = "stamp")]
        anchor: Timestamp,
    },
    /// Once, at `at`.
    Once {
        #[serde(with = "stamp")]
        at: Timestamp,
    },
}

/// A schedule a person wrote that cannot be used; the text says which and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(transparent)]
    Cron(#[from] super::cron_expr::CronError),
    #[error("interval {0:?}: expected a number and a unit (s, m, h, d), e.g. 90m, at least 1m")]
    Interval(String),
    #[error("time {0:?}: expected a local time as YYYY-MM-DD HH:MM (Europe/Istanbul) or RFC 3339")]
    Time(String),
}

impl Schedule {
    /// A cron schedule from its text.
    pub fn cron(text: &str) -> Result<Self, ScheduleError> {
        Ok(Self::Cron {
            expr: CronExpr::parse(text)?,
        })
    }

    /// An interval from text such as `90m`, `2h`, `1d` or `45s`, anchored at `anchor`.
    pub fn every(text: &str, anchor: Timestamp) -> Result<Self, ScheduleError> {
        let every = parse_interval(text)?;
        Ok(Self::Interval {
            every_seconds: every.as_secs(),
            anchor,
        })
    }

    /// A one-off from a local time in `zone` (`2026-12-24 18:00`, `2026-12-24T18:00`) or an
    /// RFC 3339 instant with an offset.
    pub fn once(text: &str, zone: &TimeZone) -> Result<Self, ScheduleError> {
        Ok(Self::Once {
            at: parse_local_time(text, zone)?,
        })
    }

    /// The first firing instant strictly after `after`, or `None` when there is none left.
    pub fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        match self {
            Self::Cron { expr } => expr.next_after(after, zone),
            Self::Interval {
                every_seconds,
                anchor,
            } => interval_next(*anchor, *every_seconds, after),
            Self::Once { at } => (*at > after).then_some(*at),
        }
    }

    /// How a person reads it: `cron 0 7 * * 1-5`, `every 90m`, `once 2026-12-24 18:00`.
    /// Whether `other` is the schedule a question showed as `self`: the same cron expression, the
    /// same instant, or the same interval (its anchor is not shown, so it may differ).
    pub fn same_as_shown(&self, other: &Schedule) -> bool {
        match (self, other) {
            (
                Self::Interval { every_seconds, .. },
                Self::Interval {
                    every_seconds: other,
                    ..
                },
            ) => every_seconds == other,
            _ => self == other,
        }
    }

    pub fn describe(&self, zone: &TimeZone) -> String {
        match self {
            Self::Cron { expr } => format!("cron {expr}"),
            Self::Interval { every_seconds, .. } => {
                format!("every {}", describe_interval(*every_seconds))
            }
            Self::Once { at } => format!(
                "once {}",
                at.to_zoned(zone.clone()).strftime("%Y-%m-%d %H:%M")
            ),
        }
    }
}

fn interval_next(anchor: Timestamp, every_seconds: u64, after: Timestamp) -> Option<Timestamp> {
    let every = i64::try_from(every_seconds).ok().filter(|e| *e > 0)?;
    if after < anchor {
        return Some(anchor);
    }
    let elapsed = after.duration_since(anchor).as_secs();
    let steps = elapsed.checked_div(every)?.checked_add(1)?;
    let offset = SignedDuration::from_secs(steps.checked_mul(every)?);
    anchor.checked_add(offset).ok()
}

fn parse_interval(text: &str) -> Result<Duration, ScheduleError> {
    let bad = || ScheduleError::Interval(text.to_owned());
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(bad)?;
    let (number, unit) = trimmed.split_at(split);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let unit_seconds = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let seconds = number.checked_mul(unit_seconds).ok_or_else(bad)?;
    let every = Duration::from_secs(seconds);
    if every < MIN_INTERVAL {
        return Err(bad());
    }
    Ok(every)
}

fn describe_interval(seconds: u64) -> String {
    match seconds {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A local time in `zone`, or an RFC 3339 instant. A skipped local time moves forward past the
/// gap and a repeated one takes its first occurrence, as cron times do.
pub fn parse_local_time(text: &str, zone: &TimeZone) -> Result<Timestamp, ScheduleError> {
    let trimmed = text.trim();
    if let Ok(instant) = trimmed.parse::<Timestamp>() {
        return Ok(instant);
    }
    let normalized = trimmed.replacen(' ', "T", 1);
    let local: DateTime = normalized
        .parse()
        .map_err(|_| ScheduleError::Time(text.to_owned()))?;
    zone.to_ambiguous_zoned(local)
        .compatible()
        .map(|z| z.timestamp())
        .map_err(|_| ScheduleError::Time(text.to_owned()))
}

mod cron_text {
    use super::CronExpr;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(expr: &CronExpr, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(expr.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CronExpr, D::Error> {
        let text = String::deserialize(d)?;
        CronExpr::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn zone(name: &str) -> TimeZone {
        jiff::tz::TimeZoneDatabase::bundled().get(name).unwrap()
    }

    #[test]
    fn an_interval_keeps_elapsed_time_across_a_dst_change() {
        // Berlin, 2026-03-29 02:00 CET → 03:00 CEST.
        let tz = zone("Europe/Berlin");
        let schedule = Schedule::every("1h", at("2026-03-28T23:00:00Z")).unwrap();
        let mut t = at("2026-03-28T23:00:00Z");
        let mut local = Vec::new();
        for _ in 0..3 {
            t = schedule.next_after(t, &tz).unwrap();
            local.push(t.to_zoned(tz.clone()).strftime("%H:%M").to_string());
        }
        // One real hour apart; the local clock skips 02:xx.
        assert_eq!(local, ["01:00", "03:00", "04:00"]);
        assert_eq!(t, at("2026-03-29T02:00:00Z"));
    }

    #[test]
    fn an_interval_from_far_after_its_anchor_lands_on_its_grid() {
        let schedule = Schedule::every("90m", at("2026-01-01T00:00:00Z")).unwrap();
        let next = schedule
            .next_after(at("2026-01-02T00:10:00Z"), &TimeZone::UTC)
            .unwrap();
        assert_eq!(next, at("2026-01-02T01:30:00Z"));
        // Before the anchor: the anchor itself.
        assert_eq!(
            schedule.next_after(at("2025-06-01T00:00:00Z"), &TimeZone::UTC),
            Some(at("2026-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn intervals_are_checked() {
        assert!(matches!(
            Schedule::every("30s", Timestamp::UNIX_EPOCH),
            Err(ScheduleError::Interval(_))
        ));
        assert!(Schedule::every("10x", Timestamp::UNIX_EPOCH).is_err());
        assert!(Schedule::every("m", Timestamp::UNIX_EPOCH).is_err());
        let schedule = Schedule::every("2h", Timestamp::UNIX_EPOCH).unwrap();
        assert_eq!(schedule.describe(&TimeZone::UTC), "every 2h");
    }

    #[test]
    fn a_one_off_fires_once_in_local_time() {
        let tz = zone("Europe/Istanbul");
        let schedule = Schedule::once("2026-12-24 18:00", &tz).unwrap();
        let instant = at("2026-12-24T15:00:00Z");
        assert_eq!(
            schedule.next_after(at("2026-12-01T00:00:00Z"), &tz),
            Some(instant)
        );
        assert_eq!(schedule.next_after(instant, &tz), None);
        assert_eq!(schedule.describe(&tz), "once 2026-12-24 18:00");
        let err = Schedule::once("tomorrow", &tz).unwrap_err().to_string();
        assert!(err.contains("YYYY-MM-DD HH:MM"), "{err}");
    }

    #[test]
    fn the_stored_shape_round_trips() {
        let schedule = Schedule::cron("0 7 * * 1-5").unwrap();
        let json = serde_json::to_value(&schedule).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "cron", "expr": "0 7 * * 1-5"})
        );
        let back: Schedule = serde_json::from_value(json).unwrap();
        assert_eq!(back, schedule);
        let bad = serde_json::from_value::<Schedule>(
            serde_json::json!({"kind": "cron", "expr": "0 99 * * *"}),
        );
        assert!(bad.is_err());
    }
}
