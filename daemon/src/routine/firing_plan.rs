//! Which routines fire now: the pure decision the engine's loop takes on every wake, given the
//! wall-clock time and whether the hub just started.
//!
//! Invariants: a routine fires at most once per decision, however many of its instants passed
//! (a clock that jumps forward, or a hub that was down, never causes a burst); an instant up to
//! `handled_through` never fires again, and `handled_through` is moved to "now" in the same
//! decision that claims the firing, so the caller persists it before the action starts; a clock
//! that jumps backward fires nothing until it passes the next instant after `handled_through`
//! (nothing fires twice); a late instant still fires once while the hub runs (the day is not
//! lost), and at start a missed instant fires once or is recorded as skipped, per `catch_up`.

use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::routine_record::{CatchUp, Firing, FiringCause, FiringOutcome, Routine, RoutineAction};

/// A firing this much after its instant (or more) is recorded as `late` (or, at start, as a
/// missed one handled by `catch_up`).
pub const LATE_AFTER: Duration = Duration::from_secs(60);

/// Whether a decision is the first one after the hub started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Startup,
    Running,
}

/// One firing claimed by a decision: its history entry is `running` and its routine's
/// `handled_through` has moved past it.
#[derive(Debug, Clone, PartialEq)]
pub struct DueFiring {
    pub routine: String,
    pub number: u64,
    pub cause: FiringCause,
    pub scheduled: Option<Timestamp>,
    pub action: RoutineAction,
}

/// Claims the firings due at `now`, updating the routines (history and `handled_through`).
/// Returns them with whether anything changed (the caller then saves before firing).
pub fn claim_due(
    routines: &mut [Routine],
    now: Timestamp,
    phase: Phase,
    zone: &TimeZone,
) -> (Vec<DueFiring>, bool) {
    let mut due = Vec::new();
    let mut changed = false;
    for routine in routines.iter_mut().filter(|r| !r.paused) {
        let Some(next) = routine.schedule.next_after(routine.schedule_base(), zone) else {
            continue;
        };
        if next > now {
            continue;
        }
        changed = true;
        routine.handled_through = Some(now);
        let late =
            now.duration_since(next) >= SignedDuration::try_from(LATE_AFTER).unwrap_or_default();
        let cause = match (phase, late) {
            (_, false) => FiringCause::Scheduled,
            (Phase::Running, true) => FiringCause::Late,
            (Phase::Startup, true) => FiringCause::CatchUp,
        };
        if cause == FiringCause::CatchUp && routine.catch_up == CatchUp::Skip {
            routine.push_firing(Firing {
                number: 0,
                scheduled: Some(next),
                started_at: now,
                ended_at: Some(now),
                cause,
                outcome: FiringOutcome::Skipped,
                detail: "missed while the hub was down; catch_up is skip".into(),
            });
            continue;
        }
        let number = routine.push_firing(running(Some(next), now, cause));
        due.push(DueFiring {
            routine: routine.name.clone(),
            number,
            cause,
            scheduled: Some(next),
            action: routine.action.clone(),
        });
    }
    (due, changed)
}

/// Claims a manual firing of `routine` ("run now"); its schedule is untouched.
pub fn claim_manual(routine: &mut Routine, now: Timestamp) -> DueFiring {
    let number = routine.push_firing(running(None, now, FiringCause::Manual));
    DueFiring {
        routine: routine.name.clone(),
        number,
        cause: FiringCause::Manual,
        scheduled: None,
        action: routine.action.clone(),
    }
}

/// The earliest next firing among routines that are not paused.
pub fn next_wake(routines: &[Routine], zone: &TimeZone) -> Option<Timestamp> {
    routines
        .iter()
        .filter(|r| !r.paused)
        .filter_map(|r| r.schedule.next_after(r.schedule_base(), zone))
        .min()
}

