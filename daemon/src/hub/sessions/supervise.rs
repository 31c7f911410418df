//! Watching the session workers: each worker runs under [`run_watched`], which notices when it
//! dies (a panic, or an end while its session is still open) and retires the session through
//! [`OpenSessions::retire_dead`], so a session never stays wedged behind a worker that is gone.
//! See ARCHITECTURE.md, "hub/".
//!
//! Invariants:
//! - Retiring is [`OpenSessions`]'s one retire path: the session's turns end with an error
//!   (`TurnEnded`, stop reason `error`), its pending approvals are cancelled, its last seq is
//!   remembered and it leaves the map, all under the map's lock, before any call can open it
//!   again, so the old and the new bus never number the same seq.
//! - A worker that ends because its session was dropped or the hub stops is not retired again.
//! - No std lock is held across an `.await`.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tracing::error;

use super::open_sessions::OpenSessions;
use super::runtime::SessionRuntime;
use super::worker::run_worker;

/// Runs the worker of `runtime`, retiring the session when the worker dies.
pub(super) async fn run_watched(sessions: Arc<OpenSessions>, runtime: Arc<SessionRuntime>) {
    watch(&sessions, &runtime, run_worker(&runtime)).await;
}

/// Runs `work` (a session's worker) and retires the session if it panics or ends while the
/// session is still open.
async fn watch(
    sessions: &OpenSessions,
    runtime: &Arc<SessionRuntime>,
    work: impl Future<Output = ()>,
) {
    let panicked = AssertUnwindSafe(work).catch_unwind().await.is_err();
    if panicked {
        error!(session_id = %runtime.session_id, "the session's worker panicked");
    }
    if let Some(ended) = sessions.retire_dead(runtime, panicked).await {
        error!(
            session_id = %runtime.session_id,
            turns_ended = ended,
            "the session's worker stopped; the session left memory and opens again on the next call"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::sessions::agent_build::Restore;
    use crate::hub::{
        CoreOptions, CoreSetup, EventKind, HubCore, OpenTarget, SharedModelFactory, StartTurn,
    };
    use crate::store::{Durability, SessionBackends, SessionStoreConfig};
    use crate::testing::{FakeModel, FakeReply};
    use tau_api::config::RoleConfig;

    async fn core(dir: &std::path::Path, model: &Arc<FakeModel>) -> HubCore {
        let mut options = CoreOptions::default();
        options.roles.insert(
            "brain".to_owned(),
            RoleConfig {
                provider: "fake".into(),
                model_id: "m".into(),
                max_tokens: 100,
                cache: None,
                fallback: None,
                tuning: Default::default(),
            },
        );
        CoreSetup {
            options,
            backend: "file".to_owned(),
            store: SessionStoreConfig {
                sessions_dir: dir.join("sessions"),
                sqlite_path: dir.join("sessions.db"),
                durability: Durability::NoSync,
            },
            backends: SessionBackends::builtin(),
            factory: Arc::new(SharedModelFactory(Arc::clone(model) as _)),
        }
        .start()
        .await
        .unwrap()
    }

    fn turn(session_id: &str, text: &str) -> StartTurn {
        StartTurn {
            session_id: session_id.to_owned(),
            text: text.to_owned(),
            channel: String::new(),
            idempotency_key: String::new(),
        }
    }

    #[tokio::test]
    async fn a_panicking_worker_ends_its_turns_and_the_session_opens_again() {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(FakeModel::scripted(vec![FakeReply::text("back")]));
        let core = core(dir.path(), &model).await;
        let id = core
            .open_session(OpenTarget::New, None, "api", None)
            .await
            .unwrap()
            .session
            .session_id;
        // A second runtime of the session stands in for the open one, with a worker that panics
        // before it runs anything: the turn accepted on it waits for nobody.
        let stand_in = {
            let (role, _) = core.resolve_role(&id, None).unwrap();
            let last = core.open_runtime(&id).await.unwrap().bus.last_seq();
            let bus = Arc::new(crate::hub::EventBus::continuing(id.as_str(), 64, 64, last));
            Arc::new(
                SessionRuntime::open(
                    core.parts(),
                    &id,
                    &role,
                    bus,
                    Restore::Stored { carried: None },
                )
                .unwrap(),
            )
        };
        let replaced = core
            .open_map()
            .lock()
            .await
            .replace(Arc::clone(&stand_in))
            .unwrap();
        replaced.stop.cancel();
        let mut waiting = core.start_turn(turn(&id, "hello")).await.unwrap();
        let accepted_seq = waiting.accepted().first_seq;

        watch(core.open_map(), &stand_in, async {
            panic!("a bug in the worker")
        })
        .await;

        let mut events = Vec::new();
        while let Some(event) = waiting.next().await.unwrap() {
            events.push(event);
        }
        let Some(EventKind::TurnEnded(end)) = events.last().map(|e| e.kind.clone()) else {
            panic!("the waiting turn did not end: {events:?}");
        };
        assert_eq!(end.stop_reason, crate::agent::StopReason::Error);
        assert!(end.notice.unwrap().contains("worker failed"));
        assert_eq!(core.open_sessions(), 0, "the session left memory");
        assert!(core.open_runtime(&id).await.is_none());

        // The next call opens it afresh, numbering on, and its turn runs.
        let mut again = core.start_turn(turn(&id, "again")).await.unwrap();
        assert!(again.accepted().first_seq > accepted_seq);
        let mut last = None;
        while let Some(event) = again.next().await.unwrap() {
            last = Some(event);
        }
        match last.map(|e| e.kind.clone()) {
            Some(EventKind::TurnEnded(end)) => assert_eq!(end.text, "back"),
            other => panic!("{other:?}"),
        }
        assert_eq!(core.open_sessions(), 1);
        core.shutdown().await;
    }

    #[tokio::test]
    async fn a_worker_ending_with_its_dropped_session_retires_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let model = Arc::new(FakeModel::scripted(vec![]));
        let core = core(dir.path(), &model).await;
        let id = core
            .open_session(OpenTarget::New, None, "api", None)
            .await
            .unwrap()
            .session
            .session_id;
        // As the idle reaper does: out of the map, its worker stopped.
        let runtime = core.open_map().lock().await.remove(&id).unwrap();
        runtime.stop.cancel();
        watch(core.open_map(), &runtime, async {}).await;
        assert!(!runtime.turns.lock().closed, "left alone");
        core.shutdown().await;
    }
}
