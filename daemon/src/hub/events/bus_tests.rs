//! The event bus alone: order, replay within its budget, lag and resumption.

use super::*;

fn text(bus: &EventBus, s: &str) -> Arc<SessionEvent> {
    bus.publish(Some("t1"), EventKind::TextDelta(s.into()))
}

async fn take(sub: &mut Subscription, n: usize) -> Vec<u64> {
    let mut seqs = Vec::new();
    for _ in 0..n {
        seqs.push(sub.next().await.unwrap().unwrap().seq);
    }
    seqs
}

#[tokio::test]
async fn seqs_are_contiguous_and_subscribers_see_the_same_events() {
    let bus = EventBus::new("s");
    let mut a = bus.subscribe(None).unwrap();
    let mut b = bus.subscribe(None).unwrap();
    for i in 0..5 {
        assert_eq!(text(&bus, &i.to_string()).seq, i + 1);
    }
    assert_eq!(take(&mut a, 5).await, vec![1, 2, 3, 4, 5]);
    assert_eq!(take(&mut b, 5).await, vec![1, 2, 3, 4, 5]);
    assert_eq!(bus.last_seq(), 5);
}

#[tokio::test]
async fn after_seq_replays_the_buffer_then_goes_live() {
    let bus = EventBus::new("s");
    for i in 0..4 {
        text(&bus, &i.to_string());
    }
    let (last, mut sub) = bus.subscribe_with(Some(2), |last| last).unwrap();
    assert_eq!(last, 4);
    text(&bus, "live");
    assert_eq!(take(&mut sub, 3).await, vec![3, 4, 5]);
    // No after_seq replays nothing.
    let mut fresh = bus.subscribe(None).unwrap();
    text(&bus, "next");
    assert_eq!(take(&mut fresh, 1).await, vec![6]);
    // after_seq = last replays nothing either.
    let mut at_end = bus.subscribe(Some(6)).unwrap();
    text(&bus, "again");
    assert_eq!(take(&mut at_end, 1).await, vec![7]);
}

/// A resumption carries the newest reply and reasoning deltas up to its point, of the turn
/// whose delta came last, oldest first; a fresh subscription, or a point before any delta of
/// that turn, carries none of another turn's.
#[test]
fn a_resumption_carries_the_last_deltas_before_it() {
    let bus = EventBus::new("s");
    let lead = |after| {
        let mut sub = bus.subscribe(Some(after)).unwrap();
        let texts: Vec<(u64, String)> = sub
            .take_lead()
            .iter()
            .map(|e| match &e.kind {
                EventKind::TextDelta(t) | EventKind::ReasoningDelta(t) => (e.seq, t.clone()),
                _ => (e.seq, String::new()),
            })
            .collect();
        assert!(sub.take_lead().is_empty(), "taken once");
        texts
    };
    bus.publish(Some("t1"), EventKind::TextDelta("one".into())); // 1
    bus.publish(Some("t2"), EventKind::ReasoningDelta("think".into())); // 2
    bus.publish(Some("t2"), EventKind::TextDelta("I \u{2764}".into())); // 3
    bus.publish(Some("t2"), EventKind::TextDelta(String::new())); // 4
    let tool = |id: &str| EventKind::ToolUseStarted {
        tool_use_id: id.into(),
        name: "lamp".into(),
    };
    bus.publish(Some("t2"), tool("u1")); // 5
    bus.publish(Some("t3"), tool("u2")); // 6
    assert_eq!(lead(1), vec![(1, "one".into())]);
    assert_eq!(lead(2), vec![(2, "think".into())]);
    assert_eq!(
        lead(6),
        vec![(2, "think".into()), (3, "I \u{2764}".into())],
        "the empty delta and the events that are not deltas are passed over"
    );
    bus.publish(Some("t3"), EventKind::TextDelta("x".into())); // 7
    assert_eq!(
        lead(7),
        vec![(7, "x".into())],
        "t2's deltas end at t3's first"
    );
    assert!(bus.subscribe(None).unwrap().take_lead().is_empty());
}

#[test]
fn resumption_outside_the_buffer_is_refused() {
    let bus = EventBus::with_capacity("s", 3, 8);
    for i in 0..6 {
        text(&bus, &i.to_string());
    }
    assert_eq!(
        bus.subscribe(Some(9)).unwrap_err(),
        SubscribeError::Ahead {
            after_seq: 9,
            last_seq: 6
        }
    );
    assert_eq!(
        bus.subscribe(Some(2)).unwrap_err(),
        SubscribeError::NoLongerBuffered {
            after_seq: 2,
            oldest: 4
        }
    );
    assert!(bus.subscribe(Some(3)).is_ok());
    assert!(bus.subscribe(Some(0)).is_err(), "seq 1 is gone");
    bus.clear_buffer();
    assert_eq!(bus.oldest_buffered(), None);
    assert!(matches!(
        bus.subscribe(Some(5)),
        Err(SubscribeError::NoLongerBuffered { oldest: 7, .. })
    ));
    assert_eq!(text(&bus, "x").seq, 7);
}

