//! The routine engine on a fake clock: firing once on time, catch-up after a restart (run once or
//! skip), no double firing across a kill and restart, a clock that jumps, pause and resume, run
//! now, and the firing loop itself on a paused tokio clock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::json;
use taud::clock::Clock;
use taud::routine::{
    CatchUp, DueFiring, FiringCause, FiringOutcome, FiringResult, Phase, Routine, RoutineAction,
    RoutineEngine, RoutineRunner, Schedule, load_routines, routines_path,
};
use tokio_util::sync::CancellationToken;

/// A wall clock the test moves by hand.
#[derive(Clone)]
struct HandClock(Arc<Mutex<SystemTime>>);

impl HandClock {
    fn at(text: &str) -> Self {
        Self(Arc::new(Mutex::new(SystemTime::from(ts(text)))))
    }

    fn set(&self, text: &str) {
        *self.0.lock().unwrap() = SystemTime::from(ts(text));
    }
}

impl Clock for HandClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
}

fn ts(text: &str) -> Timestamp {
    text.parse().unwrap()
}

/// Records what it fired; fails when told to.
#[derive(Default)]
struct RecordingRunner {
    fired: Mutex<Vec<(String, FiringCause)>>,
    fail: Mutex<bool>,
}

impl RecordingRunner {
    fn fired(&self) -> Vec<(String, FiringCause)> {
        self.fired.lock().unwrap().clone()
    }
}

#[async_trait]
impl RoutineRunner for RecordingRunner {
    async fn fire(
        &self,
        routine: &Routine,
        firing: &DueFiring,
        _: CancellationToken,
    ) -> FiringResult {
        self.fired
            .lock()
            .unwrap()
            .push((routine.name.clone(), firing.cause));
        if *self.fail.lock().unwrap() {
            FiringResult {
                succeeded: false,
                detail: "the lamp did not answer".into(),
            }
        } else {
            FiringResult {
                succeeded: true,
                detail: "done".into(),
            }
        }
    }
}

fn morning(catch_up: CatchUp, created: &str) -> Routine {
    Routine::new(
        "morning",
        // 07:00 Europe/Istanbul = 04:00 UTC.
        Schedule::cron("0 7 * * *").unwrap(),
        RoutineAction::Tool {
            tool: "current_time".into(),
            arguments: json!({}),
        },
        catch_up,
        ts(created),
    )
}

fn open(path: &Path, clock: &HandClock, runner: &Arc<RecordingRunner>) -> RoutineEngine {
    RoutineEngine::open(
        path,
        Arc::new(clock.clone()),
        Arc::clone(runner) as Arc<dyn RoutineRunner>,
    )
    .unwrap()
}

#[tokio::test]
async fn fires_once_on_time_and_records_the_outcome_on_disk() {
    let dir = crate::support::temp::dir();
    let path = routines_path(dir.path());
    let clock = HandClock::at("2026-12-02T03:00:00Z");
    let runner = Arc::new(RecordingRunner::default());
    let engine = open(&path, &clock, &runner);
    engine
        .add(morning(CatchUp::RunOnce, "2026-12-02T03:00:00Z"), false)
        .unwrap();
    assert_eq!(
        engine.get("morning").unwrap().next_firing,
        Some(ts("2026-12-02T04:00:00Z"))
    );
    assert!(engine.tick_and_wait(Phase::Startup).await.is_empty());
    clock.set("2026-12-02T04:00:00.5Z");
    let fired = engine.tick_and_wait(Phase::Running).await;
    assert_eq!(fired.len(), 1);
    assert!(engine.tick_and_wait(Phase::Running).await.is_empty());
    *runner.fail.lock().unwrap() = true;
    clock.set("2026-12-03T04:00:00Z");
    engine.tick_and_wait(Phase::Running).await;
    let stored = load_routines(&path).unwrap();
    let history: Vec<_> = stored[0]
        .history
        .iter()
        .map(|f| (f.cause, f.outcome, f.detail.as_str()))
        .collect();
    assert_eq!(
        history,
        [
            (FiringCause::Scheduled, FiringOutcome::Succeeded, "done"),
            (
                FiringCause::Scheduled,
                FiringOutcome::Failed,
                "the lamp did not answer"
            ),
        ]
    );
    // A failed firing is retried only at its next instant.
    clock.set("2026-12-03T05:00:00Z");
    assert!(engine.tick_and_wait(Phase::Running).await.is_empty());
}

