//! Approval cards: shown with Reject and Approve buttons, decided only by a tap that passes every
//! check, edited to the hub's verdict, and timed out at their deadline. Which approvals get a card,
//! and how one a relay of this run did not ask is shown, is [`super::presenting`]'s.
//!
//! Invariants:
//! - a tap reaches the hub only if it comes from the owner's user id, in the owner's chat, on an
//!   accessible message that is this card's own message, with well-formed data naming a token this
//!   process issued (its epoch) for a card still shown; a double tap or a re-delivered tap finds
//!   the card deciding or ended and is answered "already decided";
//! - a token of an earlier epoch never approves: its card is edited to superseded; its Reject may
//!   be forwarded through this epoch's card of the same approval (rejecting is always safe);
//! - the card shows the hub's verdict, never the button pressed; every ended card loses its
//!   buttons; an unanswered card times out at its deadline (the configured timeout or the hub's
//!   deadline, whichever is first): the channel answers `TIMED_OUT`, which rejects the approval
//!   and records it as a timeout, not as the owner's rejection;
//! - a card is never dropped on a 429: sending retries until the approval's deadline, each wait
//!   the 429's `retry_after` (at most [`crate::bot_api::MAX_RETRY_AFTER`]) or 1 s after another
//!   failure, and never past the deadline; a card not sent by then ends its approval as
//!   `TIMED_OUT` at the deadline, unasked, with a warn line (no `retry_after`, however large,
//!   panics the card's task or leaves the approval waiting); a stop between attempts ends the
//!   retries and leaves the approval pending (the next start shows it afresh);
//! - a card's deadline is computed with checked arithmetic and is never further off than the
//!   longest configurable approval timeout;
//! - a card whose `sendMessage` went out is in the presentation log before the channel stops:
//!   the relay and the approval watch run [`present`] in a task of its own that a stop never cuts
//!   short mid-request, so a tap on it after a restart is recognised as stale (answered expired,
//!   never approving) instead of refused as unknown;
//! - a card is shown under a claim of its approval, so an approval gets at most one card per run
//!   (see [`super::presenting`]).

use std::sync::Arc;
use std::time::Duration;

use tau_api::config::APPROVAL_TIMEOUT_BOUNDS;
use tau_api::proto::v1::{self as pb, ApprovalResolution};
use tokio::time::Instant;

use crate::bot_api::BotError;
use crate::bot_api::types::{CallbackQuery, InlineButton, InlineKeyboard};
use crate::hub_link::{HubError, unary};
use crate::render::{CardContent, card_html, ended_card_html};
use crate::state::{
    CardState, Presentation, Tap, callback_data, parse_callback_data, random_token,
};

use super::claims::Claim;
use super::{LiveCard, Shared, lock};

/// Shows a card for `approval`, decidable with `attachment`, under `claim`.
/// Whether a card was shown: `false` when it could not be sent before its deadline (the approval
/// then timed out) or the run stopped first (it stays pending).
pub(super) async fn present(
    shared: &Arc<Shared>,
    chat: i64,
    approval: &pb::PendingApproval,
    attachment: &str,
    claim: Claim,
) -> bool {
    let deadline = card_deadline(shared, approval);
    let Ok(token) = random_token() else {
        tracing::error!("telegram: no randomness for a card token; the approval times out unasked");
        time_out_quietly(shared, &approval.approval_id, attachment).await;
        return false;
    };
    let minutes = deadline
        .saturating_duration_since(Instant::now())
        .as_secs()
        .div_ceil(60);
    let body = card_html(
        &shared.texts,
        &CardContent {
            tool: approval.tool.clone(),
            arguments: approval.arguments.clone(),
            effect: approval.effect.clone(),
            timeout_minutes: minutes,
        },
    );
    let keyboard = keyboard(shared, &token);
    lock(&shared.cards).presenting.insert(token.clone());
    let sent = loop {
        match shared.bot.send_message(chat, &body, Some(&keyboard)).await {
            Ok(message) => break Some(message),
            Err(e) => {
                let wait = e.retry_wait().unwrap_or(SEND_RETRY_PAUSE);
                // The next attempt, or the deadline if that comes first (or cannot be computed).
                let wake = Instant::now()
                    .checked_add(wait)
                    .map_or(deadline, |at| at.min(deadline));
                tracing::warn!(error = %e, "telegram: an approval card could not be sent yet");
                tokio::select! {
                    () = shared.stop.cancelled() => {
                        // Not shown: the approval stays pending for the next start.
                        lock(&shared.cards).presenting.remove(&token);
                        return false;
                    }
                    () = tokio::time::sleep_until(wake) => {}
                }
                if wake >= deadline {
                    break None;
                }
            }
        }
    };
    let Some(sent) = sent else {
        lock(&shared.cards).presenting.remove(&token);
        tracing::warn!(
            approval = %approval.approval_id,
            tool = %approval.tool,
            "telegram: the card could not be sent before its deadline; the approval times out"
        );
        time_out_quietly(shared, &approval.approval_id, attachment).await;
        return false;
    };
    {
        let mut book = lock(&shared.cards);
        book.presenting.remove(&token);
        book.log.cards.push(Presentation {
            token: token.clone(),
            approval_id: approval.approval_id.clone(),
            session_id: approval.session_id.clone(),
            chat_id: chat,
            message_id: sent.message_id,
            epoch: shared.epoch.clone(),
            state: CardState::Shown,
            outcome: String::new(),
        });
        book.live.insert(
            token.clone(),
            LiveCard {
                approval_id: approval.approval_id.clone(),
                attachment_id: attachment.to_owned(),
                body_html: body,
            },
        );
        save(shared, &mut book);
    }
    let timer_shared = Arc::clone(shared);
    shared.tasks.spawn(async move {
        tokio::select! {
            () = timer_shared.stop.cancelled() => {}
            () = tokio::time::sleep_until(deadline) => expire(&timer_shared, &token).await,
        }
    });
    // The card is in the log now: that, not the claim, keeps the approval from a second card.
    drop(claim);
    true
}

