//! `tau ask "…"`: one turn from the command line over the hub's Unix socket. It starts nothing: when
//! no hub answers it exits 69 with a hint to run `tau hub run`.
//!
//! The reply (the turn's last assistant text) goes to stdout; `--json` prints the turn's events as
//! JSON lines instead. `--session ID` continues a session, otherwise a new one is opened.
//!
//! Opening the session and sending a decision are one-shot calls with a deadline
//! ([`crate::chat::call::CALL_DEADLINE`], `TAU_HUB_TIMEOUT` seconds when set): a stalled hub
//! ends `tau ask` with an error.
//!
//! Invariants: tier-2 calls are rejected unless `--approve` is given and a terminal (`/dev/tty`) is
//! there to ask on; only `y`, `yes`, `e` or `evet` approve (the shared i18n rule), and only when
//! typed after the prompt was shown (`crate::approve` discards earlier input); `tau` never decides
//! an approval by itself, it relays the person's answer (or the rejection) to the hub. A turn
//! stream the hub cuts off for falling behind is resumed with Subscribe ([`crate::feed`]), so a
//! slow terminal never loses or repeats an event; a decision the hub refuses because it had
//! already cut that stream off (marked `cut-off`) is sent once more with the attachment of the
//! resumed stream ([`crate::feed::TurnFeed::reattach`], within the call deadline).

use std::collections::VecDeque;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tau_api::env::Env;
use tau_api::error_marks;
use tau_api::i18n::{ApprovalPrompt, Messages, format_approval_prompt, is_approval_answer};
use tau_api::installation::Installation;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, open_session_request::Target, session_event::Kind};
use tonic::transport::Channel;

use crate::approve;
use crate::chat::call::{CallError, DEADLINE_VAR, Deadlines, seconds, within};
use crate::cli::Context;
use crate::event_json;
use crate::feed::{Item, Reattached, TurnFeed};
use crate::grpc;

/// The channel `tau ask` speaks for.
pub const CHANNEL: &str = "cli";

/// Exit code when no hub answers (EX_UNAVAILABLE).
pub const EXIT_NO_HUB: u8 = 69;

/// Options of `tau ask`.
#[derive(Debug, Args)]
pub struct AskArgs {
    /// What to ask (the words are joined with spaces).
    #[arg(required = true, value_name = "TEXT")]
    pub text: Vec<String>,
    /// Print the turn's events as JSON lines instead of the reply.
    #[arg(long)]
    pub json: bool,
    /// Continue this session instead of opening a new one.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Ask on the terminal before each tier-2 action (without it they are rejected).
    #[arg(long)]
    pub approve: bool,
}

type Client = pb::tau_client::TauClient<Channel>;

