//! `tau ask "…"`: one turn from the command line over the hub's Unix socket. It starts nothing: when
//! no hub answers it exits 69 with a hint to run `tau hub start`.
//!
//! The reply (the turn's last assistant text) goes to stdout; `--json` prints the turn's events as
//! JSON lines instead. `--session ID` continues a session (OpenSession, then StartTurn); otherwise
//! the turn starts in a new session in one call (StartTurn's `new_session`), and with a hub older
//! than that field in a session opened first. Only a refusal (INVALID_ARGUMENT) costs a GetStatus
//! call, whose features say whether the hub knows the field; a hub older than that list is known by
//! its answer to such a request (`session_id is empty`).
//!
//! Opening the session, starting the turn and sending a decision are one-shot calls with a deadline
//! ([`tau_client::call::CALL_DEADLINE`], `TAU_HUB_TIMEOUT` seconds when set), and so is the wait
//! for the turn's `accepted` once StartTurn answered
//! ([`tau_client::feed::FeedError::NotAccepted`]): a stalled hub ends `tau ask` with an error. The
//! rest of the answer has no deadline of its own (a model may think long, a person answer late);
//! it ends with the turn, or when the hub's connection closes.
//!
//! Invariants: tier-2 calls are rejected unless `--approve` is given and a terminal (`/dev/tty`) is
//! there to ask on; only `y`, `yes`, `e` or `evet` approve (the shared i18n rule), and only when
//! typed after the prompt was shown (`crate::approve` discards earlier input); `tau` never decides
//! an approval by itself, it relays the person's answer (or the rejection) to the hub. A turn
//! stream the hub cuts off for falling behind is resumed with Subscribe ([`tau_client::feed`]), so a
//! slow terminal never loses or repeats an event; a decision the hub refuses because it had
//! already cut that stream off (marked `cut-off`) is sent once more with the attachment of the
//! resumed stream ([`tau_client::feed::TurnFeed::reattach`], within the call deadline).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use tau_api::hub_features::{self, Support};
use tau_api::i18n::{ApprovalPrompt, Messages, format_approval_prompt, is_approval_answer};
use tau_api::installation::Installation;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, open_session_request::Target, session_event::Kind};
use tau_client::approvals::Decided;
use tau_client::call::{CallError, DEADLINE_VAR, Deadlines, seconds, within};
use tau_client::feed::FeedError;
use tau_client::present::json as event_json;
use tau_client::relay::{Answer, Front, Outcome, Relay};

use crate::approve;
use crate::cli::{AskArgs, CLI_CHANNEL};
use crate::context::Context;
use crate::environment;
use crate::hub_link::{self, EXIT_NO_HUB, HubAddress, HubClient};

/// Runs `tau ask`, in `installation` when the logging's set-up found it already.
pub fn run(
    args: &AskArgs,
    ctx: &Context,
    installation: Option<Installation>,
) -> anyhow::Result<ExitCode> {
    let text = args.text.join(" ");
    if text.trim().is_empty() {
        anyhow::bail!("nothing to ask");
    }
    let installation = match installation {
        Some(found) => found,
        None => Installation::discover(environment::snapshot(ctx), &environment::current_dir()?)?,
    };
    if args.approve && !tty_available() {
        anyhow::bail!(
            "--approve needs a terminal to ask on (/dev/tty), and there is none; tier-2 actions cannot be approved here"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let deadline = Deadlines::from_var(installation.env.get(DEADLINE_VAR)).call;
    let request = Ask {
        deadline,
        text,
        json: args.json,
        session: args.session.clone(),
        approve: args.approve,
        lang: installation.settings.lang,
        verbose: ctx.verbose,
    };
    runtime.block_on(request.run(&installation.paths.hub.socket))
}

fn tty_available() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .is_ok()
}

struct Ask {
    /// How long opening the session, starting the turn, its `accepted` and sending a decision may
    /// each take.
    deadline: Duration,
    text: String,
    json: bool,
    session: Option<String>,
    approve: bool,
    lang: Lang,
    verbose: bool,
}

fn status_error(what: &str, status: &tonic::Status) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", status.message())
}

/// A one-shot call that gave no answer, as an error naming what was being done.
fn call_error(what: &str, error: CallError) -> anyhow::Error {
    match error {
        CallError::Hub(status) => status_error(what, &status),
        CallError::TimedOut(deadline) => anyhow::anyhow!(
            "{what}: the hub did not answer within {} s",
            seconds(deadline)
        ),
        CallError::Interrupted => anyhow::anyhow!("{what}: interrupted"),
    }
}

