//! One user turn in `tau chat`: start it on the hub, render its events as they stream, ask the
//! approvals of this channel, and cancel it on Ctrl-C.
//!
//! Invariants:
//! - `tau chat` never decides an approval by itself: it relays the person's answer, and anything
//!   but an explicit yes (Ctrl-D, Ctrl-C, an empty line, no terminal to ask on) is sent as REJECTED.
//! - Events that arrive while a prompt is open are kept in order and rendered after it; a prompt
//!   whose approval is resolved elsewhere is abandoned (its reader stopped) and not answered.
//! - Ctrl-C during a reply cancels the turn and keeps rendering until the hub ends it; a second
//!   Ctrl-C stops watching (the turn still ends and is stored by the hub). Starting the turn,
//!   cancelling it and sending a decision are one-shot calls with a deadline ([`super::call`]);
//!   Ctrl-C while a decision is on its way cancels the turn.
//! - The turn's events are read through a [`TurnFeed`]: a stream the hub cuts off for falling
//!   behind is resumed with Subscribe, every event is rendered once, and a decision carries the
//!   attachment of the stream live when it is sent (a resumed stream has its own). A decision
//!   refused because the hub had already cut its stream off (marked `cut-off`) is sent once more,
//!   with the attachment of the resumed stream ([`TurnFeed::reattach`], within the call deadline,
//!   Ctrl-C honoured; what is read meanwhile is rendered after). Only a failure the feed cannot
//!   resume from is reported as a lost stream.

use std::collections::VecDeque;

use tau_api::error_marks;
use tau_api::i18n::{ApprovalPrompt, format_approval_prompt, is_approval_answer};
use tau_api::proto::v1::{self as pb, session_event::Kind};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use super::call::{CallError, call};
use super::render::{self, ToolLine};
use super::state::{CHANNEL, Chat};
use crate::approve::{self, PendingAnswer};
use crate::connect::BearerAuth;
use crate::feed::{FeedError, Item, Reattached, TurnFeed};

/// The feed of a turn started through the chat's hub client.
type Feed = TurnFeed<InterceptedService<Channel, BearerAuth>>;

/// How a turn left the chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The hub ended the turn with this stop reason.
    Ended(String),
    /// The person stopped watching (second Ctrl-C); the turn goes on in the hub.
    Detached,
    /// The hub refused to start it, or its stream broke.
    Failed,
}

/// What the prompt of one approval came to.
enum PromptResult {
    /// The person's decision.
    Decided(bool),
    /// Resolved elsewhere while the prompt was open: nothing to send.
    Resolved,
    /// The turn's stream ended or failed while the prompt was open.
    StreamGone(Option<FeedError>),
}

/// What sending a decision came to.
enum Sent {
    /// The hub answered (or refused, which is reported).
    Done,
    /// Ctrl-C while the decision was on its way.
    Interrupted,
    /// The turn's stream failed while waiting for its resumption to decide again.
    StreamGone(FeedError),
}

struct TurnState {
    turn_id: String,
    cancel_sent: bool,
    /// Items read while a prompt was open, rendered after it.
    backlog: VecDeque<Item>,
}