#[tokio::test]
async fn a_slow_subscriber_is_cut_off_and_never_blocks_publishing() {
    let bus = EventBus::with_capacity("s", 64, 4);
    let mut slow = bus.subscribe(None).unwrap();
    for i in 0..20 {
        text(&bus, &i.to_string());
    }
    assert_eq!(bus.last_seq(), 20, "publishing did not wait");
    let lagged = slow.next().await.unwrap_err();
    assert_eq!(lagged.resume_after_seq, 0);
    // It resumes from the buffer where it left off.
    let mut resumed = bus.subscribe(Some(lagged.resume_after_seq)).unwrap();
    let seqs = take(&mut resumed, 20).await;
    assert_eq!(seqs, (1..=20).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_lag_reports_the_last_delivered_seq() {
    let bus = EventBus::with_capacity("s", 64, 2);
    let mut sub = bus.subscribe(None).unwrap();
    text(&bus, "1");
    assert_eq!(take(&mut sub, 1).await, vec![1]);
    for i in 0..10 {
        text(&bus, &i.to_string());
    }
    assert_eq!(sub.next().await.unwrap_err().resume_after_seq, 1);
    let mut again = bus.subscribe(Some(1)).unwrap();
    assert_eq!(take(&mut again, 10).await, (2..=11).collect::<Vec<_>>());
}

#[tokio::test]
async fn publish_with_orders_changes_like_the_seq() {
    let bus = EventBus::new("s");
    let state = Mutex::new(0u32);
    let seen = bus.publish_with(|next| {
        assert_eq!(next, 1);
        *state.lock().unwrap() += 1;
        (Some((None, EventKind::TextDelta("changed".into()))), 7)
    });
    assert_eq!(seen, 7);
    let nothing: () = bus.publish_with(|_| (None, ()));
    let () = nothing;
    let (snapshot, mut sub) = bus
        .subscribe_with(None, |last| (last, *state.lock().unwrap()))
        .unwrap();
    assert_eq!(snapshot, (1, 1));
    text(&bus, "after");
    assert_eq!(take(&mut sub, 1).await, vec![2]);
}

#[tokio::test]
async fn a_continuing_bus_numbers_on() {
    let bus = EventBus::continuing("s", 8, 8, 41);
    assert_eq!(bus.last_seq(), 41);
    assert!(matches!(
        bus.subscribe(Some(40)),
        Err(SubscribeError::NoLongerBuffered { .. })
    ));
    let mut sub = bus.subscribe(Some(41)).unwrap();
    assert_eq!(text(&bus, "x").seq, 42);
    assert_eq!(take(&mut sub, 1).await, vec![42]);
}

#[test]
fn the_replay_buffer_never_holds_more_than_its_bytes() {
    let bus = EventBus::new("s");
    let chunk = "x".repeat(4096);
    for _ in 0..DEFAULT_REPLAY_BUFFER {
        text(&bus, &chunk);
        assert!(bus.buffered().1 <= REPLAY_BUFFER_BYTES);
    }
    let (events, bytes) = bus.buffered();
    assert!(events < DEFAULT_REPLAY_BUFFER, "the bytes bound first");
    assert!(bytes > REPLAY_BUFFER_BYTES - 2 * chunk.len());
    // The newest events stay, contiguous.
    let last = bus.last_seq();
    assert_eq!(bus.oldest_buffered(), Some(last + 1 - events as u64));
    assert!(bus.subscribe(Some(last - events as u64)).is_ok());
    assert!(bus.subscribe(Some(last - events as u64 - 1)).is_err());
}

#[test]
fn trimming_keeps_the_newest_events_within_the_idle_bytes() {
    let bus = EventBus::new("s");
    for i in 0..500 {
        text(&bus, &format!("delta number {i} of a long answer"));
    }
    bus.trim_to(IDLE_REPLAY_BYTES);
    let (events, bytes) = bus.buffered();
    assert!(bytes <= IDLE_REPLAY_BYTES && events > 0);
    let counted: usize = bus
        .buffered_from(0)
        .iter()
        .map(|e| e.estimated_bytes())
        .sum();
    assert_eq!(counted, bytes, "the running count is exact");
    assert_eq!(bus.oldest_buffered(), Some(501 - events as u64));
    assert!(matches!(
        bus.subscribe(Some(1)),
        Err(SubscribeError::NoLongerBuffered { .. })
    ));
    assert_eq!(text(&bus, "after").seq, 501);
}

#[test]
fn dropping_before_a_seq_keeps_the_rest() {
    let bus = EventBus::new("s");
    for i in 0..10 {
        text(&bus, &i.to_string());
    }
    let before = bus.buffered().1;
    bus.drop_before(7);
    assert_eq!(bus.oldest_buffered(), Some(7));
    let (events, bytes) = bus.buffered();
    assert_eq!(events, 4);
    assert!(bytes < before);
    assert!(bus.subscribe(Some(6)).is_ok());
    assert!(bus.subscribe(Some(5)).is_err());
}

#[tokio::test]
async fn the_fan_out_is_held_only_while_someone_subscribes() {
    let bus = EventBus::new("s");
    text(&bus, "nobody");
    assert!(bus.lock().sender.is_none(), "no subscriber, no channel");
    let mut sub = bus.subscribe(None).unwrap();
    assert_eq!(bus.subscriber_count(), 1);
    text(&bus, "one");
    assert_eq!(take(&mut sub, 1).await, vec![2]);
    drop(sub);
    assert_eq!(bus.subscriber_count(), 0);
    text(&bus, "gone");
    assert!(bus.lock().sender.is_none(), "freed by the next publish");
    let quiet = bus.subscribe(None).unwrap();
    drop(quiet);
    bus.trim_to(IDLE_REPLAY_BYTES);
    assert!(bus.lock().sender.is_none(), "or by a trim");
    // A later subscriber gets a channel of its own, and resumes from the buffer.
    let mut again = bus.subscribe(Some(1)).unwrap();
    text(&bus, "back");
    assert_eq!(take(&mut again, 3).await, vec![2, 3, 4]);
}

#[tokio::test]
async fn a_dropped_bus_ends_its_subscriptions() {
    let bus = EventBus::new("s");
    let mut sub = bus.subscribe(None).unwrap();
    drop(bus);
    assert_eq!(sub.next().await, Ok(None));
}
