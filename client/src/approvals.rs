//! `tau approvals [--json]` and `tau approvals decide ID`: the tier-2 questions pending in the
//! running hub, across sessions and channels, and a person's answer to one of them from a
//! terminal.
//!
//! Invariants: the client decides nothing by itself. `decide` attaches to the approval's session
//! on its channel (a Subscribe stream, whose snapshot shows it: the hub counts a decision only
//! from a client that was shown the question), prints the card (tool, sorted escaped arguments,
//! effect, session, channel, age) and approves only on a line typed on the terminal after the card
//! was shown (`crate::approve`); anything else rejects, and without a terminal it refuses with one
//! line and asks nobody. A question resolved elsewhere while it is shown is abandoned and said so.
//! The answer goes through `DecideApproval`, the hub's one-winner path. Every hub call has a
//! deadline; the wait for the person ends with the question (its own deadline, or
//! [`DECIDE_WAIT`]).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use tau_api::i18n::{ApprovalPrompt, Messages, format_approval_prompt};
use tau_api::installation::Installation;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, subscribe_response};
use tonic::Streaming;

use crate::approve;
use crate::cli::{ApprovalsArgs, ApprovalsCommand};
use crate::context::Context;
use crate::environment;
use crate::hub_link::{self, HubAddress, HubClient};
use crate::routine_approval::{Answered, ask_while_open, within};

/// How long one hub call may take.
const CALL_DEADLINE: Duration = Duration::from_secs(10);
/// The longest `decide` waits for the person (the question's own deadline usually ends it sooner).
pub const DECIDE_WAIT: Duration = Duration::from_secs(15 * 60);

/// Runs `tau approvals …`.
pub fn run(args: &ApprovalsArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let installation =
        Installation::discover(environment::snapshot(ctx), &environment::current_dir()?)?;
    let lang = installation.settings.lang;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let address = HubAddress::Unix(installation.paths.hub.socket.clone());
        let client =
            match hub_link::connect_or_report("tau approvals", &address, CALL_DEADLINE).await {
                Ok(client) => client,
                Err(code) => return Ok(code),
            };
        let result = match &args.command {
            None => list(client, args.json).await,
            Some(ApprovalsCommand::Decide(decide_args)) => {
                let asking = if approve::stdin_is_terminal() {
                    Some(lang)
                } else {
                    None
                };
                decide(client, &decide_args.id, asking).await
            }
        };
        match result {
            Ok(()) => Ok(ExitCode::SUCCESS),
            Err(message) => {
                eprintln!("tau approvals: {message}");
                Ok(ExitCode::FAILURE)
            }
        }
    })
}

async fn pending(client: &mut HubClient) -> Result<Vec<pb::PendingApproval>, String> {
    tau_client::approvals::list_pending(client, "", CALL_DEADLINE)
        .await
        .map_err(|e| e.to_string())
}

async fn list(mut client: HubClient, json: bool) -> Result<(), String> {
    let approvals = pending(&mut client).await?;
    let now = jiff::Timestamp::now();
    if json {
        let all: Vec<Value> = approvals.iter().map(|a| approval_json(a, now)).collect();
        let text = serde_json::to_string_pretty(&json!({ "approvals": all }))
            .map_err(|e| e.to_string())?;
        outln!("{text}");
    } else if approvals.is_empty() {
        outln!("no approvals are pending");
    } else {
        for approval in &approvals {
            outln!("{}", approval_lines(approval, now));
        }
    }
    Ok(())
}

/// Seconds from `earlier` (RFC 3339) to `now`; `None` when it does not parse.
fn seconds_since(earlier: &str, now: jiff::Timestamp) -> Option<i64> {
    let at: jiff::Timestamp = earlier.parse().ok()?;
    Some(now.as_second().saturating_sub(at.as_second()))
}

/// `42s`, `5m`, `3h`.
fn short_duration(seconds: i64) -> String {
    let seconds = seconds.max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s => format!("{}h", s / 3600),
    }
}