fn running(scheduled: Option<Timestamp>, now: Timestamp, cause: FiringCause) -> Firing {
    Firing {
        number: 0,
        scheduled,
        started_at: now,
        ended_at: None,
        cause,
        outcome: FiringOutcome::Running,
        detail: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routine::schedule::Schedule;
    use serde_json::json;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn istanbul() -> TimeZone {
        crate::clock::istanbul()
    }

    fn daily_seven(catch_up: CatchUp) -> Routine {
        Routine::new(
            "morning",
            Schedule::cron("0 7 * * *").unwrap(),
            RoutineAction::Tool {
                tool: "current_time".into(),
                arguments: json!({}),
            },
            catch_up,
            at("2026-12-02T00:00:00Z"),
        )
    }

    #[test]
    fn fires_on_time_once_then_waits_for_the_next_day() {
        let tz = istanbul();
        let mut routines = vec![daily_seven(CatchUp::RunOnce)];
        // 06:59 local: nothing.
        let (due, changed) = claim_due(
            &mut routines,
            at("2026-12-02T03:59:00Z"),
            Phase::Running,
            &tz,
        );
        assert!(due.is_empty() && !changed);
        // 07:00:01 local: one scheduled firing.
        let now = at("2026-12-02T04:00:01Z");
        let (due, changed) = claim_due(&mut routines, now, Phase::Running, &tz);
        assert!(changed);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].cause, FiringCause::Scheduled);
        assert_eq!(due[0].scheduled, Some(at("2026-12-02T04:00:00Z")));
        assert_eq!(routines[0].history.len(), 1);
        // Asked again at the same time: nothing more.
        let (due, _) = claim_due(&mut routines, now, Phase::Running, &tz);
        assert!(due.is_empty());
        assert_eq!(next_wake(&routines, &tz), Some(at("2026-12-03T04:00:00Z")));
    }

    #[test]
    fn a_forward_clock_jump_fires_once_not_a_burst_and_does_not_lose_the_day() {
        let tz = istanbul();
        let mut routines = vec![daily_seven(CatchUp::Skip)];
        routines[0].handled_through = Some(at("2026-12-02T04:00:00Z"));
        // A board booted at 1970 and read its clock: nothing is due, nothing fires.
        let (due, _) = claim_due(&mut routines, Timestamp::UNIX_EPOCH, Phase::Startup, &tz);
        assert!(due.is_empty());
        // NTP moves the clock five days ahead while the hub runs: one late firing.
        let now = at("2026-12-07T06:00:00Z");
        let (due, _) = claim_due(&mut routines, now, Phase::Running, &tz);
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!(due[0].cause, FiringCause::Late);
        assert_eq!(due[0].scheduled, Some(at("2026-12-03T04:00:00Z")));
        let (due, _) = claim_due(&mut routines, now, Phase::Running, &tz);
        assert!(due.is_empty(), "no burst");
        // A jump back an hour and forward again never fires the handled morning twice.
        let (due, _) = claim_due(
            &mut routines,
            at("2026-12-07T03:30:00Z"),
            Phase::Running,
            &tz,
        );
        assert!(due.is_empty());
        let (due, _) = claim_due(
            &mut routines,
            at("2026-12-07T06:00:30Z"),
            Phase::Running,
            &tz,
        );
        assert!(due.is_empty());
        // The next morning fires on time.
        let (due, _) = claim_due(
            &mut routines,
            at("2026-12-08T04:00:00Z"),
            Phase::Running,
            &tz,
        );
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].cause, FiringCause::Scheduled);
    }

    #[test]
    fn a_firing_missed_while_down_runs_once_or_is_skipped() {
        let tz = istanbul();
        let mut routines = vec![daily_seven(CatchUp::RunOnce), daily_seven(CatchUp::Skip)];
        routines[1].name = "skipper".into();
        for r in &mut routines {
            r.handled_through = Some(at("2026-12-01T04:00:00Z"));
        }
        // Down for three mornings; the hub starts at 10:00 local.
        let start = at("2026-12-04T07:00:00Z");
        let (due, changed) = claim_due(&mut routines, start, Phase::Startup, &tz);
        assert!(changed);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].routine, "morning");
        assert_eq!(due[0].cause, FiringCause::CatchUp);
        let skipped = routines[1].history.back().unwrap();
        assert_eq!(skipped.outcome, FiringOutcome::Skipped);
        assert_eq!(skipped.cause, FiringCause::CatchUp);
        // Both wait for the next morning now.
        assert_eq!(next_wake(&routines, &tz), Some(at("2026-12-05T04:00:00Z")));
    }

    #[test]
    fn paused_and_finished_routines_do_not_fire() {
        let tz = istanbul();
        let mut paused = daily_seven(CatchUp::RunOnce);
        paused.paused = true;
        let mut once = daily_seven(CatchUp::RunOnce);
        once.schedule = Schedule::Once {
            at: at("2026-12-02T10:00:00Z"),
        };
        let mut routines = vec![paused, once];
        let (due, _) = claim_due(
            &mut routines,
            at("2026-12-02T10:00:00Z"),
            Phase::Running,
            &tz,
        );
        assert_eq!(due.len(), 1);
        let (due, _) = claim_due(
            &mut routines,
            at("2026-12-09T10:00:00Z"),
            Phase::Running,
            &tz,
        );
        assert!(due.is_empty());
        assert_eq!(next_wake(&routines, &tz), None);
    }

    #[test]
    fn a_cron_across_a_dst_change_fires_each_day_once() {
        // New York's fall-back day repeats 01:00-02:00; "30 1 * * *" fires once that day.
        let tz = jiff::tz::TimeZoneDatabase::bundled()
            .get("America/New_York")
            .unwrap();
        let mut r = daily_seven(CatchUp::RunOnce);
        r.schedule = Schedule::cron("30 1 * * *").unwrap();
        r.created_at = at("2026-10-31T12:00:00Z");
        let mut routines = vec![r];
        let mut fired = Vec::new();
        // Walk the clock minute by minute across three days.
        let mut now = at("2026-10-31T12:00:00Z");
        while now < at("2026-11-03T12:00:00Z") {
            let (due, _) = claim_due(&mut routines, now, Phase::Running, &tz);
            fired.extend(due.into_iter().map(|d| d.scheduled.unwrap().to_string()));
            now = now.checked_add(SignedDuration::from_mins(1)).unwrap();
        }
        assert_eq!(
            fired,
            [
                "2026-11-01T05:30:00Z", // 01:30 EDT, not again at 01:30 EST
                "2026-11-02T06:30:00Z",
                "2026-11-03T06:30:00Z"
            ]
        );
    }
}