impl Ask {
    async fn run(self, socket: &Path) -> anyhow::Result<ExitCode> {
        let mut client = match hub_link::connect(&HubAddress::Unix(socket.to_path_buf())).await {
            Ok(client) => client,
            Err(not_running) => {
                eprintln!("tau ask: {not_running}. Start one with `tau hub start`.");
                return Ok(ExitCode::from(EXIT_NO_HUB));
            }
        };
        let (session_id, stream) = self.start(&mut client).await?;
        let mut front = AskFront {
            ask: &self,
            messages: Messages::builtin(),
            failure: None,
            session_id: session_id.clone(),
        };
        let outcome = Relay::new(
            client,
            &session_id,
            CLI_CHANNEL,
            stream,
            &mut front,
            self.deadline,
        )
        .run()
        .await;
        let code = match outcome {
            Outcome::Ended(end) => {
                if end.stop_reason == "error" {
                    ExitCode::FAILURE
                } else {
                    ExitCode::SUCCESS
                }
            }
            Outcome::StreamLost(None) | Outcome::Detached => {
                anyhow::bail!("the hub ended the stream before the turn ended")
            }
            Outcome::StreamLost(Some(error @ FeedError::NotAccepted(_))) => {
                anyhow::bail!("cannot start the turn: {error}")
            }
            Outcome::StreamLost(Some(error)) => return Err(error.into()),
            Outcome::Stopped => {
                return Err(front
                    .failure
                    .unwrap_or_else(|| anyhow::anyhow!("the turn was not followed to its end")));
            }
        };
        if self.verbose && !self.json {
            eprintln!("session {}", front.session_id);
        }
        Ok(code)
    }

    /// Starts the turn: in a new session in one call, or in the session `--session` names (or a
    /// new one, with a hub that predates `new_session`) opened first. Returns the session's id
    /// (empty until the turn's `accepted` names a new one) and the turn's stream.
    async fn start(
        &self,
        client: &mut HubClient,
    ) -> anyhow::Result<(String, tonic::Streaming<pb::StartTurnResponse>)> {
        // The deadline covers the hub accepting the turn, not the turn itself (which may wait on
        // a person).
        if self.session.is_none() {
            let request = client.start_turn(self.turn(String::new(), true));
            match within(self.deadline, request).await {
                Ok(stream) => return Ok((String::new(), stream)),
                Err(CallError::Hub(status))
                    if status.code() == tonic::Code::InvalidArgument
                        && !self.takes_new_session(client, &status).await => {}
                Err(error) => return Err(call_error("cannot start the turn", error)),
            }
        }
        let target = match &self.session {
            Some(id) => Target::SessionId(id.clone()),
            None => Target::NewSession(true),
        };
        let request = client.open_session(pb::OpenSessionRequest {
            target: Some(target),
            channel: CLI_CHANNEL.to_owned(),
            ..Default::default()
        });
        let opened = within(self.deadline, request)
            .await
            .map_err(|e| call_error("cannot open the session", e))?;
        let session_id = opened.session.map(|s| s.session_id).unwrap_or_default();
        let request = client.start_turn(self.turn(session_id.clone(), false));
        let stream = within(self.deadline, request)
            .await
            .map_err(|e| call_error("cannot start the turn", e))?;
        Ok((session_id, stream))
    }

    /// Whether the hub that refused a StartTurn with `new_session` (INVALID_ARGUMENT) knows the
    /// field, so the refusal stands: it says so in GetStatus's features. A hub that lists none
    /// (older than the list), or whose status does not come, is judged by the refusal's message.
    async fn takes_new_session(&self, client: &mut HubClient, refusal: &tonic::Status) -> bool {
        let status = within(self.deadline, client.get_status(pb::GetStatusRequest {})).await;
        let listed = status.map(|status| status.features).unwrap_or_default();
        match hub_features::support(&listed, hub_features::START_TURN_NEW_SESSION) {
            Support::Listed => true,
            Support::Absent => false,
            Support::Unsaid => !predates_new_session(refusal),
        }
    }

    /// The StartTurn request of this ask.
    fn turn(&self, session_id: String, new_session: bool) -> pb::StartTurnRequest {
        pb::StartTurnRequest {
            session_id,
            text: self.text.clone(),
            channel: CLI_CHANNEL.to_owned(),
            idempotency_key: idempotency_key(),
            new_session,
        }
    }
}

