//! A routine's question on channel `telegram` against the fake Bot API and the real hub: it
//! reaches the owner as a card (approved, it runs), the card lives as long as the hub holds the
//! question (however short the channel's own card timeout), an unanswered one ends at the hub's
//! deadline and shows so, the next firing goes on, and with no owner it waits, logged once.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::fake_bot::{FakeBot, OWNER, Sent, button};
use support::hub::{RunningChannel, TestHub, config, next_asked, start_channel};
use support::logs::Captured;
use tau_api::config::TelegramConfig;
use taud::testing::FakeReply;

fn lamp() -> FakeReply {
    FakeReply::tool_call(
        "demo_physical_action",
        json!({"action": "turn on the <lamp>"}),
    )
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

/// A hub with routines on, whose routine questions are held for `hold`, the owner paired, and the
/// channel running.
async fn routine_channel(
    replies: Vec<FakeReply>,
    hold: Duration,
) -> (FakeBot, TestHub, RunningChannel) {
    routine_channel_with(replies, hold, |_| {}).await
}

/// [`routine_channel`] with what `settings` makes of the channel's configuration.
async fn routine_channel_with(
    replies: Vec<FakeReply>,
    hold: Duration,
    settings: impl FnOnce(&mut TelegramConfig),
) -> (FakeBot, TestHub, RunningChannel) {
    let bot = FakeBot::start().await;
    let hub = TestHub::start_with_routines(replies, hold).await;
    hub.pair_owner();
    let mut config = config(&bot);
    settings(&mut config);
    let channel = start_channel(&hub, config);
    hub.add_prompt_routine("lamp", "Turn on the lamp.", "telegram")
        .await;
    (bot, hub, channel)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routines_question_reaches_the_owner_as_a_card_and_the_approve_runs_it() {
    let (bot, hub, channel) = routine_channel(
        vec![lamp(), FakeReply::text("The lamp is on.")],
        Duration::from_secs(60),
    )
    .await;
    let firing = hub.run_routine("lamp").await;
    let card = bot.wait_for_card("demo_physical_action").await;
    assert_eq!(card.chat_id, OWNER, "the card is in the owner's chat");
    let pending = hub.pending().await;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let asked = &pending[0];
    assert_eq!(asked.session_id, "routine-lamp");
    assert_eq!(asked.channel, "telegram");
    assert!(asked.held, "asked by a turn nobody attached started");
    assert!(!asked.effect.is_empty());
    assert!(
        card.text
            .contains(&tau_telegram::render::escape_html(&asked.effect)),
        "the card shows the effect: {}",
        card.text
    );
    assert!(
        card.text.contains("&lt;lamp&gt;"),
        "the card shows the escaped arguments: {}",
        card.text
    );
    owner_taps(&bot, &card, "a");
    let edited = bot
        .wait_for("the card edited to approved", |b| {
            let m = b.message(card.message_id);
            m.keyboard.is_none().then_some(m)
        })
        .await;
    assert!(
        edited.text.starts_with("<b>✅ Approved</b>"),
        "{}",
        edited.text
    );
    let ended = hub.ended_firing("lamp", firing).await;
    assert_eq!(ended.outcome, "succeeded", "{}", ended.detail);
    assert_eq!(ended.detail, "The lamp is on.");
    assert_eq!(hub.tools_run("routine-lamp").await.len(), 1, "the tool ran");
    let approvals = hub.stored("routine-lamp", "approval").await;
    assert!(
        approvals.iter().any(|a| a.contains("\"approved\"")),
        "{approvals:?}"
    );
    assert_eq!(bot.cards_sent(), 1, "one card for one question");
    channel.stop().await.unwrap();
}

/// The card's own timeout (1 s here) is shorter than the hub's hold of a routine's question: the
/// card lives as long as the question, so the owner can still answer it after that second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routines_card_lives_as_long_as_the_hub_holds_its_question() {
    let (bot, hub, channel) = routine_channel_with(
        vec![lamp(), FakeReply::text("The lamp is on.")],
        Duration::from_secs(30),
        |c| c.approval_timeout_seconds = 1,
    )
    .await;
    let firing = hub.run_routine("lamp").await;
    let card = bot.wait_for_card("demo_physical_action").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        bot.message(card.message_id).keyboard.is_some(),
        "the card still has its buttons: {}",
        bot.message(card.message_id).text
    );
    assert_eq!(hub.pending().await.len(), 1, "the question is still open");
    owner_taps(&bot, &card, "a");
    let edited = bot
        .wait_for("the card edited to approved", |b| {
            let m = b.message(card.message_id);
            m.keyboard.is_none().then_some(m)
        })
        .await;
    assert!(
        edited.text.starts_with("<b>✅ Approved</b>"),
        "{}",
        edited.text
    );
    let ended = hub.ended_firing("lamp", firing).await;
    assert_eq!(ended.outcome, "succeeded", "{}", ended.detail);
    assert_eq!(hub.tools_run("routine-lamp").await.len(), 1, "the tool ran");
    channel.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_routine_question_times_out_at_its_deadline_and_the_next_firing_goes_on() {
    let (bot, hub, channel) = routine_channel(
        vec![
            lamp(),
            FakeReply::text("It was not approved."),
            lamp(),
            FakeReply::text("Not approved either."),
        ],
        Duration::from_secs(2),
    )
    .await;
    let mut asked = hub.watch_approvals("telegram").await;
    let first = hub.run_routine("lamp").await;
    let second = hub.run_routine("lamp").await;
    let question = next_asked(&mut asked).await;
    let deadline: jiff::Timestamp = question.deadline.parse().unwrap();
    // Matched by its text: a slow machine may see it only once it has timed out.
    let card = bot.wait_for_text("demo_physical_action").await;
    let edited = bot
        .wait_for("the card edited to timed out", |b| {
            let m = b.message(card.message_id);
            m.keyboard.is_none().then_some(m)
        })
        .await;
    assert!(
        jiff::Timestamp::now().as_millisecond() >= deadline.as_millisecond() - 100,
        "ended before its deadline {deadline}"
    );
    assert!(
        edited.text.starts_with("<b>⌛ Timed out — rejected</b>"),
        "{}",
        edited.text
    );
    let ended = hub.ended_firing("lamp", first).await;
    assert_eq!(ended.outcome, "failed", "{}", ended.detail);
    assert!(ended.detail.starts_with("timeout:"), "{}", ended.detail);

    // The firing queued behind it runs, and its own question reaches the owner too.
    let next = next_asked(&mut asked).await;
    assert_ne!(next.approval_id, question.approval_id);
    assert_eq!(next.session_id, "routine-lamp");
    bot.wait_for("the second firing's card", |b| {
        b.sent()
            .into_iter()
            .find(|m| m.message_id != card.message_id && m.text.contains("demo_physical_action"))
    })
    .await;
    let ended = hub.ended_firing("lamp", second).await;
    assert!(ended.detail.starts_with("timeout:"), "{}", ended.detail);
    let approvals = hub.stored("routine-lamp", "approval").await;
    let timeouts = approvals
        .iter()
        .filter(|a| a.contains("\"timeout\""))
        .count();
    assert_eq!(timeouts, 2, "both recorded as timeouts: {approvals:?}");
    assert!(
        !approvals.iter().any(|a| a.contains("\"rejected\"")),
        "not as a person's rejection: {approvals:?}"
    );
    assert!(
        hub.tools_run("routine-lamp").await.is_empty(),
        "nothing ran"
    );
    assert_eq!(bot.cards_sent(), 2, "one card per question");
    channel.stop().await.unwrap();
}

// One thread: the capturing subscriber is this thread's default, and every task runs here.
#[tokio::test]
async fn with_no_owner_a_routines_question_waits_for_its_deadline_and_is_logged_once() {
    let (captured, _guard) = Captured::start();
    let bot = FakeBot::start().await;
    let hub = TestHub::start_with_routines(
        vec![
            lamp(),
            FakeReply::text("Not approved."),
            lamp(),
            FakeReply::text("Not approved either."),
        ],
        Duration::from_secs(1),
    )
    .await;
    let channel = start_channel(&hub, config(&bot));
    hub.add_prompt_routine("lamp", "Turn on the lamp.", "telegram")
        .await;
    let first = hub.run_routine("lamp").await;
    let second = hub.run_routine("lamp").await;
    for firing in [first, second] {
        let ended = hub.ended_firing("lamp", firing).await;
        assert!(ended.detail.starts_with("timeout:"), "{}", ended.detail);
    }
    assert_eq!(bot.cards_sent(), 0, "nobody to show it to");
    let logs = captured.text();
    let warned = logs
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("no owner is paired"))
        .count();
    assert_eq!(warned, 1, "one warn line for two questions: {logs}");
    channel.stop().await.unwrap();
}
