//! One user turn in `tau chat`: start it on the hub and relay it ([`tau_client::relay`]) through the
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
//!   ([`tau_client::call`]), and so is the turn's `accepted` once StartTurn answered (the relay's
//!   feed); Ctrl-C while a decision is on its way cancels the turn.
//! - A stream the hub cuts off is resumed by the feed ([`tau_client::feed`]); only a failure the feed
//!   cannot resume from is reported as a lost stream.

use tau_api::i18n::{ApprovalPrompt, format_approval_prompt, is_approval_answer};
use tau_api::proto::v1::{self as pb, session_event::Kind};
use tau_client::approvals::Decided;
use tau_client::call::{CallError, call};
use tau_client::feed::FeedError;
use tau_client::present::Presenter;
use tau_client::relay::{Answer, Front, Outcome, Relay};

use super::render;
use super::state::{CHANNEL, Chat};
use crate::approve::{self, PendingAnswer};

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
        new_session: false,
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
        let chat = &mut *self.chat;
        let presenter = Presenter::new(&chat.messages, chat.lang).with_limits(chat.info.limits);
        render_event(&mut chat.printer, &presenter, kind);
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

/// Renders one event of the turn: the presenter's lines ([`tau_client::present`], the lines
/// `tau tui` shows too), but the approval lines, since the chat asks and answers its questions
/// itself (approval requests are asked by the relay).
pub(crate) fn render_event(printer: &mut render::Printer, presenter: &Presenter<'_>, kind: &Kind) {
    match kind {
        Kind::TextDelta(delta) => printer.text(&delta.text),
        Kind::TurnEnded(end) => reply_ended(printer, end),
        _ => {}
    }
    for line in presenter.live(kind) {
        printer.presented(&line);
    }
}

/// The end of the reply: shown once if nothing of it streamed (a replayed turn).
fn reply_ended(printer: &mut render::Printer, end: &pb::TurnEnded) {
    printer.clear_progress();
    if !printer.streamed() && !end.text.trim().is_empty() {
        printer.text(&end.text);
    }
    printer.end_stream();
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
    match Decided::of(approve, response) {
        Decided::Applied { approved: true } => {
            let text = chat.t("approval.approved", &[("tool", &tool)]);
            let text = chat.printer.style().green(&text);
            chat.printer.line(&text);
        }
        // A rejection shows as `✗ <tool>: not approved` when the hub reports the refused call.
        Decided::Applied { approved: false } => {}
        Decided::AlreadyDecided { .. } => {
            let text = chat.t("approval.already_decided", &[]);
            chat.printer.dim(&text);
        }
        Decided::Expired { .. } => {
            let text = chat.t("approval.expired", &[("tool", &tool)]);
            chat.printer.red(&text);
        }
        Decided::NotFound => {
            let text = chat.t("approval.not_found", &[]);
            chat.printer.dim(&text);
        }
    }
}
