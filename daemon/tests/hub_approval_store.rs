//! An approved decision that the store cannot record issues no permit: through the in-process hub
//! core over a file store that refuses to append `approved` approval events (a full disk at the
//! wrong moment), the tool does not run, the model is told why, the stored question ends as an
//! error, the DecideApproval answer and the live `ApprovalResolved` say the same (never
//! "approved"), and a restart finds nothing left pending.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::hooked_store::{Hooked, StoreHooks};

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use taud::hub::{
    ApprovalAnswer, ApprovalOutcome, CoreOptions, DecideOutcome, EventKind, HubCore,
    SharedModelFactory, StartTurn,
};
use taud::store::{Durability, FileSessionStore, SessionError, SessionStore, create_fresh_session};
use taud::testing::{FakeModel, FakeReply};

/// A file store's disk, full for `approved` approval events.
struct NoRoomForApprovals;

impl StoreHooks for NoRoomForApprovals {
    fn append_event(
        &self,
        inner: &FileSessionStore,
        session_id: &str,
        event: &Value,
    ) -> Result<(), SessionError> {
        if event["type"] == "approval" && event["status"] == "approved" {
            return Err(SessionError::Io {
                path: "events.jsonl".into(),
                source: std::io::Error::other("No space left on device"),
            });
        }
        inner.append_event(session_id, event)
    }
}

#[tokio::test]
async fn an_approval_the_store_cannot_record_runs_no_tool() {
    let dir = crate::support::temp::dir();
    let files = FileSessionStore::open(dir.path().join("sessions"), Durability::NoSync).unwrap();
    let session_id = create_fresh_session(&files).unwrap().session_id;
    let store: Arc<dyn SessionStore> = Arc::new(Hooked {
        inner: files,
        hooks: NoRoomForApprovals,
    });
    let model = Arc::new(FakeModel::scripted([
        FakeReply::tool_call(
            "demo_physical_action",
            json!({"action": "turn on the lamp"}),
        ),
        FakeReply::text("I could not."),
    ]));
    let options = CoreOptions {
        approval_scan_mark: Some(dir.path().join("approval-scan.json")),
        ..CoreOptions::default()
    };
    let factory = Arc::new(SharedModelFactory(Arc::clone(&model) as _));
    let core = HubCore::new(Arc::clone(&store), options.clone(), factory).unwrap();
    core.start().await.unwrap();
    let mut turn = core
        .start_turn(StartTurn {
            session_id: session_id.clone(),
            text: "turn on the lamp".into(),
            channel: "terminal".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap();
    let mut events = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), turn.next())
            .await
            .unwrap()
            .unwrap()
            .expect("the turn ends");
        if let EventKind::ApprovalRequested(info) = &event.kind {
            assert_eq!(
                core.decide(
                    &info.request.approval_id,
                    ApprovalAnswer::Approve,
                    turn.attachment_id()
                )
                .await
                .unwrap(),
                DecideOutcome::Applied(ApprovalOutcome::Error),
                "the decision reports what the record says"
            );
        }
        let ended = matches!(event.kind, EventKind::TurnEnded(_));
        events.push(event);
        if ended {
            break;
        }
    }
    let resolved: Vec<ApprovalOutcome> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ApprovalResolved { resolution, .. } => Some(*resolution),
            _ => None,
        })
        .collect();
    assert_eq!(resolved, vec![ApprovalOutcome::Error], "one truth, live");
    let call = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(call.status, taud::gate::ToolCallStatus::Refused, "{call:?}");
    assert_eq!(
        call.approval,
        taud::gate::CallApproval::Asked(ApprovalOutcome::Error),
        "{call:?}"
    );
    assert!(!call.result_summary.contains("Simulated"), "{call:?}");
    let read = format!("{:?}", model.requests().last().unwrap().messages.last());
    assert!(
        read.contains("could not be recorded"),
        "the model read {read}"
    );
    let errors: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Error(error) => Some(error.message.clone()),
            _ => None,
        })
        .collect();
    assert!(
        errors.iter().any(|m| m.contains("No space left")),
        "{errors:?}"
    );
    let stored: Vec<String> = core
        .read_events(&session_id)
        .await
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "approval")
        .map(|e| e["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(stored, vec!["pending", "error"]);
    core.shutdown().await;
    let factory = Arc::new(SharedModelFactory(model as _));
    let next = HubCore::new(store, options, factory).unwrap();
    assert!(
        next.start().await.unwrap().is_empty(),
        "nothing was left pending"
    );
    next.shutdown().await;
}