/// The hub ended `approval_id` (a decision elsewhere, a timeout, a cancel): edit its cards, unless
/// a decision of this channel is on its way (that path edits with the hub's answer).
pub(super) async fn resolved(
    shared: &Arc<Shared>,
    approval_id: &str,
    resolution: ApprovalResolution,
) {
    let tokens: Vec<String> = {
        let book = lock(&shared.cards);
        book.log
            .cards
            .iter()
            .filter(|c| c.approval_id == approval_id && c.state == CardState::Shown)
            .filter(|c| !book.deciding.contains(&c.token))
            .map(|c| c.token.clone())
            .collect()
    };
    let outcome = shared.texts.plain(outcome_key(resolution));
    for token in tokens {
        finish(shared, &token, CardState::Ended, &outcome).await;
    }
}

/// Handles a tap; see the module's invariants for the checks.
pub(super) async fn handle_tap(shared: &Arc<Shared>, tap: CallbackQuery) {
    wait_while_presenting(shared, &tap).await;
    let Some((card, decision)) = check_tap(shared, &tap) else {
        answer(
            shared,
            &tap.id,
            &shared.texts.plain("telegram.tap_not_allowed"),
            false,
        )
        .await;
        return;
    };
    if card.epoch != shared.epoch {
        stale_tap(shared, &tap, &card, decision).await;
        return;
    }
    let live = {
        let mut book = lock(&shared.cards);
        let shown = card.state == CardState::Shown && !book.deciding.contains(&card.token);
        let live = book.live.get(&card.token).cloned();
        if shown && live.is_some() {
            book.deciding.insert(card.token.clone());
        }
        live.filter(|_| shown)
    };
    let Some(live) = live else {
        let outcome = if card.outcome.is_empty() {
            "…".to_owned()
        } else {
            card.outcome.clone()
        };
        let text = shared
            .texts
            .get("telegram.tap_already", &[("outcome", &outcome)]);
        answer(shared, &tap.id, &text, false).await;
        return;
    };
    let decided = decide(shared, &live, decision).await;
    match decided {
        Ok(response) => {
            let outcome = verdict(shared, &response);
            let applied = response.outcome() == pb::DecideOutcome::Applied;
            // Answer first (best effort), then always edit: a failed answer never leaves buttons.
            answer(shared, &tap.id, &outcome, !applied).await;
            finish(shared, &card.token, CardState::Ended, &outcome).await;
        }
        Err(e) => {
            tracing::warn!(error = %e, "telegram: a decision did not reach the hub");
            let text = shared.texts.plain("telegram.tap_hub_unreachable");
            answer(shared, &tap.id, &text, true).await;
        }
    }
    lock(&shared.cards).deciding.remove(&card.token);
}

