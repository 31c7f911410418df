//! Property tests of a hub whose store holds one damaged session (any record of it, either
//! backend): the session service still starts (its restart scan reads every session), and the
//! damaged session opens, lists, shows and replays its events, or fails cleanly with the store's
//! error (UNAVAILABLE naming the record, FAILED_PRECONDITION for a newer format) within a
//! deadline; a new session on the same hub still takes a turn.
//!
//! `PROPTEST_CASES=N` runs N cases per property instead of the short default.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use support::props::targets::{
    FileTarget, RowTarget, damage_file, damage_row, file_target, row_target,
};
use support::props::{Damage, ID, damage, fill, panics, runner};
use taud::hub::{CoreError, HubCore, OpenTarget, StartTurn};
use taud::store::{Durability, FileSessionStore, SqliteSessionStore};
use taud::testing::{FakeModel, FakeReply};

const DEADLINE: Duration = Duration::from_secs(10);

async fn within<T>(what: &str, call: impl Future<Output = T>) -> Result<T, TestCaseError> {
    tokio::time::timeout(DEADLINE, call)
        .await
        .map_err(|_| TestCaseError::fail(format!("{what} hung")))
}

/// A refusal of a call on the damaged session: the store's error naming the damaged record (or,
/// for a sqlite value of the wrong type, the database's own error), never NotFound (it exists)
/// or InvalidArgument (the request is fine).
fn clean<T: std::fmt::Debug>(
    what: &str,
    result: &Result<T, CoreError>,
    (name, missing): &(String, bool),
) -> Result<(), TestCaseError> {
    if let Err(error) = result {
        // An agent directory that lost its messages directory reads as no agent.
        if *missing
            && matches!(error, CoreError::NotFound(m) if m.contains("agent tau does not exist"))
        {
            return Ok(());
        }
        prop_assert!(
            matches!(
                error,
                CoreError::Unavailable(_)
                    | CoreError::FailedPrecondition(_)
                    | CoreError::ContextMismatch(_)
            ),
            "{what}: {error:?}"
        );
        let message = error.to_string();
        let context = matches!(error, CoreError::ContextMismatch(_)) && message.contains(ID);
        prop_assert!(
            context || message.contains(name.as_str()) || message.contains("session database:"),
            "{what}: the refusal does not name {name}: {message}"
        );
    }
    Ok(())
}

async fn turn(core: &HubCore, session_id: &str) -> Result<Vec<&'static str>, CoreError> {
    let mut stream = core
        .start_turn(StartTurn {
            session_id: session_id.to_owned(),
            text: "hello".into(),
            channel: "terminal".into(),
            idempotency_key: String::new(),
        })
        .await?;
    let events = support::hub::drain(&mut stream).await;
    Ok(support::hub::names(&events))
}

async fn hub_case(
    backend: &'static str,
    damage_store: impl FnOnce(&std::path::Path) -> (String, bool),
) -> Result<(), TestCaseError> {
    let panics_before = panics().load(std::sync::atomic::Ordering::SeqCst);
    let tmp = crate::support::temp::dir();
    let name = damage_store(tmp.path());
    let model = Arc::new(FakeModel::scripted(
        (0..4).map(|i| FakeReply::text(format!("reply {i}"))),
    ));
    let setup = support::hub::setup(tmp.path(), backend, &model, support::hub::options());
    let core = within("the start", setup.start())
        .await?
        .map_err(|e| TestCaseError::fail(format!("the session service did not start: {e}")))?;

    let listed = within("ListSessions", core.list_sessions(10, "terminal", None)).await?;
    clean("ListSessions", &listed, &name)?;
    let detail = within("GetSession", core.get_session(ID, true)).await?;
    clean("GetSession", &detail, &name)?;
    clean(
        "ReadEvents",
        &within("ReadEvents", core.read_events(ID)).await?,
        &name,
    )?;
    let opened = within(
        "OpenSession",
        core.open_session(OpenTarget::Id(ID.into()), None, "terminal", None),
    )
    .await?;
    clean("OpenSession", &opened, &name)?;
    if opened.is_ok() {
        let ended = within("a turn on it", turn(&core, ID)).await?;
        clean("StartTurn", &ended, &name)?;
        if let Ok(names) = ended {
            prop_assert_eq!(names.last().copied(), Some("turn_ended"));
        }
    }
    // The rest of the hub is untouched.
    let fresh = within(
        "OpenSession(new)",
        core.open_session(OpenTarget::New, None, "terminal", None),
    )
    .await?
    .map_err(|e| TestCaseError::fail(format!("a new session: {e}")))?;
    let names = within(
        "a turn on a new session",
        turn(&core, &fresh.session.session_id),
    )
    .await?
    .map_err(|e| TestCaseError::fail(format!("a turn on a new session: {e}")))?;
    prop_assert_eq!(names.last().copied(), Some("turn_ended"));
    within("the shutdown", core.shutdown()).await?;
    prop_assert_eq!(
        panics().load(std::sync::atomic::Ordering::SeqCst),
        panics_before,
        "something panicked"
    );
    Ok(())
}

