//! Tests of the approval registry: decisions, attachments, closed channels, expiry.

use super::*;

fn info(id: &str, session: &str, channel: &str) -> PendingInfo {
    PendingInfo {
        approval_id: id.into(),
        session_id: session.into(),
        turn_id: "turn-1".into(),
        channel: channel.into(),
        tool: "demo_physical_action".into(),
        tier: 2,
        arguments: "{}".into(),
        effect: "moves nothing".into(),
        tool_use_id: "tu-1".into(),
        asked_at: "now".into(),
        deadline: None,
    }
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
    let terminal = registry.attach(&bus, "terminal");
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"), None);
    assert_eq!(registry.pending_count(), 1);
    assert_eq!(registry.list_pending(Some("s1")).len(), 1);
    assert!(registry.list_pending(Some("other")).is_empty());
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Applied(Resolution::Approved))
    );
    assert_eq!(ticket.wait().await, Resolution::Approved);
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Reject, terminal.id()),
        Ok(DecideOutcome::AlreadyDecided(Resolution::Approved))
    );
    assert_eq!(
        registry.decide("nope", ApprovalAnswer::Reject, terminal.id()),
        Ok(DecideOutcome::NotFound)
    );
    assert_eq!(registry.pending_count(), 0);
    assert_eq!(kinds(&bus), vec!["approval_requested", "resolved:approved"]);
}

#[tokio::test]
async fn decisions_from_elsewhere_do_not_count() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let other_bus = Arc::new(EventBus::new("s2"));
    let terminal = registry.attach(&bus, "terminal");
    let telegram = registry.attach(&bus, "telegram");
    let elsewhere = registry.attach(&other_bus, "terminal");
    let _ticket = registry.register(&bus, info("a1", "s1", "terminal"), None);
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
        Ok(DecideOutcome::AlreadyDecided(Resolution::ChannelClosed))
    );
}

#[tokio::test]
async fn the_last_attachment_going_rejects_its_pending_approvals() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let first = registry.attach(&bus, "terminal");
    let second = registry.attach(&bus, "terminal");
    let telegram = registry.attach(&bus, "telegram");
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"), None);
    let _other = registry.register(&bus, info("a2", "s1", "telegram"), None);
    drop(first);
    assert_eq!(registry.pending_count(), 2, "one terminal client is left");
    drop(second);
    assert_eq!(ticket.wait().await, Resolution::ChannelClosed);
    assert_eq!(registry.list_pending(None)[0].approval_id, "a2");
    drop(telegram);
    assert_eq!(registry.pending_count(), 0);
}

#[tokio::test]
async fn asked_where_nobody_is_attached_is_rejected_at_once() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"), None);
    assert_eq!(ticket.wait().await, Resolution::ChannelClosed);
    assert_eq!(
        kinds(&bus),
        vec!["approval_requested", "resolved:channel_closed"]
    );
}

#[tokio::test]
async fn a_dropped_waiter_expires_its_approval() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let terminal = registry.attach(&bus, "terminal");
    let ticket = registry.register(&bus, info("a1", "s1", "terminal"), None);
    drop(ticket);
    assert_eq!(
        registry.decide("a1", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Expired(Resolution::Cancelled))
    );
    // A waiter dropped when its timeout has run out: a timeout, not a cancel.
    let ticket = registry.register(&bus, info("a2", "s1", "terminal"), Some(Duration::ZERO));
    drop(ticket);
    assert_eq!(registry.resolution_of("a2"), Some(Resolution::Timeout));
    registry.remember_expired("old");
    assert_eq!(
        registry.decide("old", ApprovalAnswer::Approve, terminal.id()),
        Ok(DecideOutcome::Expired(Resolution::ExpiredByRestart))
    );
}

#[tokio::test]
async fn cancelling_a_session_resolves_its_approvals() {
    let registry = ApprovalRegistry::new();
    let bus = Arc::new(EventBus::new("s1"));
    let _terminal = registry.attach(&bus, "terminal");
    let mut ticket = registry.register(&bus, info("a1", "s1", "terminal"), None);
    registry.cancel_session("s1");
    assert_eq!(ticket.wait().await, Resolution::Cancelled);
}

#[test]
fn resolutions_are_remembered_up_to_a_bound() {
    let mut state = State::default();
    for i in 0..=REMEMBERED_RESOLUTIONS {
        state.remember(&format!("a{i}"), Resolution::Rejected);
    }
    assert_eq!(state.resolved.len(), REMEMBERED_RESOLUTIONS);
    assert!(!state.resolved.contains_key("a0"));
    assert!(state.resolved.contains_key("a1"));
}
