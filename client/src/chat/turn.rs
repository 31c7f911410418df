//! One user turn in `tau chat`: start it on the hub and relay it ([`crate::relay`]) through the
//! chat's front, which renders its events as they stream, asks the approvals of this channel on
//! the terminal, and reports Ctrl-C.
//!
//! Invariants:
//! - `tau chat` never decides an approval by itself: it relays the person's answer, and anything
//!   but an explicit yes (Ctrl-D, Ctrl-C, an empty line, no terminal to ask on) is sent as REJECTED.
//! - Events that arrive while a prompt is open are kept in order and rendered after it; a prompt
//!   whose approval is resolved elsewhere is abandoned (its reader stopped) and not answered.
//! - Ctrl-C during a reply cancels the turn and keeps rendering until the hub ends it; a second
//!   Ctrl-C stops watching (the turn still ends and is stored by the hub). Starting the turn,
//!   cancelling it and sending a decision are one-shot calls with a deadline
//!   ([`crate::relay::call`]); Ctrl-C while a decision is on its way cancels the turn.
//! - A stream the hub cuts off is resumed by the feed ([`crate::feed`]); only a failure the feed
//!   cannot resume from is reported as a lost stream.

use tau_api::i18n::{ApprovalPrompt, format_approval_prompt, is_approval_answer};
use tau_api::proto::v1::{self as pb, session_event::Kind};

use super::render::{self, ToolLine};
use super::state::{CHANNEL, Chat};
use crate::approve::{self, PendingAnswer};
use crate::feed::FeedError;
use crate::relay::call::{CallError, call};
use crate::relay::{Answer, Front, Outcome, Relay};

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

/// Runs one turn with `text` on the chat's current session.
pub async fn run_turn(chat: &mut Chat, text: &str) -> TurnOutcome {
    let stream = match start(chat, text).await {
        Ok(stream) => stream,
        Err(error) => {
            chat.report(&error);
            return TurnOutcome::Failed;
        }
    };
    let session_id = chat.session_id().to_owned();
    let (client, deadline) = (chat.hub.clone(), chat.deadlines.call);
    chat.printer.begin_reply();
    let mut front = ChatFront { chat };
    let outcome = Relay::new(client, &session_id, CHANNEL, stream, &mut front, deadline)
        .run()
        .await;
    let chat = front.chat;
    match outcome {
        Outcome::Ended(end) => TurnOutcome::Ended(end.stop_reason),
        Outcome::Detached => {
            let text = chat.t("chat.detached", &[]);
            chat.printer.dim(&text);
            TurnOutcome::Detached
        }
        Outcome::StreamLost(error) => {
            let reason =
                error.map_or_else(|| "the hub closed the stream".to_owned(), |e| e.reason());
            stream_lost(chat, &reason)
        }
        Outcome::Stopped => TurnOutcome::Failed,
    }
}

/// Starts a turn with `text` on the chat's current session for this channel, with a fresh
/// idempotency key (a one-shot call: it has a deadline and gives way to Ctrl-C). `tau chat` and
/// `tau tui` both start their turns here.
pub(crate) async fn start(
    chat: &mut Chat,
    text: &str,
) -> Result<tonic::Streaming<pb::StartTurnResponse>, CallError> {
    let request = pb::StartTurnRequest {
        session_id: chat.session_id().to_owned(),
        text: text.to_owned(),
        channel: CHANNEL.to_owned(),
        idempotency_key: chat.next_turn_key(),
    };
    call(
        &mut chat.interrupts,
        chat.deadlines.call,
        chat.hub.start_turn(request),
    )
    .await
}

fn stream_lost(chat: &mut Chat, reason: &str) -> TurnOutcome {
    let reason = render::one_line(reason, 200);
    let text = chat.t("chat.stream_lost", &[("reason", &reason)]);
    chat.printer.red(&text);
    TurnOutcome::Failed
}

/// The chat as the relay's front: prints the turn, asks on the terminal.
struct ChatFront<'c> {
    chat: &'c mut Chat,
}

impl Front for ChatFront<'_> {
    fn accepted(&mut self, accepted: &pb::TurnAccepted) {
        if accepted.queued_ahead > 0 {
            let text = self.chat.t("notice.busy", &[]);
            self.chat.printer.dim(&text);
        }
    }

    fn event(&mut self, event: &pb::SessionEvent) {
        let Some(kind) = &event.kind else { return };
        render_event(self.chat, kind);
    }

    async fn interrupted(&mut self) {
        self.chat.interrupts.next().await;
    }

    async fn ask(&mut self, approval: &pb::PendingApproval) -> Answer {
        let chat = &mut *self.chat;
        if approval.channel != CHANNEL {
            let channel = render::one_line(&approval.channel, 40);
            let text = chat.t("approval.awaiting_other_channel", &[("channel", &channel)]);
            chat.printer.dim(&text);
            return Answer::Skip;
        }
        if !chat.interactive {
            let tool = render::one_line(&approval.tool, 80);
            let text = chat.t("approval.no_terminal", &[("tool", &tool)]);
            chat.printer.dim(&text);
            return Answer::Reject;
        }
        prompt(chat, approval).await
    }

    fn resolved_elsewhere(&mut self, _: &pb::PendingApproval) {
        self.chat.printer.end_stream();
    }

    fn cancelling(&mut self) {
        let text = self.chat.t("chat.cancelling", &[]);
        self.chat.printer.dim(&text);
    }

    fn cancel_failed(&mut self, error: &CallError) {
        self.chat.report(error);
    }

    fn decided(
        &mut self,
        approval: &pb::PendingApproval,
        approve: bool,
        response: &pb::DecideApprovalResponse,
    ) {
        decided(self.chat, approval, approve, response);
    }

    fn decision_failed(&mut self, error: CallError, _: Option<&FeedError>) -> bool {
        self.chat.report(&error);
        true
    }
}