#[tokio::test]
async fn a_firing_missed_while_down_runs_once_at_start_or_is_skipped() {
    let dir = crate::support::temp::dir();
    let path = routines_path(dir.path());
    let clock = HandClock::at("2026-12-01T03:00:00Z");
    let runner = Arc::new(RecordingRunner::default());
    {
        let engine = open(&path, &clock, &runner);
        engine
            .add(morning(CatchUp::RunOnce, "2026-12-01T03:00:00Z"), false)
            .unwrap();
        let mut skip = morning(CatchUp::Skip, "2026-12-01T03:00:00Z");
        skip.name = "skipper".into();
        engine.add(skip, false).unwrap();
    }
    // The hub was down for three mornings and starts at 10:00 local on the 4th.
    clock.set("2026-12-04T07:00:00Z");
    let engine = open(&path, &clock, &runner);
    let fired = engine.tick_and_wait(Phase::Startup).await;
    assert_eq!(fired.len(), 1, "one catch-up, not three: {fired:?}");
    assert_eq!(
        runner.fired(),
        [("morning".to_owned(), FiringCause::CatchUp)]
    );
    let skipped = engine.history("skipper").unwrap();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0].outcome, FiringOutcome::Skipped);
    assert_eq!(
        engine.get("skipper").unwrap().next_firing,
        Some(ts("2026-12-05T04:00:00Z"))
    );
}

#[tokio::test]
async fn no_instant_fires_twice_across_a_kill_and_restart() {
    let dir = crate::support::temp::dir();
    let path = routines_path(dir.path());
    let clock = HandClock::at("2026-12-02T03:00:00Z");
    let runner = Arc::new(RecordingRunner::default());
    {
        let engine = open(&path, &clock, &runner);
        engine
            .add(morning(CatchUp::RunOnce, "2026-12-02T03:00:00Z"), false)
            .unwrap();
        clock.set("2026-12-02T04:00:01Z");
        // The firing is claimed and saved; the hub is killed before the action ends.
        let claimed = engine.claim(Phase::Running);
        assert_eq!(claimed.len(), 1);
    }
    let on_disk = load_routines(&path).unwrap();
    assert_eq!(on_disk[0].history[0].outcome, FiringOutcome::Running);
    // Restarted a few seconds later, and again later the same morning.
    for now in ["2026-12-02T04:00:05Z", "2026-12-02T06:00:00Z"] {
        clock.set(now);
        let engine = open(&path, &clock, &runner);
        assert!(engine.tick_and_wait(Phase::Startup).await.is_empty());
        let history = engine.history("morning").unwrap();
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].outcome, FiringOutcome::Interrupted);
    }
    assert!(
        runner.fired().is_empty(),
        "the claimed instant never ran again"
    );
}