/// A tap on a card whose `sendMessage` has not returned yet waits for it (at most
/// [`PRESENTING_WAIT`]), so its message id can be checked.
async fn wait_while_presenting(shared: &Shared, tap: &CallbackQuery) {
    let Some((token, _)) = tap.data.as_deref().and_then(parse_callback_data) else {
        return;
    };
    let end = Instant::now() + PRESENTING_WAIT;
    while lock(&shared.cards).presenting.contains(token) && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The longest a tap waits for its card's `sendMessage` to return.
const PRESENTING_WAIT: Duration = Duration::from_secs(5);
/// The pause before sending a card again after a failure that is not a 429.
const SEND_RETRY_PAUSE: Duration = Duration::from_secs(1);
/// The longest an edit to a card's outcome waits out a 429 (below
/// [`crate::bot_api::MAX_RETRY_AFTER`]: the tap that ended the card waits for it).
const MAX_EDIT_WAIT: Duration = Duration::from_secs(30);

/// The checks of a tap, in order; the card and decision when all pass.
fn check_tap(shared: &Shared, tap: &CallbackQuery) -> Option<(Presentation, Tap)> {
    let refuse = |why: &'static str| {
        tracing::debug!(user = tap.from.id, why, "telegram: a tap was refused");
        None
    };
    let Some(owner) = shared.owner() else {
        return refuse("not paired");
    };
    if tap.from.id != owner.user_id {
        return refuse("not the owner");
    }
    let Some(message) = tap.message.as_ref() else {
        return refuse("no message");
    };
    if message.chat.id != owner.chat_id {
        return refuse("not the owner's chat");
    }
    if message.date == 0 {
        return refuse("inaccessible message");
    }
    let Some((token, decision)) = tap.data.as_deref().and_then(parse_callback_data) else {
        return refuse("malformed data");
    };
    let card = lock(&shared.cards).log.by_token(token).cloned();
    let Some(card) = card else {
        return refuse("unknown token");
    };
    if card.chat_id != message.chat.id || card.message_id != message.message_id {
        return refuse("not the card's own message");
    }
    Some((card, decision))
}

/// A tap on a card of an earlier epoch: never an approval.
async fn stale_tap(shared: &Arc<Shared>, tap: &CallbackQuery, card: &Presentation, decision: Tap) {
    if decision == Tap::Reject {
        let current = {
            let book = lock(&shared.cards);
            book.log
                .cards
                .iter()
                .find(|c| {
                    c.approval_id == card.approval_id
                        && c.epoch == shared.epoch
                        && c.state == CardState::Shown
                })
                .and_then(|c| book.live.get(&c.token).cloned())
        };
        if let Some(live) = current
            && let Err(e) = decide(shared, &live, Tap::Reject).await
        {
            tracing::warn!(error = %e, "telegram: a stale reject did not reach the hub");
        }
    }
    let text = shared.texts.plain("telegram.tap_expired");
    answer(shared, &tap.id, &text, true).await;
    let outcome = shared.texts.plain("telegram.outcome_superseded");
    finish(shared, &card.token, CardState::Superseded, &outcome).await;
}

/// The card's deadline: the configured timeout, or the hub's own deadline if sooner, never further
/// off than the longest configurable timeout.
fn card_deadline(shared: &Shared, approval: &pb::PendingApproval) -> Instant {
    let longest = Duration::from_secs(APPROVAL_TIMEOUT_BOUNDS.1);
    let configured = Duration::from_secs(shared.config.approval_timeout_seconds).min(longest);
    let hub_left = approval.deadline.parse::<jiff::Timestamp>().ok().map(|at| {
        let left = at
            .as_millisecond()
            .saturating_sub(jiff::Timestamp::now().as_millisecond());
        Duration::from_millis(u64::try_from(left).unwrap_or(0))
    });
    let now = Instant::now();
    // A deadline that cannot be represented is no reason to wait for ever: it is now.
    now.checked_add(hub_left.map_or(configured, |left| left.min(configured)))
        .unwrap_or(now)
}

/// The card's deadline passed: reject it (unless a tap is deciding it) and say it timed out.
async fn expire(shared: &Arc<Shared>, token: &str) {
    let live = {
        let mut book = lock(&shared.cards);
        let shown = book
            .log
            .by_token(token)
            .is_some_and(|c| c.state == CardState::Shown);
        if !shown || book.deciding.contains(token) {
            return;
        }
        book.deciding.insert(token.to_owned());
        book.live.get(token).cloned()
    };
    if let Some(live) = live
        && let Err(e) = send_decision(shared, &live, pb::ApprovalDecision::TimedOut).await
    {
        tracing::warn!(error = %e, "telegram: the card's timeout did not reach the hub");
    }
    let outcome = shared.texts.plain("telegram.outcome_timeout");
    finish(shared, token, CardState::Ended, &outcome).await;
    lock(&shared.cards).deciding.remove(token);
}