fn approval_json(approval: &pb::PendingApproval, now: jiff::Timestamp) -> Value {
    json!({
        "approval_id": approval.approval_id,
        "tool": approval.tool,
        "arguments": approval.arguments,
        "effect": approval.effect,
        "session_id": approval.session_id,
        "channel": approval.channel,
        "asked_at": approval.asked_at,
        "age_seconds": seconds_since(&approval.asked_at, now),
        "deadline": approval.deadline,
        "held": approval.held,
    })
}

/// Two lines: the id, tool and arguments; then where it was asked, its age and its effect.
fn approval_lines(approval: &pb::PendingApproval, now: jiff::Timestamp) -> String {
    let sanitize = crate::chat::render::sanitize;
    let age = seconds_since(&approval.asked_at, now).map_or_else(|| "?".to_owned(), short_duration);
    let ends = match seconds_since(&approval.deadline, now) {
        Some(past) => format!(", ends in {}", short_duration(past.saturating_neg())),
        None => String::new(),
    };
    format!(
        "{}  {} {}\n    session {} on {}, asked {age} ago{ends}: {}",
        approval.approval_id,
        sanitize(&approval.tool),
        sanitize(&approval.arguments),
        sanitize(&approval.session_id),
        sanitize(&approval.channel),
        sanitize(&approval.effect),
    )
}

/// Shows approval `id` and sends the person's answer; `asking` is the terminal's language, or
/// `None` when stdin is not a terminal (then nobody is asked).
async fn decide(mut client: HubClient, id: &str, asking: Option<Lang>) -> Result<(), String> {
    let Some(lang) = asking else {
        return Err(format!(
            "approval {id} was not decided: a decision is typed in a terminal (stdin is not one); run `tau approvals decide {id}` there"
        ));
    };
    let listed = pending(&mut client).await?;
    let Some(approval) = listed.into_iter().find(|a| a.approval_id == id) else {
        return Err(format!(
            "approval {id} is not pending (it was decided, it ended, or no approval has this id); see `tau approvals`"
        ));
    };
    let mut stream = within(
        CALL_DEADLINE,
        client.subscribe(pb::SubscribeRequest {
            session_id: approval.session_id.clone(),
            after_seq: None,
            channel: approval.channel.clone(),
            stream_id: String::new(),
        }),
    )
    .await
    .map_err(|e| format!("cannot attach to session {}: {e}", approval.session_id))?;
    let snapshot = match tokio::time::timeout(CALL_DEADLINE, stream.message()).await {
        Ok(Ok(Some(pb::SubscribeResponse {
            kind: Some(subscribe_response::Kind::Snapshot(snapshot)),
        }))) => snapshot,
        _ => return Err("the hub sent no snapshot on the session's stream".to_owned()),
    };
    // Decide only what this stream was shown: the question as the snapshot has it.
    let Some(shown) = snapshot
        .pending_approvals
        .into_iter()
        .find(|p| p.approval_id == approval.approval_id)
    else {
        return Err(format!("approval {id} ended before it could be shown"));
    };
    let now = jiff::Timestamp::now();
    outln!(
        "session {} on {}, asked {} ago",
        crate::chat::render::sanitize(&shown.session_id),
        crate::chat::render::sanitize(&shown.channel),
        seconds_since(&shown.asked_at, now).map_or_else(|| "?".to_owned(), short_duration)
    );
    let prompt = format_approval_prompt(
        &Messages::builtin(),
        lang,
        &ApprovalPrompt {
            tool: &crate::chat::render::sanitize(&shown.tool),
            tier: tau_api::tiers::asked_tier(shown.tier),
            arguments: &shown.arguments,
            effect: &crate::chat::render::sanitize(&shown.effect),
        },
    )
    .map_err(|e| e.to_string())?;
    let approve =
        match tokio::time::timeout(DECIDE_WAIT, answer(&prompt, &shown, &mut stream)).await {
            Ok(answer) => answer?,
            Err(_) => {
                return Err(format!(
                    "approval {id}: no answer within {} s; it was left as it was",
                    DECIDE_WAIT.as_secs()
                ));
            }
        };
    let Some(approve) = approve else {
        return Ok(());
    };
    let decided = tau_client::approvals::decide(
        &mut client,
        &shown.approval_id,
        tau_client::approvals::decision(approve),
        &snapshot.attachment_id,
        CALL_DEADLINE,
    )
    .await
    .map_err(|e| e.to_string())?;
    outln!("{}", outcome_line(&decided));
    Ok(())
}