#[tokio::test]
async fn a_clock_that_jumps_fires_once_and_never_twice() {
    let dir = crate::support::temp::dir();
    let path = routines_path(dir.path());
    let clock = HandClock::at("2026-12-02T05:00:00Z");
    let runner = Arc::new(RecordingRunner::default());
    let mut routine = morning(CatchUp::Skip, "2026-12-01T00:00:00Z");
    routine.handled_through = Some(ts("2026-12-02T04:00:00Z"));
    taud::routine::save_routines(&path, &[routine]).unwrap();
    // A board without a battery boots in 1970: nothing is due.
    clock.set("1970-01-01T00:00:10Z");
    let engine = open(&path, &clock, &runner);
    assert!(engine.tick_and_wait(Phase::Startup).await.is_empty());
    // NTP sets the clock: three mornings passed. One late firing, not three.
    clock.set("2026-12-05T09:00:00Z");
    assert_eq!(engine.tick_and_wait(Phase::Running).await.len(), 1);
    assert!(engine.tick_and_wait(Phase::Running).await.is_empty());
    // Back an hour and forward again: nothing twice.
    clock.set("2026-12-05T08:00:00Z");
    assert!(engine.tick_and_wait(Phase::Running).await.is_empty());
    clock.set("2026-12-05T09:30:00Z");
    assert!(engine.tick_and_wait(Phase::Running).await.is_empty());
    clock.set("2026-12-06T04:00:00Z");
    assert_eq!(engine.tick_and_wait(Phase::Running).await.len(), 1);
    assert_eq!(
        runner.fired(),
        [
            ("morning".to_owned(), FiringCause::Late),
            ("morning".to_owned(), FiringCause::Scheduled)
        ]
    );
}

#[tokio::test]
async fn pause_resume_remove_and_run_now() {
    let dir = crate::support::temp::dir();
    let path = routines_path(dir.path());
    let clock = HandClock::at("2026-12-02T03:00:00Z");
    let runner = Arc::new(RecordingRunner::default());
    let engine = open(&path, &clock, &runner);
    engine
        .add(morning(CatchUp::RunOnce, "2026-12-02T03:00:00Z"), false)
        .unwrap();
    let err = engine
        .add(morning(CatchUp::RunOnce, "2026-12-02T03:00:00Z"), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("already exists"), "{err}");
    let view = engine.set_paused("morning", true).unwrap();
    assert!(view.routine.paused && view.next_firing.is_none());
    clock.set("2026-12-04T05:00:00Z");
    assert!(engine.tick_and_wait(Phase::Running).await.is_empty());
    // Resuming does not fire the mornings missed while paused.
    let view = engine.set_paused("morning", false).unwrap();
    assert_eq!(view.next_firing, Some(ts("2026-12-05T04:00:00Z")));
    assert!(engine.tick_and_wait(Phase::Running).await.is_empty());
    let number = engine.run_now("morning").unwrap();
    for _ in 0..100 {
        if engine.history("morning").unwrap()[0].outcome != FiringOutcome::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let history = engine.history("morning").unwrap();
    assert_eq!(history[0].number, number);
    assert_eq!(history[0].cause, FiringCause::Manual);
    assert_eq!(history[0].outcome, FiringOutcome::Succeeded);
    assert_eq!(
        engine.get("morning").unwrap().next_firing,
        Some(ts("2026-12-05T04:00:00Z")),
        "run now leaves the schedule alone"
    );
    engine.remove("morning").unwrap();
    assert!(engine.list().is_empty());
    assert!(load_routines(&path).unwrap().is_empty());
    let err = engine.remove("morning").unwrap_err().to_string();
    assert_eq!(err, "no routine named \"morning\"");
}

#[tokio::test(start_paused = true)]
async fn the_loop_fires_when_the_wall_clock_reaches_the_instant() {
    let dir = crate::support::temp::dir();
    let path = routines_path(dir.path());
    let clock = HandClock::at("2026-12-02T03:59:00Z");
    let runner = Arc::new(RecordingRunner::default());
    let engine = open(&path, &clock, &runner);
    engine
        .add(morning(CatchUp::RunOnce, "2026-12-02T03:00:00Z"), false)
        .unwrap();
    let task = tokio::spawn(engine.clone().run());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(runner.fired().is_empty());
    // The wall clock jumps to 07:00:10 local; the loop notices within its nap.
    clock.set("2026-12-02T04:00:10Z");
    tokio::time::sleep(taud::routine::MAX_NAP + Duration::from_secs(1)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        runner.fired(),
        [("morning".to_owned(), FiringCause::Scheduled)]
    );
    engine.shutdown();
    task.await.unwrap();
}