/// Runs one turn with `text` on the chat's current session.
pub async fn run_turn(chat: &mut Chat, text: &str) -> TurnOutcome {
    let request = pb::StartTurnRequest {
        session_id: chat.session_id().to_owned(),
        text: text.to_owned(),
        channel: CHANNEL.to_owned(),
        idempotency_key: chat.next_turn_key(),
    };
    let stream = match call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.start_turn(request),
    )
    .await
    {
        Ok(stream) => stream,
        Err(error) => {
            chat.report(&error);
            return TurnOutcome::Failed;
        }
    };
    let session_id = chat.session_id().to_owned();
    let mut feed = Feed::new(chat.hub.clone(), &session_id, CHANNEL, stream);
    chat.printer.begin_reply();
    let mut state = TurnState {
        turn_id: String::new(),
        cancel_sent: false,
        backlog: VecDeque::new(),
    };
    loop {
        let item = match state.backlog.pop_front() {
            Some(item) => item,
            None => {
                tokio::select! {
                    next = feed.next() => match next {
                        Ok(Some(item)) => item,
                        Ok(None) => return stream_lost(chat, "the hub closed the stream"),
                        Err(error) => return stream_lost(chat, &error.reason()),
                    },
                    () = chat.interrupts.next() => {
                        if state.cancel_sent || !cancel(chat, &mut state).await {
                            return detached(chat);
                        }
                        continue;
                    }
                }
            }
        };
        let event = match item {
            Item::Accepted(accepted) => {
                state.turn_id = accepted.turn_id;
                if accepted.queued_ahead > 0 {
                    let text = chat.t("notice.busy", &[]);
                    chat.printer.dim(&text);
                }
                continue;
            }
            Item::Event(event) => *event,
        };
        match event.kind {
            Some(Kind::TextDelta(delta)) => chat.printer.text(&delta.text),
            Some(Kind::ToolUseStarted(started)) => {
                let tool = render::one_line(&started.name, 80);
                let text = chat.t("tool.running", &[("tool", &tool)]);
                chat.printer.dim(&text);
            }
            Some(Kind::ToolCall(call)) => {
                match render::tool_call_line(&chat.messages, chat.lang, &call) {
                    Some(ToolLine::Refused(text) | ToolLine::Failed(text)) => {
                        chat.printer.red(&text)
                    }
                    None => {}
                }
            }
            Some(Kind::ApprovalRequested(requested)) => {
                let Some(approval) = requested.approval else {
                    continue;
                };
                if let Some(outcome) =
                    approval_requested(chat, &mut state, &mut feed, &approval).await
                {
                    return outcome;
                }
            }
            Some(Kind::ApprovalResolved(resolved)) => {
                if resolved.resolution == pb::ApprovalResolution::ExpiredByRestart as i32 {
                    let tool = render::one_line(&resolved.tool, 80);
                    let text = chat.t("approval.expired_by_restart", &[("tool", &tool)]);
                    chat.printer.red(&text);
                }
            }
            Some(Kind::OutputDiscarded(_)) => {
                // The terminal cannot take back what it printed: say that it no longer counts,
                // and count the reply as not streamed yet (so a final text that never streams
                // again is still shown at the end).
                let text = chat.t("chat.output_discarded", &[]);
                chat.printer.dim(&text);
                chat.printer.begin_reply();
            }
            Some(Kind::Throttled(throttled)) => {
                let seconds = throttled.delay_ms.div_ceil(1000).max(1);
                let text = chat.t("notice.throttled", &[("seconds", &seconds)]);
                chat.printer.dim(&text);
            }
            Some(Kind::Error(error)) if error.tool.is_empty() => {
                let message = render::one_line(&error.message, 300);
                let text = chat.t("notice.error", &[("error", &message)]);
                chat.printer.red(&text);
            }
            Some(Kind::TurnEnded(end)) => {
                if !chat.printer.streamed() && !end.text.trim().is_empty() {
                    // Nothing of the reply reached this stream (a replayed turn): show it once.
                    chat.printer.text(&end.text);
                }
                chat.printer.end_stream();
                if let Some(notice) =
                    render::stop_notice(&chat.messages, chat.lang, &end, chat.info.limits)
                {
                    chat.printer.notice(&notice);
                }
                return TurnOutcome::Ended(end.stop_reason);
            }
            Some(
                Kind::TurnQueued(_)
                | Kind::TurnStarted(_)
                | Kind::ReasoningDelta(_)
                | Kind::Error(_)
                | Kind::RoleSwitched(_),
            )
            | None => {}
        }
    }
}

