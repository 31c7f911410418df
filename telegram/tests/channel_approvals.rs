//! Approval cards against the fake Bot API and the real hub: the owner's tap decides once, every
//! other tap is refused before the hub, an unanswered card times out as rejected, a card that
//! cannot be sent (whatever a 429 asks) times out at its deadline, a card from before a restart
//! never approves. A routine's question is `channel_routines`'.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::fake_bot::{Failure, FakeBot, OWNER, STRANGER, Sent, button};
use support::hub::{RunningChannel, TestHub, config, session_of, start_channel};
use support::logs::Captured;
use tau_api::config::TelegramConfig;
use taud::testing::FakeReply;

fn lamp() -> FakeReply {
    FakeReply::tool_call(
        "demo_physical_action",
        json!({"action": "turn on the <lamp>"}),
    )
}

/// A paired hub whose model asks to turn on the lamp and then says `after`, and a channel running
/// with what `settings` makes of the fake bot's configuration.
async fn paired_channel(
    after: &str,
    settings: impl FnOnce(&mut TelegramConfig),
) -> (FakeBot, TestHub, RunningChannel) {
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![lamp(), FakeReply::text(after)]).await;
    hub.pair_owner();
    let mut config = config(&bot);
    settings(&mut config);
    let channel = start_channel(&hub, config);
    (bot, hub, channel)
}

/// [`paired_channel`] after the owner asked for the lamp, and the card the owner got.
async fn lamp_card(
    after: &str,
    settings: impl FnOnce(&mut TelegramConfig),
) -> (FakeBot, TestHub, RunningChannel, Sent) {
    let (bot, hub, channel) = paired_channel(after, settings).await;
    bot.owner_says("turn on the lamp");
    let card = bot.wait_for_card("demo_physical_action").await;
    (bot, hub, channel, card)
}

/// Waits for the channel's first answer to a tap and asserts it starts with `expected`.
async fn assert_only_answer(bot: &FakeBot, expected: &str) {
    bot.wait_for("a tap answered", |b| (answers(b).len() == 1).then_some(()))
        .await;
    let answers = answers(bot);
    assert!(answers[0].starts_with(expected), "{answers:?}");
}

/// The owner taps button `letter` (`a` approve, `r` reject) of `card`.
fn owner_taps(bot: &FakeBot, card: &Sent, letter: &str) {
    bot.push_tap(
        OWNER,
        OWNER,
        card.message_id,
        1_700_000_001,
        &button(card, letter),
    );
}

/// Waits until the channel asked the fake bot to send the first card.
async fn card_requested(bot: &FakeBot) {
    bot.wait_for("the card's sendMessage", |b| {
        (!b.requests("sendMessage").is_empty()).then_some(())
    })
    .await;
}

