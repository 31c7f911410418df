//! A role switch, a compaction and an open with a role pin on a session whose turn waits for an
//! approval are refused at once with FailedPrecondition (they never wait behind the turn), and
//! work again once the turn has ended.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use support::hub::{BACKENDS, drain, fixture, lamp, until_approval};
use taud::hub::{ApprovalAnswer, CoreError, OpenTarget};
use taud::testing::FakeReply;

const AT_ONCE: Duration = Duration::from_secs(2);

fn refused<T: std::fmt::Debug>(
    what: &str,
    result: Result<Result<T, CoreError>, impl std::fmt::Debug>,
) {
    let answer = result.unwrap_or_else(|_| panic!("{what} waited behind the turn"));
    match answer {
        Err(CoreError::FailedPrecondition(message)) => {
            assert!(
                message.contains("a turn is running or waiting"),
                "{message}"
            )
        }
        other => panic!("{what}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_of_the_agent_are_refused_at_once_while_a_turn_waits_for_an_approval() {
    for backend in BACKENDS {
        let f = fixture(
            backend,
            vec![
                FakeReply::text("hello"),
                lamp(),
                FakeReply::text("Not done."),
                FakeReply::text("the summary"),
            ],
        )
        .await;
        let id = f.new_session().await;
        drain(&mut f.turn(&id, "hi", "terminal").await).await;
        let mut stream = f.turn(&id, "turn on the lamp", "terminal").await;
        let approval = until_approval(&mut stream).await;

        let switch = tokio::time::timeout(AT_ONCE, f.core.switch_role(&id, "fast")).await;
        refused("SwitchRole", switch);
        let compact =
            tokio::time::timeout(AT_ONCE, f.core.compact_session(&id, "", "terminal")).await;
        refused("CompactSession", compact);
        let open = tokio::time::timeout(
            AT_ONCE,
            f.core
                .open_session(OpenTarget::Id(id.clone()), Some("fast"), "terminal", None),
        )
        .await;
        refused("OpenSession with a role pin", open);

        let attachment = stream.attachment_id().to_owned();
        f.core
            .decide(&approval, ApprovalAnswer::Reject, &attachment)
            .await
            .unwrap();
        drain(&mut stream).await;
        let switched = f.core.switch_role(&id, "fast").await.unwrap();
        assert_eq!(switched.role, "fast");
        f.core.compact_session(&id, "", "terminal").await.unwrap();
    }
}