fn stream_lost(chat: &mut Chat, reason: &str) -> TurnOutcome {
    let reason = render::one_line(reason, 200);
    let text = chat.t("chat.stream_lost", &[("reason", &reason)]);
    chat.printer.red(&text);
    TurnOutcome::Failed
}

/// The person stopped watching the turn.
fn detached(chat: &mut Chat) -> TurnOutcome {
    let text = chat.t("chat.detached", &[]);
    chat.printer.dim(&text);
    TurnOutcome::Detached
}

/// Asks the hub to cancel the turn; `false` when Ctrl-C came again while asking (stop watching).
async fn cancel(chat: &mut Chat, state: &mut TurnState) -> bool {
    state.cancel_sent = true;
    let text = chat.t("chat.cancelling", &[]);
    chat.printer.dim(&text);
    let request = pb::CancelTurnRequest {
        session_id: chat.session_id().to_owned(),
        turn_id: state.turn_id.clone(),
    };
    match call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.cancel_turn(request),
    )
    .await
    {
        Ok(_) => true,
        Err(CallError::Interrupted) => false,
        Err(error) => {
            chat.report(&error);
            true
        }
    }
}

/// Handles one `approval_requested` event; `Some(outcome)` when the turn's stream ended meanwhile.
async fn approval_requested(
    chat: &mut Chat,
    state: &mut TurnState,
    feed: &mut Feed,
    approval: &pb::PendingApproval,
) -> Option<TurnOutcome> {
    if approval.channel != CHANNEL {
        let channel = render::one_line(&approval.channel, 40);
        let text = chat.t("approval.awaiting_other_channel", &[("channel", &channel)]);
        chat.printer.dim(&text);
        return None;
    }
    let result = if chat.interactive {
        prompt(chat, state, feed, approval).await
    } else {
        let tool = render::one_line(&approval.tool, 80);
        let text = chat.t("approval.no_terminal", &[("tool", &tool)]);
        chat.printer.dim(&text);
        PromptResult::Decided(false)
    };
    match result {
        PromptResult::Decided(approve) => {
            match decide(chat, state, feed, approval, approve).await {
                Sent::Done => None,
                // Ctrl-C while the decision was on its way cancels the turn, as during a reply.
                Sent::Interrupted => {
                    if cancel(chat, state).await {
                        None
                    } else {
                        Some(detached(chat))
                    }
                }
                Sent::StreamGone(error) => Some(stream_lost(chat, &error.reason())),
            }
        }
        PromptResult::Resolved => None,
        PromptResult::StreamGone(error) => {
            let reason =
                error.map_or_else(|| "the hub closed the stream".to_owned(), |e| e.reason());
            Some(stream_lost(chat, &reason))
        }
    }
}

/// Shows the prompt and waits for the answer, the approval's resolution elsewhere, or Ctrl-C.
async fn prompt(
    chat: &mut Chat,
    state: &mut TurnState,
    feed: &mut Feed,
    approval: &pb::PendingApproval,
) -> PromptResult {
    let text = format_approval_prompt(
        &chat.messages,
        chat.lang,
        &ApprovalPrompt {
            tool: &render::sanitize(&approval.tool),
            tier: u8::try_from(approval.tier).unwrap_or(2),
            arguments: &render::sanitize(&approval.arguments),
            effect: &render::sanitize(&approval.effect),
        },
    )
    .unwrap_or_else(|_| "approval.title".to_owned());
    let style = chat.printer.style();
    let mut lines = text.lines();
    if let Some(title) = lines.next() {
        chat.printer.line(&style.yellow(title));
    }
    let rest: Vec<&str> = lines.collect();
    if let Some((question, details)) = rest.split_last() {
        for line in details {
            chat.printer.line(line);
        }
        chat.printer.prompt(&format!("{question} "));
    }
    // Keys typed before the prompt was on screen were meant for something else.
    let _ = approve::discard_typed_ahead(std::io::stdin());
    let mut answer = match PendingAnswer::start() {
        Ok(answer) => answer,
        Err(_) => return PromptResult::Decided(false),
    };
    loop {
        tokio::select! {
            line = answer.line() => {
                chat.printer.answered(line.is_some());
                return PromptResult::Decided(line.as_deref().is_some_and(is_approval_answer));
            }
            () = chat.interrupts.next() => {
                chat.printer.end_stream();
                return PromptResult::Decided(false);
            }
            next = feed.next() => {
                let item = match next {
                    Ok(Some(item)) => item,
                    Ok(None) => return PromptResult::StreamGone(None),
                    Err(error) => return PromptResult::StreamGone(Some(error)),
                };
                let resolved_here = item.resolves(&approval.approval_id);
                state.backlog.push_back(item);
                if resolved_here {
                    chat.printer.end_stream();
                    return PromptResult::Resolved;
                }
            }
        }
    }
}

