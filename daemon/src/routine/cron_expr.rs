//! A five-field cron expression (`minute hour day-of-month month day-of-week`) and the next
//! instant it names in a time zone.
//!
//! Owns: parsing (numbers, `*`, lists, ranges, steps, month and weekday names, `@daily`-style
//! macros) and the search for the next matching local time. Invariants: a parsed expression
//! matches at least one calendar time or is refused; a local time that a DST change skips runs at
//! the first instant after the gap (shifted forward by the gap), and one that a DST change repeats
//! runs once, at its first occurrence; the search is bounded, so an expression that only matches
//! on rare dates (29 February on a Monday) still answers in bounded time.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// Why an expression was refused; the text names the field and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cron expression {expression:?}: {reason}")]
pub struct CronError {
    pub expression: String,
    pub reason: String,
}

/// How many days ahead the search looks: past a leap-day-on-a-weekday cycle (28 years).
const SEARCH_DAYS: i32 = 366 * 29;

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// One field's allowed values as a bit set (bit n = value n).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FieldSet {
    bits: u64,
    /// Written as `*` (or `*/1`): matters for the day-of-month / day-of-week rule.
    any: bool,
}

impl FieldSet {
    fn has(self, value: u8) -> bool {
        value < 64 && self.bits & (1 << value) != 0
    }

    fn values(self) -> impl Iterator<Item = u8> {
        (0u8..64).filter(move |v| self.has(*v))
    }
}

/// A parsed cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    text: String,
    minutes: FieldSet,
    hours: FieldSet,
    days_of_month: FieldSet,
    months: FieldSet,
    /// 0 = Sunday; 7 is folded into 0.
    days_of_week: FieldSet,
}

impl std::fmt::Display for CronExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for CronExpr {
    type Err = CronError;

    fn from_str(text: &str) -> Result<Self, CronError> {
        CronExpr::parse(text)
    }
}

struct FieldRule {
    name: &'static str,
    min: u8,
    max: u8,
    names: &'static [&'static str],
    /// The value the first name stands for.
    names_from: u8,
}

const RULES: [FieldRule; 5] = [
    FieldRule {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
        names_from: 0,
    },
    FieldRule {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
        names_from: 0,
    },
    FieldRule {
        name: "day of month",
        min: 1,
        max: 31,
        names: &[],
        names_from: 0,
    },
    FieldRule {
        name: "month",
        min: 1,
        max: 12,
        names: &MONTHS,
        names_from: 1,
    },
    FieldRule {
        name: "day of week",
        min: 0,
        max: 7,
        names: &WEEKDAYS,
        names_from: 0,
    },
];

impl CronExpr {
    /// Parses `minute hour day-of-month month day-of-week`, or one of `@yearly`, `@annually`,
    /// `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`.
    pub fn parse(text: &str) -> Result<Self, CronError> {
        let trimmed = text.trim();
        let expanded = match trimmed {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other => other,
        };
        let error = |reason: String| CronError {
            expression: text.to_owned(),
            reason,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(error(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week) or a macro such as @daily, found {}",
                fields.len()
            )));
        }
        let mut sets = [FieldSet {
            bits: 0,
            any: false,
        }; 5];
        for ((set, field), rule) in sets.iter_mut().zip(&fields).zip(&RULES) {
            *set = parse_field(field, rule).map_err(error)?;
        }
        let [minutes, hours, days_of_month, months, mut days_of_week] = sets;
        if days_of_week.has(7) {
            days_of_week.bits = (days_of_week.bits & !(1 << 7)) | 1;
        }
        let expr = CronExpr {
            text: trimmed.to_owned(),
            minutes,
            hours,
            days_of_month,
            months,
            days_of_week,
        };
        if !expr.some_month_has_a_matching_day() {
            return Err(error(
                "no month has a day the day-of-month field names".into(),
            ));
        }
        Ok(expr)
    }

    /// The text it was parsed from (trimmed).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The first instant strictly after `after` whose local time in `zone` matches, or `None`
    /// when none does within the search bound.
    pub fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let mut day = after.to_zoned(zone.clone()).date();
        let mut found: Option<Timestamp> = None;
        for _ in 0..SEARCH_DAYS {
            if self.day_matches(day)
                && let Some(best) = self.earliest_on(day, after, zone)
            {
                found = Some(found.map_or(best, |f| f.min(best)));
            }
            if let Some(best) = found {
                // A gap shifts a time forward by at most a day; past the best candidate's date
                // nothing earlier can follow.
                if day > best.to_zoned(zone.clone()).date() {
                    return Some(best);
                }
            }
            day = day.checked_add(1.day()).ok()?;
        }
        found
    }

    fn day_matches(&self, day: Date) -> bool {
        let month = u8::try_from(day.month()).unwrap_or(0);
        if !self.months.has(month) {
            return false;
        }
        let dom = self.days_of_month.has(u8::try_from(day.day()).unwrap_or(0));
        let dow = self
            .days_of_week
            .has(u8::try_from(day.weekday().to_sunday_zero_offset()).unwrap_or(0));
        // Classic cron: when both day fields are restricted, either one matching is enough.
        match (self.days_of_month.any, self.days_of_week.any) {
            (true, true) => true,
            (true, false) => dow,
            (false, true) => dom,
            (false, false) => dom || dow,
        }
    }

    /// The earliest instant after `after` among this day's matching local times. Times are
    /// resolved with the "compatible" rule: a skipped time moves forward by the gap, a repeated
    /// time takes its first occurrence.
    fn earliest_on(&self, day: Date, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let mut best: Option<Timestamp> = None;
        for hour in self.hours.values() {
            for minute in self.minutes.values() {
                let Ok(time) =
                    Time::new(i8::try_from(hour).ok()?, i8::try_from(minute).ok()?, 0, 0)
                else {
                    continue;
                };
                let local = DateTime::from_parts(day, time);
                let Ok(zoned) = zone.to_ambiguous_zoned(local).compatible() else {
                    continue;
                };
                let instant = zoned.timestamp();
                if instant > after && best.is_none_or(|b| instant < b) {
                    best = Some(instant);
                }
            }
        }
        best
    }

    fn some_month_has_a_matching_day(&self) -> bool {
        if !self.days_of_month.any && !self.days_of_week.any {
            return true;
        }
        if self.days_of_month.any {
            return true;
        }
        // Longest length of each month (February in a leap year).
        const LONGEST: [u8; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        self.months
            .values()
            .filter(|m| (1..=12).contains(m))
            .any(|m| {
                self.days_of_month
                    .values()
                    .any(|d| d >= 1 && d <= LONGEST[usize::from(m - 1)])
            })
    }
}