/// Runs `tau ask`.
pub fn run(args: &AskArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let text = args.text.join(" ");
    if text.trim().is_empty() {
        anyhow::bail!("nothing to ask");
    }
    let mut env = Env::from_process();
    for (key, value) in &ctx.child_env {
        env.set(*key, value.to_string_lossy());
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let installation = Installation::discover(env, &cwd)?;
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
    /// How long opening the session and sending a decision may take.
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
        let mut client = match grpc::connect_unix(socket).await {
            Ok(client) => client,
            Err(not_running) => {
                eprintln!("tau ask: {not_running}. Start one with `tau hub run`.");
                return Ok(ExitCode::from(EXIT_NO_HUB));
            }
        };
        let target = match &self.session {
            Some(id) => Target::SessionId(id.clone()),
            None => Target::NewSession(true),
        };
        let request = client.open_session(pb::OpenSessionRequest {
            target: Some(target),
            channel: CHANNEL.to_owned(),
            ..Default::default()
        });
        let opened = within(self.deadline, request)
            .await
            .map_err(|e| call_error("cannot open the session", e))?;
        let session_id = opened.session.map(|s| s.session_id).unwrap_or_default();
        // The deadline covers the hub accepting the turn, not the turn itself (which may wait on
        // a person).
        let request = client.start_turn(pb::StartTurnRequest {
            session_id: session_id.clone(),
            text: self.text.clone(),
            channel: CHANNEL.to_owned(),
            idempotency_key: idempotency_key(),
        });
        let stream = within(self.deadline, request)
            .await
            .map_err(|e| call_error("cannot start the turn", e))?;
        let mut feed = TurnFeed::new(client.clone(), &session_id, CHANNEL, stream);
        let code = self.follow(&mut client, &mut feed).await?;
        if self.verbose && !self.json {
            eprintln!("session {session_id}");
        }
        Ok(code)
    }

    /// Follows the turn's events until its end, relaying approvals.
    async fn follow(
        &self,
        client: &mut Client,
        feed: &mut TurnFeed<Channel>,
    ) -> anyhow::Result<ExitCode> {
        let mut backlog: VecDeque<Item> = VecDeque::new();
        loop {
            let item = match backlog.pop_front() {
                Some(item) => item,
                None => match feed.next().await? {
                    Some(item) => item,
                    None => anyhow::bail!("the hub ended the stream before the turn ended"),
                },
            };
            let event = match item {
                Item::Accepted(accepted) => {
                    if self.json {
                        println!("{}", event_json::accepted(&accepted));
                    }
                    continue;
                }
                Item::Event(event) => *event,
            };
            if self.json {
                println!("{}", event_json::event(&event));
            }
            match event.kind {
                Some(Kind::ApprovalRequested(requested)) => {
                    let Some(approval) = requested.approval else {
                        continue;
                    };
                    let answer = self.answer(&approval, feed, &mut backlog).await?;
                    if let Some(approve) = answer {
                        self.decide(client, &approval, approve, feed, &mut backlog)
                            .await?;
                    }
                }
                Some(Kind::TurnEnded(end)) => {
                    if !self.json {
                        println!("{}", end.text);
                        if !end.notice.is_empty() {
                            eprintln!("{}", end.notice);
                        }
                    }
                    let failed = end.stop_reason == "error";
                    return Ok(if failed {
                        ExitCode::FAILURE
                    } else {
                        ExitCode::SUCCESS
                    });
                }
                _ => {}
            }
        }
    }

    /// The person's answer (`Some(true)` approves), or `None` when the approval was resolved
    /// elsewhere while the prompt was open.
    async fn answer(
        &self,
        approval: &pb::PendingApproval,
        feed: &mut TurnFeed<Channel>,
        backlog: &mut VecDeque<Item>,
    ) -> anyhow::Result<Option<bool>> {
        let messages = Messages::builtin();
        if !self.approve {
            let line = messages.t("approval.rejected", self.lang, &[("tool", &approval.tool)])?;
            eprintln!("{line} (`tau ask --approve` asks on the terminal)");
            return Ok(Some(false));
        }
        let prompt = format_approval_prompt(
            &messages,
            self.lang,
            &ApprovalPrompt {
                tool: &approval.tool,
                tier: u8::try_from(approval.tier).unwrap_or(2),
                arguments: &approval.arguments,
                effect: &approval.effect,
            },
        )?;
        let mut asking = approve::ask_on_tty(&prompt).context("asking on the terminal")?;
        loop {
            tokio::select! {
                line = asking.line() => {
                    return Ok(Some(line.as_deref().is_some_and(is_approval_answer)));
                }
                next = feed.next() => {
                    let Some(item) = next? else {
                        return Ok(None);
                    };
                    let resolved_here = item.resolves(&approval.approval_id);
                    backlog.push_back(item);
                    if resolved_here {
                        eprintln!("\n(the approval was resolved elsewhere; not asking any more)");
                        return Ok(None);
                    }
                }
            }
        }
    }

    /// Sends the decision with the attachment of the live stream; refused as cut off, sends it
    /// once more with the attachment of the resumed stream (what is read meanwhile goes to
    /// `backlog`).
    async fn decide(
        &self,
        client: &mut Client,
        approval: &pb::PendingApproval,
        approve: bool,
        feed: &mut TurnFeed<Channel>,
        backlog: &mut VecDeque<Item>,
    ) -> anyhow::Result<()> {
        let what = "cannot send the decision";
        let refused = feed.attachment().to_owned();
        let outcome = match self.send(client, approval, approve, &refused).await {
            Err(CallError::Hub(status)) if error_marks::is_cut_off(&status) => {
                match feed.reattach(&refused, backlog, self.deadline).await {
                    Ok(Reattached::Attached(resumed)) => {
                        self.send(client, approval, approve, &resumed).await
                    }
                    Ok(Reattached::Ended | Reattached::TimedOut) => Err(CallError::Hub(status)),
                    Err(lost) => {
                        anyhow::bail!("{what}: {} ({lost})", status.message())
                    }
                }
            }
            sent => sent,
        }
        .map_err(|e| call_error(what, e))?;
        let applied = outcome.outcome == pb::DecideOutcome::Applied as i32;
        if !applied && !self.json {
            eprintln!(
                "(the approval was already {}; the decision changed nothing)",
                event_json::resolution_name(outcome.resolution)
            );
        }
        Ok(())
    }

    /// One DecideApproval with `attachment`, within the deadline.
    async fn send(
        &self,
        client: &mut Client,
        approval: &pb::PendingApproval,
        approve: bool,
        attachment: &str,
    ) -> Result<pb::DecideApprovalResponse, CallError> {
        let decision = if approve {
            pb::ApprovalDecision::Approved
        } else {
            pb::ApprovalDecision::Rejected
        };
        let request = client.decide_approval(pb::DecideApprovalRequest {
            approval_id: approval.approval_id.clone(),
            decision: decision as i32,
            attachment_id: attachment.to_owned(),
        });
        within(self.deadline, request).await
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
}
