//! Tests of the approval registry: decisions, attachments and what they were shown, closed
//! channels, the first resolution winning, expiry, attachment limits.

use super::*;
use std::time::Duration;

use crate::gate::ApprovalAnswer;
use crate::hub::error::CoreError;

fn info(id: &str, session: &str, channel: &str) -> PendingInfo {
    PendingInfo {
        request: crate::gate::ApprovalRequest {
            approval_id: id.into(),
            tool: "demo_physical_action".into(),
            tier: crate::tool::Tier::Physical,
            arguments: serde_json::json!({}),
            effect: "moves nothing".into(),
            session_id: session.into(),
            channel: channel.into(),
            tool_use_id: "tu-1".into(),
            timeout: None,
        },
        turn_id: "turn-1".into(),
        asked_at: "now".into(),
        deadline: None,
        held: false,
    }
}

fn held_info(id: &str, session: &str, channel: &str) -> PendingInfo {
    PendingInfo {
        held: true,
        ..info(id, session, channel)
    }
}

#[tokio::test]
async fn a_held_approval_waits_for_whoever_comes_and_any_subscriber_of_its_session_decides() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("routine-lamp"));
    // Asked with nobody attached: it stays pending.
    let mut ticket = registry.register(&bus, held_info("a1", "routine-lamp", "telegram"));
    assert!(registry.is_pending("a1"));
    // A subscriber on another channel comes and goes: still pending.
    let passer = registry.attach(&bus, "routine").unwrap();
    assert_eq!(registry.deciders_besides("a1", ""), 1);
    drop(passer);
    assert!(
        registry.is_pending("a1"),
        "a held approval outlives its viewers"
    );
    // A StartTurn stream of another turn is never shown it.
    let other_turn = registry.attach_turn(&bus, "telegram", "turn-9").unwrap();
    assert_eq!(registry.deciders_besides("a1", ""), 0);
    assert!(matches!(
        registry.decide("a1", ApprovalAnswer::Approve, other_turn.id()),
        Err(DecideError::NotShown { .. })
    ));
    // A subscriber on any channel of the session decides it.
    let terminal = registry.attach(&bus, "terminal").unwrap();
    let outcome = registry
        .decide("a1", ApprovalAnswer::Reject, terminal.id())
        .unwrap();
    assert_eq!(outcome, DecideOutcome::Applied(ApprovalOutcome::Rejected));
    assert_eq!(ticket.wait().await, ApprovalOutcome::Rejected);
    // A subscriber of another session never is shown it.
    let elsewhere = Arc::new(EventBus::new("s-other"));
    let _ticket = registry.register(&bus, held_info("a2", "routine-lamp", "telegram"));
    let stranger = registry.attach(&elsewhere, "telegram").unwrap();
    assert!(matches!(
        registry.decide("a2", ApprovalAnswer::Approve, stranger.id()),
        Err(DecideError::WrongChannel { .. })
    ));
}

#[tokio::test]
async fn a_watch_lists_what_is_pending_then_each_approval_as_asked() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let _first = registry.register(&bus, held_info("a1", "s1", "telegram"));
    let (pending, mut asked) = registry.watch();
    assert_eq!(
        pending
            .iter()
            .map(|p| p.request.approval_id.as_str())
            .collect::<Vec<_>>(),
        ["a1"]
    );
    let _second = registry.register(&bus, held_info("a2", "s1", "cli"));
    let next = asked.recv().await.unwrap();
    assert_eq!(next.request.approval_id, "a2");
    assert_eq!(next.request.channel, "cli");
}

fn kinds(bus: &EventBus) -> Vec<String> {
    bus.buffered_from(1)
        .iter()
        .map(|e| match &e.kind {
            EventKind::ApprovalResolved { resolution, .. } => {
                format!("resolved:{}", resolution.as_str())
            }
            other => other.name().to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn an_attached_client_decides_once() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let terminal = registry.attach(&bus, "terminal").unwrap();
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"));
    assert_eq!(registry.pending_count(), 1);
    assert_eq!(registry.list_pending(Some("s1")).len(), 1);
    assert!(registry.list_pending(Some("other")).is_empty());
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Applied(ApprovalOutcome::Approved))
    );
    assert_eq!(ticket.wait().await, ApprovalOutcome::Approved);
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Reject, terminal.id()),
        Ok(DecideOutcome::AlreadyDecided(ApprovalOutcome::Approved))
    );
    assert_eq!(
        registry.decide("nope", ApprovalAnswer::Reject, terminal.id()),
        Ok(DecideOutcome::NotFound)
    );
    assert_eq!(registry.pending_count(), 0);
    assert_eq!(
        kinds(&bus),
        vec!["approval_requested"],
        "announced once the gate has recorded it"
    );
    registry.confirm("a1", ApprovalOutcome::Approved);
    assert_eq!(kinds(&bus), vec!["approval_requested", "resolved:approved"]);
}