/// The person's answer (`Some(true)` approves); `None` when the question was resolved elsewhere
/// while it was shown.
async fn answer(
    prompt: &str,
    shown: &pb::PendingApproval,
    stream: &mut Streaming<pb::SubscribeResponse>,
) -> Result<Option<bool>, String> {
    match ask_while_open(prompt, &shown.approval_id, stream).await? {
        Answered::Person(approve) => Ok(Some(approve)),
        Answered::Elsewhere(resolution) => {
            outln!(
                "\n(the approval was resolved elsewhere: {})",
                tau_client::present::resolution_name(resolution)
            );
            Ok(None)
        }
        Answered::StreamEnded => {
            Err("the hub closed the session's stream; nothing was decided".to_owned())
        }
    }
}

fn outcome_line(decided: &pb::DecideApprovalResponse) -> String {
    let resolution = tau_client::present::resolution_name(decided.resolution);
    match decided.outcome() {
        pb::DecideOutcome::Applied => format!("decided: {resolution}"),
        pb::DecideOutcome::AlreadyDecided => format!("already decided elsewhere: {resolution}"),
        pb::DecideOutcome::Expired => format!("it had ended already: {resolution}"),
        pb::DecideOutcome::NotFound | pb::DecideOutcome::Unspecified => {
            "no approval has this id".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval() -> pb::PendingApproval {
        pb::PendingApproval {
            approval_id: "apr-1".into(),
            session_id: "routine-lamp".into(),
            channel: "telegram".into(),
            tool: "demo_physical_action".into(),
            tier: pb::Tier::Physical as i32,
            arguments: r#"{"action": "lamp off"}"#.into(),
            effect: "Demo: moves nothing.".into(),
            asked_at: "2026-12-05T10:00:00Z".into(),
            deadline: "2026-12-05T10:10:00Z".into(),
            held: true,
            ..Default::default()
        }
    }

    #[test]
    fn a_listing_names_everything_a_person_needs_to_decide() {
        let now: jiff::Timestamp = "2026-12-05T10:02:00Z".parse().unwrap();
        let text = approval_lines(&approval(), now);
        for part in [
            "apr-1",
            "demo_physical_action {\"action\": \"lamp off\"}",
            "session routine-lamp on telegram",
            "asked 2m ago",
            "ends in 8m",
            "Demo: moves nothing.",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let value = approval_json(&approval(), now);
        assert_eq!(value["age_seconds"], 120);
        assert_eq!(value["held"], true);
        assert_eq!(value["channel"], "telegram");
    }

    #[test]
    fn hostile_text_is_escaped_in_a_listing() {
        let mut hostile = approval();
        hostile.tool = "x\u{1b}[2Jy".into();
        let text = approval_lines(&hostile, jiff::Timestamp::UNIX_EPOCH);
        assert!(!text.contains('\u{1b}'), "{text:?}");
    }

    #[tokio::test]
    async fn without_a_terminal_nothing_is_asked() {
        // No hub is needed: the refusal comes first.
        let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:9").connect_lazy();
        let client = pb::tau_client::TauClient::with_interceptor(
            channel,
            tau_client::connect::BearerAuth::default(),
        );
        let err = decide(client, "apr-1", None).await.unwrap_err();
        assert!(err.contains("terminal"), "{err}");
        assert!(!err.contains('\n'));
    }
}