/// Whether a refused StartTurn with `new_session` came from a hub that predates the field (it
/// read the request as one without a session), for a hub too old to list its features.
fn predates_new_session(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::InvalidArgument && status.message() == "session_id is empty"
}

/// `tau ask` as the relay's front: JSON lines or the reply, questions on `/dev/tty`, no Ctrl-C
/// handling (Ctrl-C ends the process; the hub keeps the turn).
struct AskFront<'a> {
    ask: &'a Ask,
    messages: Messages,
    /// Why the relay was stopped.
    failure: Option<anyhow::Error>,
    /// The session, once known (a new one's comes with the turn's `accepted`).
    session_id: String,
}

impl Front for AskFront<'_> {
    fn accepted(&mut self, accepted: &pb::TurnAccepted) {
        if !accepted.session_id.is_empty() {
            self.session_id.clone_from(&accepted.session_id);
        }
        if self.ask.json {
            outln!("{}", event_json::accepted(accepted));
        }
    }

    fn event(&mut self, event: &pb::SessionEvent) {
        if self.ask.json {
            outln!("{}", event_json::event(event));
        } else if let Some(Kind::TurnEnded(end)) = &event.kind {
            outln!("{}", end.text);
            if !end.notice.is_empty() {
                eprintln!("{}", end.notice);
            }
        }
    }

    async fn interrupted(&mut self) {
        std::future::pending::<()>().await;
    }

    async fn ask(&mut self, approval: &pb::PendingApproval) -> Answer {
        match self.answer(approval).await {
            Ok(true) => Answer::Approve,
            Ok(false) => Answer::Reject,
            Err(error) => {
                self.failure = Some(error);
                Answer::Stop
            }
        }
    }

    fn resolved_elsewhere(&mut self, _: &pb::PendingApproval) {
        eprintln!("\n(the approval was resolved elsewhere; not asking any more)");
    }

    fn cancelling(&mut self) {}

    fn cancel_failed(&mut self, _: &CallError) {}

    fn decided(&mut self, _: &pb::PendingApproval, _: bool, response: &pb::DecideApprovalResponse) {
        let applied = matches!(Decided::of(true, response), Decided::Applied { .. });
        if !applied && !self.ask.json {
            eprintln!(
                "(the approval was already {}; the decision changed nothing)",
                tau_client::present::resolution_name(response.resolution)
            );
        }
    }

    fn decision_failed(&mut self, error: CallError, lost: Option<&FeedError>) -> bool {
        let what = "cannot send the decision";
        self.failure = Some(match (error, lost) {
            (CallError::Hub(status), Some(lost)) => {
                anyhow::anyhow!("{what}: {} ({lost})", status.message())
            }
            (error, _) => call_error(what, error),
        });
        false
    }
}

impl AskFront<'_> {
    /// The person's answer (`true` approves); a rejection without asking unless `--approve`.
    async fn answer(&self, approval: &pb::PendingApproval) -> anyhow::Result<bool> {
        let lang = self.ask.lang;
        if !self.ask.approve {
            let line = self
                .messages
                .t("approval.rejected", lang, &[("tool", &approval.tool)])?;
            eprintln!("{line} (`tau ask --approve` asks on the terminal)");
            return Ok(false);
        }
        let prompt = format_approval_prompt(
            &self.messages,
            lang,
            &ApprovalPrompt {
                tool: &approval.tool,
                tier: tau_api::tiers::asked_tier(approval.tier),
                arguments: &approval.arguments,
                effect: &approval.effect,
            },
        )?;
        let mut asking = approve::ask_on_tty(&prompt).context("asking on the terminal")?;
        Ok(asking
            .line()
            .await
            .as_deref()
            .is_some_and(is_approval_answer))
    }
}

/// A key that makes a retried StartTurn return the same turn.
fn idempotency_key() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(elapsed) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(elapsed.as_nanos());
    }
    format!("ask-{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys_differ() {
        assert_ne!(idempotency_key(), idempotency_key());
    }

    #[test]
    fn only_an_older_hubs_answer_falls_back_to_opening_the_session() {
        let older = tonic::Status::invalid_argument("session_id is empty");
        assert!(predates_new_session(&older));
        for refused in [
            tonic::Status::invalid_argument("text is empty"),
            tonic::Status::not_found("session_id is empty"),
            tonic::Status::resource_exhausted("too many"),
        ] {
            assert!(!predates_new_session(&refused), "{refused:?}");
        }
    }
}