/// Renders one event of the turn (approval requests are asked by the relay, not rendered here).
fn render_event(chat: &mut Chat, kind: &Kind) {
    match kind {
        Kind::TextDelta(delta) => chat.printer.text(&delta.text),
        Kind::ToolUseStarted(started) => {
            let tool = render::one_line(&started.name, 80);
            let text = chat.t("tool.running", &[("tool", &tool)]);
            chat.printer.dim(&text);
        }
        Kind::ToolProgress(progress) => {
            let tool = render::one_line(&progress.tool, 40);
            let report = render::progress_text(progress);
            let text = chat.t("tool.progress", &[("tool", &tool), ("progress", &report)]);
            chat.printer.progress(&render::one_line(&text, 100));
        }
        Kind::ToolCall(call) => {
            chat.printer.clear_progress();
            match render::tool_call_line(&chat.messages, chat.lang, call) {
                Some(ToolLine::Refused(text) | ToolLine::Failed(text)) => chat.printer.red(&text),
                None => {}
            }
        }
        Kind::ApprovalResolved(resolved) => {
            if resolved.resolution == pb::ApprovalResolution::ExpiredByRestart as i32 {
                let tool = render::one_line(&resolved.tool, 80);
                let text = chat.t("approval.expired_by_restart", &[("tool", &tool)]);
                chat.printer.red(&text);
            }
        }
        Kind::OutputDiscarded(_) => {
            // The terminal cannot take back what it printed: say that it no longer counts,
            // and count the reply as not streamed yet (so a final text that never streams
            // again is still shown at the end).
            let text = chat.t("chat.output_discarded", &[]);
            chat.printer.dim(&text);
            chat.printer.begin_reply();
        }
        Kind::Throttled(throttled) => {
            let seconds = throttled.delay_ms.div_ceil(1000).max(1);
            let text = chat.t("notice.throttled", &[("seconds", &seconds)]);
            chat.printer.dim(&text);
        }
        Kind::Error(error) if error.tool.is_empty() => {
            let message = render::one_line(&error.message, 300);
            let text = chat.t("notice.error", &[("error", &message)]);
            chat.printer.red(&text);
        }
        Kind::TurnEnded(end) => turn_ended(chat, end),
        Kind::ApprovalRequested(_)
        | Kind::TurnQueued(_)
        | Kind::TurnStarted(_)
        | Kind::ReasoningDelta(_)
        | Kind::Error(_)
        | Kind::RoleSwitched(_) => {}
    }
}

fn turn_ended(chat: &mut Chat, end: &pb::TurnEnded) {
    chat.printer.clear_progress();
    if !chat.printer.streamed() && !end.text.trim().is_empty() {
        // Nothing of the reply reached this stream (a replayed turn): show it once.
        chat.printer.text(&end.text);
    }
    chat.printer.end_stream();
    if let Some(notice) = render::stop_notice(&chat.messages, chat.lang, end, chat.info.limits) {
        chat.printer.notice(&notice);
    }
}

/// Shows the prompt and waits for the answer or Ctrl-C (dropped when the approval is resolved
/// elsewhere).
async fn prompt(chat: &mut Chat, approval: &pb::PendingApproval) -> Answer {
    let text = format_approval_prompt(
        &chat.messages,
        chat.lang,
        &ApprovalPrompt {
            tool: &render::sanitize(&approval.tool),
            tier: tau_api::tiers::asked_tier(approval.tier),
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
        Err(_) => return Answer::Reject,
    };
    tokio::select! {
        line = answer.line() => {
            chat.printer.answered(line.is_some());
            if line.as_deref().is_some_and(is_approval_answer) {
                Answer::Approve
            } else {
                Answer::Reject
            }
        }
        () = chat.interrupts.next() => {
            chat.printer.end_stream();
            Answer::Reject
        }
    }
}

/// Says what became of a decision the hub answered.
fn decided(
    chat: &mut Chat,
    approval: &pb::PendingApproval,
    approve: bool,
    response: &pb::DecideApprovalResponse,
) {
    let tool = render::one_line(&approval.tool, 80);
    match pb::DecideOutcome::try_from(response.outcome) {
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
}