fn file_store(root: &std::path::Path, target: &FileTarget, damage: &Damage) -> String {
    let sessions = root.join("sessions");
    let store = FileSessionStore::open(&sessions, Durability::NoSync).unwrap();
    fill(&store);
    damage_file(&sessions, target, damage)
}

fn sqlite_store(root: &std::path::Path, target: &RowTarget, damage: &Damage) -> String {
    let db = root.join("sessions.db");
    {
        let store = SqliteSessionStore::open(&db, Durability::NoSync).unwrap();
        fill(&store);
    }
    damage_row(&db, target, damage);
    ID.to_owned()
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_hub_with_a_damaged_file_session_starts_and_answers_cleanly() {
    let rt = tokio_runtime();
    runner(48)
        .run(&(file_target(), damage()), |(target, damage)| {
            rt.block_on(hub_case("file", |root| {
                (file_store(root, &target, &damage), false)
            }))
        })
        .unwrap();
}

#[test]
fn a_hub_with_a_damaged_sqlite_session_starts_and_answers_cleanly() {
    let rt = tokio_runtime();
    runner(48)
        .run(&(row_target(), damage()), |(target, damage)| {
            rt.block_on(hub_case("sqlite", |root| {
                (sqlite_store(root, &target, &damage), false)
            }))
        })
        .unwrap();
}

#[test]
fn a_hub_over_a_reshaped_session_tree_starts_and_answers_cleanly() {
    use support::props::targets::{Shape, reshape, shapes};
    let rt = tokio_runtime();
    for shape in shapes() {
        let mut applies = true;
        let result = rt.block_on(hub_case("file", |root| {
            let sessions = root.join("sessions");
            let store = FileSessionStore::open(&sessions, Durability::NoSync).unwrap();
            fill(&store);
            let missing = matches!(shape, Shape::Gone("agents/tau/messages"));
            let name = reshape(&sessions, shape).unwrap_or_else(|| {
                applies = false;
                String::new()
            });
            (name, missing)
        }));
        if applies {
            result.unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        }
    }
}

/// Every number of the last message's and the agent's sqlite records at the edges of the
/// integer types, through a hub: the cases a random run finds only rarely.
#[test]
fn a_hub_over_extreme_numbers_in_sqlite_records_starts_and_answers_cleanly() {
    let rt = tokio_runtime();
    for target in [
        RowTarget::MessageRecord(support::props::MESSAGES - 1),
        RowTarget::AgentRecord,
        RowTarget::SessionRecord,
    ] {
        for raw in support::props::EXTREME_NUMBERS {
            for pick in 0..3 {
                let damage = Damage::Number(pick, raw);
                rt.block_on(hub_case("sqlite", |root| {
                    (sqlite_store(root, &target, &damage), false)
                }))
                .unwrap_or_else(|e| panic!("{target:?} {damage:?}: {e}"));
            }
        }
    }
}