/// An approval whose `approved` record fails ends as `Error` in every report: the event, the
/// decision waiting on it, and every later decision.
#[tokio::test]
async fn an_approval_the_gate_could_not_record_ends_as_an_error_everywhere() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let terminal = registry.attach(&bus, "terminal").unwrap();
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"));
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Applied(ApprovalOutcome::Approved))
    );
    let waiting = {
        let registry = Arc::clone(&registry);
        tokio::spawn(async move { registry.recorded("a1", Duration::from_secs(10)).await })
    };
    assert_eq!(ticket.wait().await, ApprovalOutcome::Approved);
    tokio::task::yield_now().await;
    registry.confirm("a1", ApprovalOutcome::Error);
    assert_eq!(waiting.await.unwrap(), Some(ApprovalOutcome::Error));
    assert_eq!(registry.resolution_of("a1"), Some(ApprovalOutcome::Error));
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Expired(ApprovalOutcome::Error))
    );
    assert_eq!(kinds(&bus), vec!["approval_requested", "resolved:error"]);
    registry.confirm("a1", ApprovalOutcome::Approved);
    assert_eq!(
        kinds(&bus),
        vec!["approval_requested", "resolved:error"],
        "a second confirmation changes nothing"
    );
}

#[tokio::test]
async fn decisions_from_elsewhere_do_not_count() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let other_bus = Arc::new(EventBus::new("s2"));
    let terminal = registry.attach(&bus, "terminal").unwrap();
    let telegram = registry.attach(&bus, "telegram").unwrap();
    let elsewhere = registry.attach(&other_bus, "terminal").unwrap();
    let _ticket = registry.register(&bus, info("a1", "s1", "terminal"));
    assert!(matches!(
        registry.decide("a1", ApprovalAnswer::Approve, telegram.id()),
        Err(DecideError::WrongChannel { .. })
    ));
    assert!(matches!(
        registry.decide("a1", ApprovalAnswer::Approve, elsewhere.id()),
        Err(DecideError::WrongChannel { .. })
    ));
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, "att-forged"),
        Err(DecideError::NotAttached("att-forged".into()))
    );
    assert_eq!(registry.pending_count(), 1);
    drop(terminal);
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, telegram.id()),
        Ok(DecideOutcome::AlreadyDecided(
            ApprovalOutcome::ChannelClosed
        ))
    );
}

#[tokio::test]
async fn the_last_attachment_going_rejects_its_pending_approvals() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let first = registry.attach(&bus, "terminal").unwrap();
    let second = registry.attach(&bus, "terminal").unwrap();
    let telegram = registry.attach(&bus, "telegram").unwrap();
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"));
    let _other = registry.register(&bus, info("a2", "s1", "telegram"));
    drop(first);
    assert_eq!(registry.pending_count(), 2, "one terminal client is left");
    drop(second);
    assert_eq!(ticket.wait().await, ApprovalOutcome::ChannelClosed);
    assert_eq!(registry.list_pending(None)[0].request.approval_id, "a2");
    drop(telegram);
    assert_eq!(registry.pending_count(), 0);
}

#[tokio::test]
async fn asked_where_nobody_is_attached_is_rejected_at_once() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"));
    assert_eq!(ticket.wait().await, ApprovalOutcome::ChannelClosed);
    assert_eq!(
        kinds(&bus),
        vec!["approval_requested", "resolved:channel_closed"]
    );
}

#[tokio::test]
async fn a_dropped_waiter_expires_its_approval() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let terminal = registry.attach(&bus, "terminal").unwrap();
    let ticket = registry.register(&bus, info("a1", "s1", "terminal"));
    drop(ticket);
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Expired(ApprovalOutcome::Cancelled))
    );
    registry.remember_expired("old");
    assert_eq!(
        registry.decide("old", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Expired(ApprovalOutcome::ExpiredByRestart))
    );
}

#[tokio::test]
async fn cancelling_a_session_resolves_its_approvals() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let _terminal = registry.attach(&bus, "terminal").unwrap();
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"));
    registry.cancel_session("s1");
    assert_eq!(ticket.wait().await, ApprovalOutcome::Cancelled);
}

#[test]
fn resolutions_are_remembered_up_to_a_bound() {
    let mut state = State::default();
    for i in 0..=REMEMBERED_RESOLUTIONS {
        state.remember(&format!("a{i}"), ApprovalOutcome::Rejected);
    }
    assert_eq!(state.resolved.len(), REMEMBERED_RESOLUTIONS);
    assert!(!state.resolved.contains_key("a0"));
    assert!(state.resolved.contains_key("a1"));
}

fn turn_info(id: &str, turn_id: &str) -> PendingInfo {
    PendingInfo {
        turn_id: turn_id.into(),
        ..info(id, "s1", "terminal")
    }
}

#[tokio::test]
async fn a_queued_turns_stream_neither_keeps_nor_decides_an_earlier_turns_approval() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let turn_a = registry.attach_turn(&bus, "terminal", "turn-a").unwrap();
    let mut ticket = registry.register(&bus, turn_info("a1", "turn-a"));
    let turn_b = registry.attach_turn(&bus, "terminal", "turn-b").unwrap();
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, turn_b.id()),
        Err(DecideError::NotShown {
            approval_id: "a1".into(),
            attachment_id: turn_b.id().to_owned(),
        })
    );
    drop(turn_a);
    assert_eq!(ticket.wait().await, ApprovalOutcome::ChannelClosed);
    assert_eq!(
        kinds(&bus),
        vec!["approval_requested", "resolved:channel_closed"]
    );
    drop(turn_b);
}