fn answers(bot: &FakeBot) -> Vec<String> {
    bot.requests("answerCallbackQuery")
        .iter()
        .map(|b| b["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// The lamp never ran, and its approval is stored as a timeout, not as a person's rejection.
async fn assert_timed_out_unrun(hub: &TestHub) {
    let session = session_of(hub).await;
    assert!(hub.tools_run(&session).await.is_empty());
    let approvals = hub.stored(&session, "approval").await;
    assert!(
        approvals.iter().any(|a| a.contains("\"timeout\"")),
        "recorded as a timeout, not a person's rejection: {approvals:?}"
    );
    assert!(
        !approvals.iter().any(|a| a.contains("\"rejected\"")),
        "{approvals:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_approves_and_the_tool_runs_once_even_on_a_double_tap() {
    let (bot, hub, channel, card) = lamp_card("The lamp is on.", |_| {}).await;
    assert!(
        card.text.contains("&lt;lamp&gt;"),
        "arguments are escaped: {}",
        card.text
    );
    let approve = button(&card, "a");
    bot.push_tap(OWNER, OWNER, card.message_id, 1_700_000_001, &approve);
    bot.push_tap(OWNER, OWNER, card.message_id, 1_700_000_001, &approve);
    bot.wait_for_text("The lamp is on.").await;
    let edited = bot
        .wait_for("two answers", |b| {
            (answers(b).len() == 2).then(|| b.message(card.message_id))
        })
        .await;
    assert!(
        edited.text.starts_with("<b>✅ Approved</b>"),
        "{}",
        edited.text
    );
    assert!(edited.keyboard.is_none(), "the buttons are gone");
    let answered = answers(&bot);
    assert_eq!(answered[0], "✅ Approved");
    assert!(answered[1].starts_with("Already decided"), "{answered:?}");
    let session = session_of(&hub).await;
    assert_eq!(
        hub.tools_run(&session).await.len(),
        1,
        "the tool ran exactly once"
    );
    assert_eq!(
        bot.cards_sent(),
        1,
        "the relay's card only, none from the watch"
    );
    // Every message went out as HTML without link previews.
    for body in bot.requests("sendMessage") {
        assert_eq!(body["link_preview_options"]["is_disabled"], true);
        assert_eq!(body["parse_mode"], "HTML");
    }
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taps_from_strangers_groups_other_messages_or_forged_data_never_reach_the_hub() {
    let (bot, hub, channel, card) = lamp_card("Not done.", |_| {}).await;
    let approve = button(&card, "a");
    let id = card.message_id;
    let date = 1_700_000_001;
    bot.push_tap(STRANGER, OWNER, id, date, &approve);
    bot.push_tap(STRANGER, STRANGER, id, date, &approve);
    bot.push_tap(OWNER, -100_123, id, date, &approve);
    bot.push_tap(OWNER, OWNER, id + 500, date, &approve);
    bot.push_tap(OWNER, OWNER, id, 0, &approve);
    bot.push_tap(OWNER, OWNER, id, date, "v1:000000000000000000000000:a");
    bot.push_tap(OWNER, OWNER, id, date, &approve.replace(":a", ":x"));
    bot.push_tap(OWNER, OWNER, id, date, &"v1:".repeat(40));
    bot.wait_for("eight answers", |b| (answers(b).len() == 8).then_some(()))
        .await;
    assert!(
        answers(&bot).iter().all(|a| a == "Not valid."),
        "{:?}",
        answers(&bot)
    );
    let pending = hub.pending().await;
    assert_eq!(pending.len(), 1, "nothing reached the hub: still pending");
    assert!(
        bot.message(id).keyboard.is_some(),
        "the card still has its buttons"
    );
    // The owner's own reject still works.
    bot.push_tap(OWNER, OWNER, id, date, &button(&card, "r"));
    bot.wait_for_text("Not done.").await;
    bot.wait_for("the card edited to rejected", |b| {
        b.message(id)
            .text
            .starts_with("<b>❌ Rejected</b>")
            .then_some(())
    })
    .await;
    let session = session_of(&hub).await;
    assert!(
        hub.tools_run(&session).await.is_empty(),
        "the tool never ran"
    );
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_card_times_out_and_a_later_tap_changes_nothing() {
    let (bot, hub, channel, card) =
        lamp_card("Timed out.", |c| c.approval_timeout_seconds = 1).await;
    bot.wait_for_text("Timed out.").await;
    let edited = bot
        .wait_for("the card edited", |b| {
            let m = b.message(card.message_id);
            m.keyboard.is_none().then_some(m)
        })
        .await;
    assert!(
        edited.text.starts_with("<b>⌛ Timed out — rejected</b>"),
        "{}",
        edited.text
    );
    assert!(edited.keyboard.is_none());
    owner_taps(&bot, &card, "a");
    assert_only_answer(&bot, "Already decided").await;
    assert_timed_out_unrun(&hub).await;
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_queued_approve_taps_on_old_cards_never_approve() {
    let (bot, hub, channel, card) = lamp_card("Stopped.", |_| {}).await;
    channel.stop().await.unwrap();
    // Taps made while the channel was down arrive in a burst when it polls again.
    let approve = button(&card, "a");
    bot.push_tap(OWNER, OWNER, card.message_id, 1_700_000_001, &approve);
    bot.push_tap(OWNER, OWNER, card.message_id, 1_700_000_001, &approve);
    let channel = start_channel(&hub, config(&bot));
    bot.wait_for("both stale taps answered", |b| {
        (answers(b).len() == 2).then_some(())
    })
    .await;
    assert!(
        answers(&bot).iter().all(|a| a.starts_with("Expired")),
        "{:?}",
        answers(&bot)
    );
    let old = bot.message(card.message_id);
    assert!(old.text.contains("Superseded"), "{}", old.text);
    assert!(old.keyboard.is_none());
    let session = session_of(&hub).await;
    assert!(
        hub.tools_run(&session).await.is_empty(),
        "no stale tap approved"
    );
    assert!(hub.pending().await.is_empty());
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_whose_send_is_under_way_at_a_stop_is_still_known_after_the_restart() {
    let (bot, hub, channel) = paired_channel("Stopped.", |_| {}).await;
    // Telegram takes its time to answer the card's sendMessage; the channel stops meanwhile.
    bot.fail(
        "sendMessage",
        [Failure::Hang(std::time::Duration::from_millis(500))],
    );
    bot.owner_says("turn on the lamp");
    card_requested(&bot).await;
    channel.stop().await.unwrap();
    let card = bot.wait_for_card("demo_physical_action").await;
    let channel = start_channel(&hub, config(&bot));
    owner_taps(&bot, &card, "a");
    assert_only_answer(&bot, "Expired").await;
    assert!(bot.message(card.message_id).keyboard.is_none());
    let session = session_of(&hub).await;
    assert!(hub.tools_run(&session).await.is_empty());
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_a_card_waits_to_be_sent_again_ends_at_once_and_leaves_it_pending() {
    let (bot, hub, channel) = paired_channel("Later.", |_| {}).await;
    bot.fail("sendMessage", [Failure::TooMany { retry_after: 30 }]);
    bot.owner_says("turn on the lamp");
    card_requested(&bot).await;
    let _held = hub.hold_attachment(&session_of(&hub).await).await;
    let stopping = std::time::Instant::now();
    channel.stop().await.unwrap();
    assert!(
        stopping.elapsed() < std::time::Duration::from_secs(10),
        "the stop did not wait out the 30 s retry: {:?}",
        stopping.elapsed()
    );
    assert_eq!(hub.pending().await.len(), 1, "not timed out by the stop");
    assert!(bot.sent().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_still_pending_after_a_restart_gets_a_fresh_card_and_only_that_one_approves() {
    let (bot, hub, channel, card) = lamp_card("On after all.", |_| {}).await;
    let session = session_of(&hub).await;
    let _held = hub.hold_attachment(&session).await;
    channel.stop().await.unwrap();
    assert_eq!(
        hub.pending().await.len(),
        1,
        "the held attachment keeps it pending"
    );
    owner_taps(&bot, &card, "a");
    let channel = start_channel(&hub, config(&bot));
    let fresh = bot
        .wait_for("a fresh card", |b| {
            b.sent()
                .into_iter()
                .find(|m| m.keyboard.is_some() && m.message_id != card.message_id)
        })
        .await;
    assert_only_answer(&bot, "Expired").await;
    assert!(bot.message(card.message_id).text.contains("Superseded"));
    assert_eq!(
        hub.pending().await.len(),
        1,
        "the stale approve did not decide"
    );
    assert!(hub.tools_run(&session).await.is_empty());
    bot.push_tap(
        OWNER,
        OWNER,
        fresh.message_id,
        1_700_000_001,
        &button(&fresh, "a"),
    );
    bot.wait_for("the fresh card approved", |b| {
        b.message(fresh.message_id)
            .text
            .starts_with("<b>✅ Approved</b>")
            .then_some(())
    })
    .await;
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while hub.tools_run(&session).await.is_empty() && std::time::Instant::now() < end {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(hub.tools_run(&session).await.len(), 1);
    assert_eq!(bot.cards_sent(), 2, "the old card and one fresh card");
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_reject_is_forwarded_after_a_restart() {
    let (bot, hub, channel, card) = lamp_card("Left off.", |_| {}).await;
    let session = session_of(&hub).await;
    let _held = hub.hold_attachment(&session).await;
    channel.stop().await.unwrap();
    owner_taps(&bot, &card, "r");
    let channel = start_channel(&hub, config(&bot));
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !hub.pending().await.is_empty() && std::time::Instant::now() < end {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(
        hub.pending().await.is_empty(),
        "the stale reject was forwarded"
    );
    let approvals = hub.stored(&session, "approval").await;
    assert!(
        approvals.iter().any(|a| a.contains("rejected")),
        "{approvals:?}"
    );
    assert!(hub.tools_run(&session).await.is_empty());
    channel.stop().await.unwrap();
}

/// The card's only `sendMessage` is refused with a 429 asking for `retry_after` seconds, longer
/// than the card's whole life: the approval ends as a timeout at its deadline, never before it,
/// and the turn goes on.
async fn undeliverable_card_times_out_at_its_deadline(retry_after: u64) {
    const TIMEOUT: Duration = Duration::from_secs(2);
    let (bot, hub, channel) = paired_channel("Could not ask.", |c| {
        c.approval_timeout_seconds = TIMEOUT.as_secs();
    })
    .await;
    bot.fail("sendMessage", [Failure::TooMany { retry_after }]);
    bot.owner_says("turn on the lamp");
    // The turn goes on after the timeout; a card task that died would leave it waiting.
    bot.wait_for_text("Could not ask.").await;
    assert!(
        bot.sent().iter().all(|m| m.keyboard.is_none()),
        "no card was shown"
    );
    let sends = bot.request_times("sendMessage");
    assert_eq!(sends.len(), 2, "the refused card, then the reply");
    let asked_for = sends[1] - sends[0];
    // The deadline is set a moment before the card's first send.
    assert!(
        asked_for >= TIMEOUT - Duration::from_millis(200),
        "timed out before its deadline: {asked_for:?}"
    );
    assert!(hub.pending().await.is_empty());
    assert_timed_out_unrun(&hub).await;
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_that_cannot_be_delivered_before_its_deadline_times_out() {
    undeliverable_card_times_out_at_its_deadline(30).await;
}

// One thread: the capturing subscriber is this thread's default, and every task runs here.
#[tokio::test]
async fn a_retry_after_too_large_for_any_clock_times_the_card_out_at_its_deadline() {
    let (captured, _guard) = Captured::start();
    undeliverable_card_times_out_at_its_deadline(u64::MAX).await;
    let logs = captured.text();
    assert!(
        logs.lines().any(|line| line.contains("WARN")
            && line.contains("the card could not be sent before its deadline")
            && line.contains("demo_physical_action")),
        "the timeout is reported: {logs}"
    );
    assert!(
        !logs.contains("showing an approval card failed"),
        "the card's task did not die: {logs}"
    );
}

/// The owner pinned in `tau.toml` is two ids: the user whose messages and taps count, and the chat
/// the channel talks in (here a group, whose id is not the user's). The owner's message there
/// starts a turn, the card goes there, and only the owner's tap there decides it; neither the
/// owner's private chat nor a stranger in the group counts, and the pinned chat is never left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_owner_chat_is_where_cards_go_and_only_the_owners_tap_there_decides() {
    const GROUP: i64 = -100_555;
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![lamp(), FakeReply::text("The lamp is on.")]).await;
    let mut config = config(&bot);
    config.owner_user_id = Some(OWNER);
    config.owner_chat_id = Some(GROUP);
    let channel = start_channel(&hub, config);
    bot.push_text(OWNER, OWNER, "private", "turn on the lamp");
    bot.push_text(STRANGER, GROUP, "group", "turn on the lamp");
    bot.push_text(OWNER, GROUP, "group", "turn on the lamp");
    let card = bot.wait_for_card("demo_physical_action").await;
    assert_eq!(card.chat_id, GROUP, "the card is in the pinned chat");
    let approve = button(&card, "a");
    let date = 1_700_000_001;
    bot.push_tap(STRANGER, GROUP, card.message_id, date, &approve);
    bot.push_tap(OWNER, OWNER, card.message_id, date, &approve);
    bot.wait_for("two answers", |b| (answers(b).len() == 2).then_some(()))
        .await;
    assert!(
        answers(&bot).iter().all(|a| a == "Not valid."),
        "{:?}",
        answers(&bot)
    );
    assert_eq!(hub.pending().await.len(), 1, "nothing reached the hub");
    bot.push_tap(OWNER, GROUP, card.message_id, date, &approve);
    let reply = bot.wait_for_text("The lamp is on.").await;
    assert_eq!(reply.chat_id, GROUP);
    let session = session_of(&hub).await;
    assert_eq!(hub.tools_run(&session).await.len(), 1, "one turn, run once");
    assert!(
        bot.requests("leaveChat").is_empty(),
        "the pinned chat is never left"
    );
    for body in bot.requests("sendMessage") {
        assert_eq!(body["chat_id"], GROUP, "{body}");
    }
    channel.stop().await.unwrap();
}
