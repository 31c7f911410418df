//! The owner's conversation against the fake Bot API and the real hub: pairing with a one-time
//! code, replies streamed into one message and split past 4,096 characters, the chat's session
//! kept across restarts, `/new`, groups left, cards that survive 429s and unanswerable taps, and
//! a turn whose first message never comes given up at the relay's call timeout.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::json;
use support::fake_bot::{Failure, FakeBot, OWNER, STRANGER, TEST_TOKEN, button};
use support::hub::{TestHub, config, session_of, start_channel, start_channel_with};
use tau_telegram::ChannelPhase;
use tau_telegram::hub_link::CALL_TIMEOUT;
use taud::testing::FakeReply;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pairing_binds_the_owner_by_numeric_ids_and_only_the_owner_reaches_the_hub() {
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![FakeReply::text("Hello, owner.")]).await;
    let mut channel = start_channel(&hub, config(&bot));
    channel
        .phase
        .wait_for(|p| *p == ChannelPhase::NotPaired)
        .await
        .unwrap();
    // Before pairing: a plain message is told how to pair and never reaches the hub.
    bot.push_text(STRANGER, STRANGER, "private", "hi");
    bot.wait_for_text("not paired yet").await;
    bot.push_text(STRANGER, STRANGER, "private", "/start GUESSED");
    bot.wait_for_text("That code is not valid").await;
    let code = tau_telegram::state::issue_pairing_code(
        &hub.state_paths(),
        jiff::Timestamp::now().as_second(),
    )
    .unwrap();
    bot.owner_says(&format!("/start {}", code.code));
    bot.wait_for_text("Paired.").await;
    channel
        .phase
        .wait_for(|p| *p == ChannelPhase::Running)
        .await
        .unwrap();
    let owner = tau_telegram::state::read_owner(&hub.state_paths())
        .unwrap()
        .unwrap();
    assert_eq!((owner.user_id, owner.chat_id), (OWNER, OWNER));
    let mode = std::fs::metadata(&hub.state_paths().owner)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // The used code cannot pair anyone else.
    bot.push_text(
        STRANGER,
        STRANGER,
        "private",
        &format!("/start {}", code.code),
    );
    bot.push_text(STRANGER, STRANGER, "private", "let me in");
    bot.owner_says("hello");
    bot.wait_for_text("Hello, owner.").await;
    assert_eq!(
        hub.model.call_count(),
        1,
        "only the owner's message became a turn"
    );
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_keeps_its_session_across_restarts_and_new_starts_another() {
    let bot = FakeBot::start().await;
    let hub = TestHub::start(vec![
        FakeReply::deltas(["Hel", "lo ", "<b>one</b>"]),
        FakeReply::text("two"),
        FakeReply::text("three"),
    ])
    .await;
    hub.pair_owner();
    let channel = start_channel(&hub, config(&bot));
    bot.owner_says("first");
    let reply = bot.wait_for_text("Hello &lt;b&gt;one&lt;/b&gt;").await;
    assert_eq!(reply.chat_id, OWNER);
    let session = session_of(&hub).await;
    channel.stop().await.unwrap();
    let channel = start_channel(&hub, config(&bot));
    bot.owner_says("second");
    bot.wait_for_text("two").await;
    assert_eq!(session_of(&hub).await, session, "resumed after the restart");
    let second = hub.model.last_request().unwrap();
    assert!(
        format!("{:?}", second.messages).contains("first"),
        "the second turn saw the first"
    );
    bot.owner_says("/new");
    bot.wait_for_text("New conversation started.").await;
    assert_ne!(session_of(&hub).await, session);
    bot.owner_says("third");
    bot.wait_for_text("three").await;
    bot.owner_says("/sessions");
    bot.wait_for_text("1. first").await;
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_is_split_under_the_limit_and_groups_are_left() {
    let bot = FakeBot::start().await;
    let long = format!("{}{}", "a".repeat(4000), "b".repeat(2000));
    let hub = TestHub::start(vec![FakeReply::text(long)]).await;
    hub.pair_owner();
    let channel = start_channel(&hub, config(&bot));
    bot.push_text(OWNER, -100_777, "group", "hi group");
    bot.wait_for("leaveChat", |b| {
        (!b.requests("leaveChat").is_empty()).then_some(())
    })
    .await;
    bot.owner_says("write a lot");
    let second = bot
        .wait_for("the second part", |b| {
            b.sent().into_iter().find(|m| m.text.starts_with("bbbb"))
        })
        .await;
    let first = bot.wait_for_text("aaaa").await;
    assert_ne!(first.message_id, second.message_id);
    assert_eq!(
        first.text.chars().count() + second.text.chars().count(),
        6000
    );
    for m in bot.sent() {
        assert!(m.text.chars().count() <= 4096);
    }
    assert_eq!(
        hub.model.call_count(),
        1,
        "the group message never became a turn"
    );
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_survives_429s_and_a_tap_too_old_to_answer_still_decides_and_edits() {
    let bot = FakeBot::start().await;
    let hostile = format!(
        "\u{202E}evil\u{1b}[2J<script>x</script>{}",
        "z".repeat(5000)
    );
    let hub = TestHub::start(vec![
        FakeReply::tool_call("demo_physical_action", json!({"action": hostile})),
        FakeReply::text("ok"),
    ])
    .await;
    hub.pair_owner();
    let channel = start_channel(&hub, config(&bot));
    bot.fail(
        "sendMessage",
        [
            Failure::TooMany { retry_after: 1 },
            Failure::TooMany { retry_after: 1 },
        ],
    );
    bot.owner_says("do it");
    let card = bot.wait_for_card("demo_physical_action").await;
    assert!(
        !card.text.contains('\u{202E}') && !card.text.contains('\u{1b}'),
        "{}",
        card.text
    );
    assert!(card.text.contains("&lt;script&gt;") && !card.text.contains("<script>"));
    assert!(card.text.contains("truncated:"), "{}", card.text);
    assert!(card.text.chars().count() <= 4096);
    bot.fail(
        "answerCallbackQuery",
        [Failure::Bad(
            "Bad Request: query is too old and response timeout expired or query ID is invalid",
        )],
    );
    bot.push_tap(
        OWNER,
        OWNER,
        card.message_id,
        1_700_000_001,
        &button(&card, "a"),
    );
    bot.wait_for_text("ok").await;
    let edited = bot
        .wait_for("the card edited", |b| {
            let m = b.message(card.message_id);
            m.keyboard.is_none().then_some(m)
        })
        .await;
    assert!(
        edited.text.starts_with("<b>✅ Approved</b>"),
        "{}",
        edited.text
    );
    assert!(edited.keyboard.is_none());
    // The demo tool refuses so long an action, but the call was approved, once.
    let session = session_of(&hub).await;
    let calls = hub.stored(&session, "tool_call").await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].contains("approved"), "{calls:?}");
    channel.stop().await.unwrap();
}

/// A hub that takes StartTurn (its headers come) and then sends nothing: the relay gives up at its
/// call timeout and tells the owner the turn failed, instead of holding the message for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_whose_first_message_never_comes_is_given_up_at_the_call_timeout() {
    let bot = FakeBot::start().await;
    let hub = TestHub::start_silent_turns().await;
    hub.pair_owner();
    let timeout = Duration::from_millis(500);
    let mut channel = start_channel_with(&hub, config(&bot), TEST_TOKEN, timeout);
    channel
        .phase
        .wait_for(|p| *p == ChannelPhase::Running)
        .await
        .unwrap();
    let asked = Instant::now();
    bot.owner_says("are you there?");
    let failed = bot.wait_for_text("The turn could not start").await;
    let waited = asked.elapsed();
    assert!(
        failed.text.contains("the hub did not answer within 500ms"),
        "{}",
        failed.text
    );
    assert_eq!(failed.chat_id, OWNER);
    // Its own timeout, not the default one.
    assert!(waited >= timeout && waited < CALL_TIMEOUT, "{waited:?}");
    channel.stop().await.unwrap();
}