/// Sends the decision with the attachment of the stream live now (a stream resumed while the
/// prompt was open has its own) and says what became of it; refused as cut off, it is sent once
/// more with the attachment of the resumed stream.
async fn decide(
    chat: &mut Chat,
    state: &mut TurnState,
    feed: &mut Feed,
    approval: &pb::PendingApproval,
    approve: bool,
) -> Sent {
    let decision = if approve {
        pb::ApprovalDecision::Approved
    } else {
        pb::ApprovalDecision::Rejected
    };
    let mut attachment = feed.attachment().to_owned();
    let mut retried = false;
    let outcome = loop {
        let request = pb::DecideApprovalRequest {
            approval_id: approval.approval_id.clone(),
            decision: decision as i32,
            attachment_id: attachment.clone(),
        };
        let error = match call(
            &mut chat.interrupts,
            chat.deadlines.call,
            chat.hub.decide_approval(request),
        )
        .await
        {
            Ok(outcome) => break outcome,
            Err(CallError::Interrupted) => return Sent::Interrupted,
            Err(error) => error,
        };
        let cut_off = matches!(&error, CallError::Hub(status) if error_marks::is_cut_off(status));
        if retried || !cut_off {
            chat.report(&error);
            return Sent::Done;
        }
        retried = true;
        // The hub cut the stream off before the decision arrived: read on to the resumed stream.
        let reattached = tokio::select! {
            reattached = feed.reattach(&attachment, &mut state.backlog, chat.deadlines.call) => {
                reattached
            }
            () = chat.interrupts.next() => return Sent::Interrupted,
        };
        match reattached {
            Ok(Reattached::Attached(resumed)) => attachment = resumed,
            Ok(Reattached::Ended | Reattached::TimedOut) => {
                chat.report(&error);
                return Sent::Done;
            }
            Err(lost) => {
                chat.report(&error);
                return Sent::StreamGone(lost);
            }
        }
    };
    let tool = render::one_line(&approval.tool, 80);
    match pb::DecideOutcome::try_from(outcome.outcome) {
        Ok(pb::DecideOutcome::Applied) if approve => {
            let text = chat.t("approval.approved", &[("tool", &tool)]);
            let text = chat.printer.style().green(&text);
            chat.printer.line(&text);
        }
        // A rejection shows as `✗ <tool>: not approved` when the hub reports the refused call.
        Ok(pb::DecideOutcome::Applied) => {}
        Ok(pb::DecideOutcome::AlreadyDecided) => {
            let text = chat.t("approval.already_decided", &[]);
            chat.printer.dim(&text);
        }
        Ok(pb::DecideOutcome::Expired) => {
            let text = chat.t("approval.expired", &[("tool", &tool)]);
            chat.printer.red(&text);
        }
        Ok(pb::DecideOutcome::NotFound | pb::DecideOutcome::Unspecified) | Err(_) => {
            let text = chat.t("approval.not_found", &[]);
            chat.printer.dim(&text);
        }
    }
    Sent::Done
}
