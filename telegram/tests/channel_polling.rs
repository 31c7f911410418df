//! The long-poll loop against the fake Bot API: the offset is persisted, a 429's retry_after is
//! waited out (and a stop ends the wait at once, however long it is), a 409 stops the
//! run and says so, a refused token stops it, and the token appears in no log line or error after
//! a forced network failure; an update id out of range is dropped, never overflowing the offset.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use support::fake_bot::{Failure, FakeBot, TEST_TOKEN};
use support::hub::{TestHub, config, start_channel, start_channel_with_token};
use support::logs::Captured;
use tau_telegram::ChannelError;

fn help_replies(bot: &FakeBot) -> usize {
    bot.sent()
        .iter()
        .filter(|m| m.text.contains("/sessions"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offset_is_persisted_and_no_update_is_handled_twice_after_a_restart() {
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![]).await;
    hub.pair_owner();
    let channel = start_channel(&hub, config(&bot));
    let first = bot.owner_says("/help");
    bot.wait_for("the help", |b| (help_replies(b) == 1).then_some(()))
        .await;
    channel.stop().await.unwrap();
    let stored = tau_telegram::state::read_offset(&hub.state_paths()).unwrap();
    assert_eq!(stored, first + 1);
    let channel = start_channel(&hub, config(&bot));
    bot.owner_says("/help");
    bot.wait_for("the second help", |b| (help_replies(b) == 2).then_some(()))
        .await;
    // One more poll round: the first /help is not answered again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(help_replies(&bot), 2);
    assert_eq!(
        bot.requests("getUpdates").last().unwrap()["offset"],
        first + 2
    );
    channel.stop().await.unwrap();
}

/// An `update_id` from outside that is out of range (here `i64::MAX`, whose successor overflows)
/// is dropped: the poller neither panics nor wraps its offset, and goes on with the next update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_id_out_of_range_is_dropped_without_panicking_or_wrapping_the_offset() {
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![]).await;
    hub.pair_owner();
    let channel = start_channel(&hub, config(&bot));
    bot.owner_says("/help");
    bot.owner_says_as(i64::MAX, "/help");
    bot.wait_for("the help", |b| (help_replies(b) == 1).then_some(()))
        .await;
    let next = bot.owner_says("/help");
    bot.wait_for("the next help", |b| (help_replies(b) == 2).then_some(()))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(help_replies(&bot), 2, "the out-of-range update was dropped");
    let stored = tau_telegram::state::read_offset(&hub.state_paths()).unwrap();
    assert_eq!(stored, next + 1);
    assert!(!channel.task.is_finished(), "the poller goes on");
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_waits_exactly_its_retry_after() {
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![]).await;
    hub.pair_owner();
    bot.fail("getUpdates", [Failure::TooMany { retry_after: 2 }]);
    let channel = start_channel(&hub, config(&bot));
    bot.wait_for("a second poll", |b| {
        (b.request_times("getUpdates").len() >= 2).then_some(())
    })
    .await;
    let times = bot.request_times("getUpdates");
    let gap = times[1] - times[0];
    assert!(gap >= Duration::from_secs(2), "waited only {gap:?}");
    assert!(gap < Duration::from_secs(4), "waited {gap:?}");
    channel.stop().await.unwrap();
}

/// A 429 asking for ever puts the poller in a pause that a stop ends at once, with no poll after
/// it. (That the pause lasts at most `MAX_RETRY_AFTER` is the poller's unit test, on a paused
/// clock: waiting out the real minute here made this the slowest test of the workspace.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_asking_for_ever_is_ended_at_once_by_a_stop() {
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![]).await;
    hub.pair_owner();
    bot.fail(
        "getUpdates",
        [Failure::TooMany {
            retry_after: u64::MAX,
        }],
    );
    let channel = start_channel(&hub, config(&bot));
    bot.wait_for("the first poll", |b| {
        (!b.request_times("getUpdates").is_empty()).then_some(())
    })
    .await;
    // Long enough for the poller to read the 429 and start its pause.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stopping = Instant::now();
    channel.stop().await.unwrap();
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "the stop waited out the 429: {:?}",
        stopping.elapsed()
    );
    assert_eq!(
        bot.requests("getUpdates").len(),
        1,
        "no poll during the pause nor after the stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_409_stops_polling_and_is_reported_without_spinning() {
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![]).await;
    hub.pair_owner();
    bot.fail("getUpdates", [Failure::Conflict]);
    let channel = start_channel(&hub, config(&bot));
    let err = channel.ended().await.unwrap_err();
    assert!(err.is_final());
    assert!(matches!(err, ChannelError::Conflict(_)), "{err}");
    assert!(
        err.to_string().contains("another process polls this bot"),
        "{err}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(bot.requests("getUpdates").len(), 1, "no second poll");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_ends_the_run_without_naming_the_token() {
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![]).await;
    let wrong = "999:WRONG-secret-token";
    let channel = start_channel_with_token(&hub, config(&bot), wrong);
    let err = channel.ended().await.unwrap_err();
    assert!(err.is_final(), "{err}");
    assert!(!err.to_string().contains(wrong), "{err}");
    assert!(!format!("{err:?}").contains("WRONG-secret"), "{err:?}");
}

// One thread: the capturing subscriber is this thread's default, and every task runs here.
#[tokio::test]
async fn the_token_never_appears_in_logs_or_errors_after_a_network_failure() {
    let (captured, _guard) = Captured::start();
    let hub = TestHub::start(vec![]).await;
    hub.pair_owner();
    // A port nobody listens on: every call fails to connect.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut settings = config(&FakeBot::start().await);
    settings.api_base = format!("http://127.0.0.1:{port}");
    let channel = start_channel(&hub, settings);
    let end = Instant::now() + Duration::from_secs(20);
    while !captured.text().contains("getUpdates failed") {
        assert!(Instant::now() < end, "no failure logged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    channel.stop().await.unwrap();
    let logs = captured.text();
    assert!(logs.contains("could not be reached"), "{logs}");
    assert!(!logs.contains(TEST_TOKEN), "the token leaked: {logs}");
    assert!(
        !logs.contains("TEST-token"),
        "part of the token leaked: {logs}"
    );
    assert!(
        !logs.contains(&format!("127.0.0.1:{port}/bot")),
        "a URL leaked: {logs}"
    );
}