fn parse_field(field: &str, rule: &FieldRule) -> Result<FieldSet, String> {
    let mut set = FieldSet {
        bits: 0,
        any: false,
    };
    for item in field.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u8 = step.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                    format!(
                        "{} field {field:?}: step {step:?} is not a number from 1",
                        rule.name
                    )
                })?;
                (range, step)
            }
            None => (item, 1),
        };
        let (low, high) = if range == "*" {
            if step == 1 && field == item {
                set.any = true;
            }
            (rule.min, rule.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, rule, field)?, value(b, rule, field)?)
        } else {
            let start = value(range, rule, field)?;
            // `5/15` means from 5 to the end in steps of 15.
            (start, if item.contains('/') { rule.max } else { start })
        };
        if low > high {
            return Err(format!(
                "{} field {field:?}: range {low}-{high} runs backwards",
                rule.name
            ));
        }
        let mut v = low;
        while v <= high {
            set.bits |= 1 << v;
            v = match v.checked_add(step) {
                Some(next) => next,
                None => break,
            };
        }
    }
    Ok(set)
}

fn value(text: &str, rule: &FieldRule, field: &str) -> Result<u8, String> {
    let lower = text.to_ascii_lowercase();
    if let Some(index) = rule.names.iter().position(|n| *n == lower) {
        return u8::try_from(index)
            .ok()
            .and_then(|i| i.checked_add(rule.names_from))
            .ok_or_else(|| format!("{} field {field:?}: bad name", rule.name));
    }
    match text.parse::<u8>() {
        Ok(n) if (rule.min..=rule.max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{} field {field:?}: {text:?} is not a value from {} to {}{}",
            rule.name,
            rule.min,
            rule.max,
            if rule.names.is_empty() {
                String::new()
            } else {
                format!(" or a name such as {}", rule.names[0])
            }
        )),
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
    fn weekday_mornings_in_istanbul() {
        let cron = CronExpr::parse("0 7 * * mon-fri").unwrap();
        let tz = zone("Europe/Istanbul");
        // Friday 2026-12-04 08:00 local → next is Monday 07:00 local (04:00 UTC).
        let next = cron.next_after(at("2026-12-04T05:00:00Z"), &tz).unwrap();
        assert_eq!(next, at("2026-12-07T04:00:00Z"));
        // Exactly at the firing instant: strictly after, so the next day.
        let again = cron.next_after(next, &tz).unwrap();
        assert_eq!(again, at("2026-12-08T04:00:00Z"));
    }

    #[test]
    fn lists_ranges_steps_and_macros() {
        let cron = CronExpr::parse("*/15 9-10 * * *").unwrap();
        let tz = TimeZone::UTC;
        let mut t = at("2026-01-01T00:00:00Z");
        let mut seen = Vec::new();
        for _ in 0..9 {
            t = cron.next_after(t, &tz).unwrap();
            seen.push(t.to_string());
        }
        assert_eq!(seen[0], "2026-01-01T09:00:00Z");
        assert_eq!(seen[7], "2026-01-01T10:45:00Z");
        assert_eq!(seen[8], "2026-01-02T09:00:00Z");
        assert_eq!(CronExpr::parse("@daily").unwrap().as_str(), "@daily");
        let daily = CronExpr::parse("@daily").unwrap();
        assert_eq!(
            daily.next_after(at("2026-01-01T00:00:00Z"), &tz),
            Some(at("2026-01-02T00:00:00Z"))
        );
        let sunday = CronExpr::parse("0 12 * * 7").unwrap();
        assert_eq!(
            sunday.next_after(at("2026-01-01T00:00:00Z"), &tz),
            Some(at("2026-01-04T12:00:00Z"))
        );
    }

    #[test]
    fn both_day_fields_restricted_means_either() {
        // The 13th, or any Friday.
        let cron = CronExpr::parse("0 0 13 * fri").unwrap();
        let tz = TimeZone::UTC;
        // 2026-02-01 is a Sunday: first Friday is the 6th, before the 13th.
        assert_eq!(
            cron.next_after(at("2026-02-01T00:00:00Z"), &tz),
            Some(at("2026-02-06T00:00:00Z"))
        );
        assert_eq!(
            cron.next_after(at("2026-02-12T00:00:00Z"), &tz),
            Some(at("2026-02-13T00:00:00Z"))
        );
    }

    #[test]
    fn rare_dates_are_found_and_impossible_ones_refused() {
        let leap = CronExpr::parse("0 0 29 2 *").unwrap();
        assert_eq!(
            leap.next_after(at("2026-03-01T00:00:00Z"), &TimeZone::UTC),
            Some(at("2028-02-29T00:00:00Z"))
        );
        let err = CronExpr::parse("0 0 31 2 *").unwrap_err();
        assert!(err.to_string().contains("no month"), "{err}");
    }

    #[test]
    fn errors_name_the_field_and_value() {
        let err = CronExpr::parse("0 25 * * *").unwrap_err().to_string();
        assert!(err.contains("hour field \"25\""), "{err}");
        assert!(err.contains("0 to 23"), "{err}");
        let err = CronExpr::parse("0 7 * *").unwrap_err().to_string();
        assert!(err.contains("expected 5 fields"), "{err}");
        let err = CronExpr::parse("*/0 * * * *").unwrap_err().to_string();
        assert!(err.contains("step"), "{err}");
        let err = CronExpr::parse("0 9-5 * * *").unwrap_err().to_string();
        assert!(err.contains("backwards"), "{err}");
        let err = CronExpr::parse("0 0 * foo *").unwrap_err().to_string();
        assert!(err.contains("month field"), "{err}");
    }

    #[test]
    fn a_time_skipped_by_spring_forward_runs_once_after_the_gap() {
        // New York, 2026-03-08: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist.
        let tz = zone("America/New_York");
        let cron = CronExpr::parse("30 2 * * *").unwrap();
        let before = at("2026-03-07T08:00:00Z"); // 03:00 EST on the 7th
        let first = cron.next_after(before, &tz).unwrap();
        // 02:30 EST on the 7th... no: the 7th's 02:30 is past; the 8th's 02:30 is skipped and runs
        // at 03:30 EDT (07:30 UTC), shifted by the one-hour gap.
        assert_eq!(first, at("2026-03-08T07:30:00Z"));
        let second = cron.next_after(first, &tz).unwrap();
        assert_eq!(second, at("2026-03-09T06:30:00Z")); // 02:30 EDT
    }

    #[test]
    fn a_time_repeated_by_fall_back_runs_once() {
        // New York, 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
        let tz = zone("America/New_York");
        let cron = CronExpr::parse("30 1 * * *").unwrap();
        let first = cron.next_after(at("2026-11-01T04:00:00Z"), &tz).unwrap();
        assert_eq!(first, at("2026-11-01T05:30:00Z")); // 01:30 EDT, the first occurrence
        let second = cron.next_after(first, &tz).unwrap();
        assert_eq!(second, at("2026-11-02T06:30:00Z")); // not 06:30Z on the 1st (01:30 EST)
    }

    #[test]
    fn istanbul_historical_change_of_2015_is_handled() {
        // Turkey moved clocks 03:00 → 04:00 on 2015-03-29 (EET → EEST).
        let tz = zone("Europe/Istanbul");
        let cron = CronExpr::parse("30 3 * * *").unwrap();
        let next = cron.next_after(at("2015-03-28T12:00:00Z"), &tz).unwrap();
        assert_eq!(next, at("2015-03-29T01:30:00Z")); // 04:30 EEST = 03:30 shifted by the gap
        let after = cron.next_after(next, &tz).unwrap();
        assert_eq!(after, at("2015-03-30T00:30:00Z")); // 03:30 EEST
    }
}
