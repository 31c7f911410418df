//! Spend through the hub core: each model call is counted for its role, the persona's `Budget
//! today` line shows it, a role over its daily budget is answered by its fallback model, and one
//! without a fallback refuses the turn with a clear notice; the usage reported adds up to the
//! turns' usage; a ledger that cannot be read refuses a budgeted role rather than count from zero.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;

use support::hub::{drain, options, setup};
use tau_api::config::{RoleConfig, RolePrice};
use taud::agent::StopReason;
use taud::hub::{EventKind, HubCore, ModelFactory, ModelFactoryError, OpenTarget, StartTurn};
use taud::message::SystemContentBlock;
use taud::model::Model;
use taud::testing::{FakeModel, FakeReply};

/// Serves `fast` with `primary`, and with `fallback` as its fallback model when given.
struct TwoModels {
    primary: Arc<FakeModel>,
    fallback: Option<Arc<FakeModel>>,
}

impl ModelFactory for TwoModels {
    fn build(&self, _: &str, _: Option<&RoleConfig>) -> Result<Arc<dyn Model>, ModelFactoryError> {
        Ok(Arc::clone(&self.primary) as _)
    }

    fn build_fallback(
        &self,
        _: &str,
        _: Option<&RoleConfig>,
    ) -> Result<Option<Arc<dyn Model>>, ModelFactoryError> {
        Ok(self.fallback.clone().map(|m| m as _))
    }
}

/// A core whose `fast` role costs 1 $ per input token with a 5 $ daily budget.
async fn core(dir: &std::path::Path, factory: TwoModels) -> HubCore {
    let mut opts = options();
    opts.default_role = "fast".into();
    opts.spend.prices.insert(
        "fast".into(),
        RolePrice {
            input_per_mtok: 1_000_000.0,
            ..RolePrice::default()
        },
    );
    opts.spend.daily_usd.insert("fast".into(), 5.0);
    opts.spend_ledger = Some(dir.join("spend.json"));
    let unused = Arc::new(FakeModel::scripted([]));
    let mut setup = setup(dir, "file", &unused, opts);
    setup.factory = Arc::new(factory);
    setup.start().await.unwrap()
}