#[tokio::test]
async fn a_turn_asked_while_only_another_turns_stream_is_attached_is_rejected() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let _turn_b = registry.attach_turn(&bus, "terminal", "turn-b").unwrap();
    let mut ticket = registry.register(&bus, turn_info("a1", "turn-a"));
    assert_eq!(ticket.wait().await, ApprovalOutcome::ChannelClosed);
}

#[tokio::test]
async fn a_subscriber_is_shown_what_is_pending_when_it_attaches_and_what_comes_later() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let turn_a = registry.attach_turn(&bus, "terminal", "turn-a").unwrap();
    let _first = registry.register(&bus, turn_info("a1", "turn-a"));
    let watcher = registry.attach(&bus, "terminal").unwrap();
    let _second = registry.register(&bus, turn_info("a2", "turn-x"));
    drop(turn_a);
    assert_eq!(registry.pending_count(), 2, "the subscriber was shown both");
    for id in ["a1", "a2"] {
        assert_eq!(
            registry.decide(id, ApprovalAnswer::Reject, watcher.id()),
            Ok(DecideOutcome::Applied(ApprovalOutcome::Rejected))
        );
    }
}

#[tokio::test]
async fn a_repeated_turn_stream_is_shown_its_turns_pending_approval() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let first = registry.attach_turn(&bus, "terminal", "turn-a").unwrap();
    let _ticket = registry.register(&bus, turn_info("a1", "turn-a"));
    let repeat = registry
        .attach_turn(&bus, "terminal", "turn-fresh")
        .unwrap();
    repeat.show_turn("turn-a");
    drop(first);
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, repeat.id()),
        Ok(DecideOutcome::Applied(ApprovalOutcome::Approved))
    );
}

#[tokio::test]
async fn the_first_resolution_wins_and_every_later_one_learns_it() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let terminal = registry.attach(&bus, "terminal").unwrap();
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"));
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Applied(ApprovalOutcome::Approved))
    );
    assert_eq!(
        registry.settle("a1", ApprovalOutcome::Cancelled),
        Some(ApprovalOutcome::Approved),
        "a cancel after the decision learns the decision"
    );
    assert_eq!(ticket.wait().await, ApprovalOutcome::Approved);
    registry.confirm("a1", ApprovalOutcome::Approved);
    let _ticket = registry.register(&bus, info("a2", "s1", "terminal"));
    assert_eq!(
        registry.settle("a2", ApprovalOutcome::Timeout),
        Some(ApprovalOutcome::Timeout)
    );
    assert_eq!(
        registry.decide("a2", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Expired(ApprovalOutcome::Timeout))
    );
    assert_eq!(
        registry.settle("never-asked", ApprovalOutcome::Timeout),
        None
    );
    assert_eq!(
        kinds(&bus),
        vec![
            "approval_requested",
            "resolved:approved",
            "approval_requested",
            "resolved:timeout"
        ],
        "one resolved event per approval, with the winner"
    );
}

#[tokio::test]
async fn a_pending_approval_is_not_overwritten_by_a_remembered_one() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let terminal = registry.attach(&bus, "terminal").unwrap();
    let _ticket = registry.register(&bus, info("a1", "s1", "terminal"));
    registry.remember_resolved("a1", ApprovalOutcome::ExpiredByRestart);
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Applied(ApprovalOutcome::Approved))
    );
}

#[tokio::test]
async fn attachments_are_bounded_per_session_and_overall() {
    let registry = ApprovalRegistry::with_limits(AttachLimits {
        per_session: 2,
        total: 3,
    });
    let s1 = Arc::new(EventBus::new("s1"));
    let s2 = Arc::new(EventBus::new("s2"));
    let a = registry.attach(&s1, "terminal").unwrap();
    let _b = registry.attach_turn(&s1, "terminal", "t").unwrap();
    assert!(matches!(
        registry.attach(&s1, "terminal"),
        Err(AttachError::TooMany { limit: 2, .. })
    ));
    let _c = registry.attach(&s2, "terminal").unwrap();
    assert!(matches!(
        registry.attach(&s2, "terminal"),
        Err(AttachError::TooMany { limit: 3, .. })
    ));
    assert_eq!(registry.attachment_count(), 3);
    drop(a);
    assert_eq!(registry.attachments_on("s1"), 1);
    assert!(registry.attach(&s1, "terminal").is_ok(), "room again");
}

#[test]
fn only_a_cut_off_attachment_is_a_cut_off_refusal() {
    let cut = CoreError::from(DecideError::CutOff("att-1".into()));
    assert!(matches!(&cut, CoreError::CutOff(m) if m.contains("\"att-1\" was cut off")));
    assert!(matches!(
        CoreError::from(DecideError::NotAttached("att-1".into())),
        CoreError::FailedPrecondition(_)
    ));
}