async fn decide(
    shared: &Shared,
    live: &LiveCard,
    tap: Tap,
) -> Result<pb::DecideApprovalResponse, HubError> {
    let decision = match tap {
        Tap::Approve => pb::ApprovalDecision::Approved,
        Tap::Reject => pb::ApprovalDecision::Rejected,
    };
    send_decision(shared, live, decision).await
}

async fn send_decision(
    shared: &Shared,
    live: &LiveCard,
    decision: pb::ApprovalDecision,
) -> Result<pb::DecideApprovalResponse, HubError> {
    let mut hub = shared.hub.clone();
    let request = tau_client::approvals::request(&live.approval_id, decision, &live.attachment_id);
    unary(hub.decide_approval(request)).await
}

/// Ends an approval nobody could be asked about: a timeout, since no person rejected it.
async fn time_out_quietly(shared: &Shared, approval_id: &str, attachment: &str) {
    let live = LiveCard {
        approval_id: approval_id.to_owned(),
        attachment_id: attachment.to_owned(),
        body_html: String::new(),
    };
    if let Err(e) = send_decision(shared, &live, pb::ApprovalDecision::TimedOut).await {
        tracing::warn!(error = %e, "telegram: an unasked approval could not be ended");
    }
}

/// The hub's verdict as the card's outcome line.
fn verdict(shared: &Shared, response: &pb::DecideApprovalResponse) -> String {
    let key = match response.outcome() {
        pb::DecideOutcome::NotFound | pb::DecideOutcome::Unspecified => "telegram.outcome_closed",
        _ => outcome_key(response.resolution()),
    };
    shared.texts.plain(key)
}

fn outcome_key(resolution: ApprovalResolution) -> &'static str {
    match resolution {
        ApprovalResolution::Approved => "telegram.outcome_approved",
        ApprovalResolution::Rejected => "telegram.outcome_rejected",
        ApprovalResolution::Timeout => "telegram.outcome_timeout",
        ApprovalResolution::Cancelled => "telegram.outcome_cancelled",
        ApprovalResolution::ExpiredByRestart => "telegram.outcome_superseded",
        ApprovalResolution::ChannelClosed | ApprovalResolution::Unspecified => {
            "telegram.outcome_closed"
        }
    }
}

fn keyboard(shared: &Shared, token: &str) -> InlineKeyboard {
    InlineKeyboard {
        inline_keyboard: vec![vec![
            InlineButton {
                text: shared.texts.plain("telegram.button_reject"),
                callback_data: callback_data(token, Tap::Reject),
            },
            InlineButton {
                text: shared.texts.plain("telegram.button_approve"),
                callback_data: callback_data(token, Tap::Approve),
            },
        ]],
    }
}

/// Ends a card shown by this process: marks it, then edits it to `outcome` without buttons.
async fn finish(shared: &Shared, token: &str, state: CardState, outcome: &str) {
    let card = lock(&shared.cards).log.by_token(token).cloned();
    if let Some(card) = card {
        let body = lock(&shared.cards)
            .live
            .get(token)
            .map(|l| l.body_html.clone());
        finish_with_body(shared, &card, state, outcome, body).await;
    }
}

pub(super) async fn finish_with_body(
    shared: &Shared,
    card: &Presentation,
    state: CardState,
    outcome: &str,
    body: Option<String>,
) {
    let ended = {
        let mut book = lock(&shared.cards);
        let ended = book.log.end(&card.token, state, outcome);
        if ended.is_some() {
            book.live.remove(&card.token);
            save(shared, &mut book);
        }
        ended
    };
    if ended.is_none() {
        return;
    }
    let html = match body {
        Some(body) => ended_card_html(&body, outcome),
        None => format!("<b>{}</b>", crate::render::escape_html(outcome)),
    };
    for _ in 0..3 {
        match shared
            .bot
            .edit_message(card.chat_id, card.message_id, &html, None)
            .await
        {
            Ok(()) => return,
            Err(e @ BotError::RetryAfter { .. }) => {
                let wait = e.retry_wait().unwrap_or(MAX_EDIT_WAIT);
                tokio::time::sleep(wait.min(MAX_EDIT_WAIT)).await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "telegram: a card could not be edited to its outcome");
                return;
            }
        }
    }
}

async fn answer(shared: &Shared, id: &str, text: &str, alert: bool) {
    // Best effort: a query too old to answer must not stop the edit that follows.
    if let Err(e) = shared.bot.answer_callback(id, text, alert).await {
        tracing::debug!(error = %e, "telegram: answerCallbackQuery failed");
    }
}

fn save(shared: &Shared, book: &mut super::CardBook) {
    if let Err(e) = book.log.save(&shared.paths) {
        tracing::error!(error = %e, "telegram: the cards could not be stored");
    }
}