async fn turn(core: &HubCore, session_id: &str, text: &str) -> Vec<Arc<taud::hub::SessionEvent>> {
    let mut stream = core
        .start_turn(StartTurn {
            session_id: session_id.into(),
            text: text.into(),
            channel: "terminal".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap();
    drain(&mut stream).await
}

fn end(events: &[Arc<taud::hub::SessionEvent>]) -> taud::agent::TurnEnd {
    match &events.last().unwrap().kind {
        EventKind::TurnEnded(end) => end.clone(),
        other => panic!("{other:?}"),
    }
}

fn system_of(model: &FakeModel) -> String {
    SystemContentBlock::join(&model.last_request().unwrap().system)
}

async fn new_session(core: &HubCore) -> String {
    core.open_session(OpenTarget::New, None, "terminal", None)
        .await
        .unwrap()
        .session
        .session_id
}

#[tokio::test]
async fn a_role_over_its_budget_is_served_by_its_fallback_and_usage_adds_up() {
    let dir = crate::support::temp::dir();
    let primary = Arc::new(FakeModel::scripted([
        FakeReply::text("first").with_usage(3, 1),
        FakeReply::text("second").with_usage(4, 2),
        FakeReply::text("never").with_usage(1, 1),
    ]));
    let fallback = Arc::new(FakeModel::scripted([
        FakeReply::text("from the fallback").with_usage(50, 5)
    ]));
    let core = core(
        dir.path(),
        TwoModels {
            primary: Arc::clone(&primary),
            fallback: Some(Arc::clone(&fallback)),
        },
    )
    .await;
    let id = new_session(&core).await;
    let mut ends = Vec::new();
    for text in ["one", "two", "three"] {
        ends.push(end(&turn(&core, &id, text).await));
    }
    assert_eq!(ends[0].text, "first");
    assert!(
        system_of(&primary).contains("- Budget today: fast 3,00 $ / 5 $"),
        "{}",
        system_of(&primary)
    );
    // 3 $ + 4 $ reached the 5 $ budget: the third turn went to the fallback.
    assert_eq!(ends[2].text, "from the fallback");
    assert_eq!(primary.call_count(), 2);
    assert!(system_of(&fallback).contains("- Budget today: fast 7,00 $ / 5 $"));

    let today = core.usage(1);
    assert_eq!(today.len(), 1);
    let (mut input, mut output, mut calls) = (0, 0, 0);
    for role in &today[0].roles {
        input += role.tally.input_tokens;
        output += role.tally.output_tokens;
        calls += role.tally.model_calls;
    }
    assert_eq!(
        input,
        ends.iter().map(|e| e.usage.input_tokens).sum::<u64>()
    );
    assert_eq!(
        output,
        ends.iter().map(|e| e.usage.output_tokens).sum::<u64>()
    );
    assert_eq!(calls, 3);
    let fast = today[0].roles.iter().find(|r| !r.fallback).unwrap();
    assert!((fast.tally.cost_usd - 7.0).abs() < 1e-9);
    assert_eq!(fast.budget_usd, Some(5.0));
    assert!(
        today[0]
            .roles
            .iter()
            .any(|r| r.fallback && r.tally.input_tokens == 50)
    );
    core.shutdown().await;
    // Shutdown saves what the paced writer has not saved yet.
    let stored = std::fs::read_to_string(dir.path().join("spend.json")).unwrap();
    assert!(stored.contains("\"version\": 1"), "{stored}");
    let stored: serde_json::Value = serde_json::from_str(&stored).unwrap();
    let day = stored["days"].as_object().unwrap().values().next().unwrap();
    assert_eq!(day["fast"]["model_calls"], 2, "{stored}");
    assert_eq!(day["fast/fallback"]["model_calls"], 1, "{stored}");
}

#[tokio::test]
async fn a_role_over_its_budget_without_a_fallback_refuses_the_turn_with_a_notice() {
    let dir = crate::support::temp::dir();
    let primary = Arc::new(FakeModel::scripted([
        FakeReply::text("costly").with_usage(6, 1),
        FakeReply::text("never"),
    ]));
    let core = core(
        dir.path(),
        TwoModels {
            primary: Arc::clone(&primary),
            fallback: None,
        },
    )
    .await;
    let id = new_session(&core).await;
    assert_eq!(end(&turn(&core, &id, "one").await).text, "costly");
    let refused = end(&turn(&core, &id, "two").await);
    assert_eq!(refused.stop_reason, StopReason::Error);
    assert_eq!(primary.call_count(), 1, "nothing was sent");
    let notice = refused.notice.unwrap();
    assert!(
        notice.contains("the 'fast' role reached its daily budget (6,00 $ of 5 $ today)"),
        "{notice}"
    );
    assert!(notice.contains("no fallback model"), "{notice}");
    core.shutdown().await;
}

#[tokio::test]
async fn a_broken_ledger_refuses_a_budgeted_role_instead_of_counting_from_zero() {
    let dir = crate::support::temp::dir();
    let ledger = dir.path().join("spend.json");
    std::fs::write(&ledger, "{not a ledger").unwrap();
    let primary = Arc::new(FakeModel::scripted([FakeReply::text("never")]));
    let core = core(
        dir.path(),
        TwoModels {
            primary: Arc::clone(&primary),
            fallback: None,
        },
    )
    .await;
    let id = new_session(&core).await;
    let refused = end(&turn(&core, &id, "one").await);
    assert_eq!(refused.stop_reason, StopReason::Error);
    assert_eq!(primary.call_count(), 0, "nothing was sent");
    let notice = refused.notice.unwrap();
    assert!(notice.contains("today's spend is unknown"), "{notice}");
    assert!(notice.contains("spend.json"), "{notice}");
    core.shutdown().await;
    assert_eq!(
        std::fs::read_to_string(&ledger).unwrap(),
        "{not a ledger",
        "the broken file is kept as it was"
    );
}
