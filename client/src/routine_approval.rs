//! `tau routine add` of a tool action, and `tau routine run` of a tier-2 tool routine, as the
//! client the hub asks: it opens a session (or takes `--session`), holds a Subscribe attachment on
//! it on its own channel, calls AddRoutine or RunRoutine with that session and channel, and
//! answers the question the hub asks there, as `tau ask --approve` does (tool, exact arguments,
//! effect with the routine's name, schedule, catch-up rule and session).
//!
//! Invariants: the client never approves by itself: only a line typed on the terminal after the
//! prompt was shown, and only `y`, `yes`, `e` or `evet`, approves (`crate::approve`); anything else,
//! end of input included, rejects. With `--json` or no terminal on stdin nobody can be asked, so a
//! question is rejected at once and the command fails with one line saying how to give the approval
//! (it never hangs). Only the question of this routine's registration is answered; every wait has a
//! deadline ([`REGISTER_WAIT`] for the whole registration, the call deadline for each hub call) and
//! a question resolved elsewhere (timeout, another client) is abandoned.

use std::time::Duration;

use tau_api::i18n::{ApprovalPrompt, Messages, format_approval_prompt, is_approval_answer};
use tau_api::lang::Lang;
use tau_api::proto::v1::{
    self as pb, open_session_request::Target, session_event::Kind, subscribe_response,
};
use tonic::Streaming;

use crate::approve;
use crate::hub_link::HubClient;

/// How long a registration may take, the person's answer included (the hub's own approval
/// timeout usually ends it sooner).
pub const REGISTER_WAIT: Duration = Duration::from_secs(15 * 60);

/// How the registering client can reach its person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// Ask on the terminal, in this language.
    Terminal(Lang),
    /// Nobody can be asked (`--json`, or stdin is not a terminal): reject and say how.
    Nobody,
}

impl Asking {
    /// Terminal when `json` is off, stdin is a terminal and `/dev/tty` opens.
    pub fn detect(json: bool, lang: Lang) -> Self {
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .is_ok();
        if !json && approve::stdin_is_terminal() && tty {
            Self::Terminal(lang)
        } else {
            Self::Nobody
        }
    }
}

/// The one line a registration that could not be asked fails with.
pub fn needs_approval_line(name: &str, tool: &str) -> String {
    format!(
        "routine {name} was not added: {tool} needs your approval for exactly this routine (a tier-2 action, or a changed schedule, catch-up rule or arguments); run the same `tau routine add` in a terminal without --json and answer the question"
    )
}

/// Adds the routine of `request` (a tool action) with this client as the registering one; the
/// routine as stored, or one line saying why not.
pub async fn add_as_owner(
    client: &HubClient,
    mut request: pb::AddRoutineRequest,
    asking: Asking,
    deadline: Duration,
) -> Result<pb::Routine, String> {
    let attached = attach(client, &request.session_id, &request.channel, deadline).await?;
    request.session_id = attached.session_id.clone();
    let question = Question {
        hub: client.clone(),
        attachment: attached.attachment,
        tool_use_prefix: format!("routine-{}-registration", request.name),
        name: request.name.clone(),
        purpose: Purpose::Add,
        asking,
        deadline,
        refused_unasked: None,
    };
    let mut adder = client.clone();
    let added = question
        .run(adder.add_routine(request), attached.stream)
        .await?;
    Ok(added.routine.unwrap_or_default())
}

/// Runs tier-2 tool routine `name` by hand with this client as the one asked (a new session, or
/// `session`, on `channel`): the hub asks the question here every time and runs the call only
/// when the person approves it.
pub async fn run_as_owner(
    client: &HubClient,
    name: &str,
    session: &str,
    channel: &str,
    asking: Asking,
    deadline: Duration,
) -> Result<pb::RunRoutineResponse, String> {
    if asking == Asking::Nobody {
        return Err(needs_run_approval_line(name));
    }
    let attached = attach(client, session, channel, deadline).await?;
    let request = pb::RunRoutineRequest {
        name: name.to_owned(),
        session_id: attached.session_id.clone(),
        channel: channel.to_owned(),
    };
    let question = Question {
        hub: client.clone(),
        attachment: attached.attachment,
        tool_use_prefix: format!("routine-{name}-manual-"),
        name: name.to_owned(),
        purpose: Purpose::Run,
        asking,
        deadline,
        refused_unasked: None,
    };
    let mut runner = client.clone();
    question
        .run(runner.run_routine(request), attached.stream)
        .await
}

/// The one line a manual run that could not be asked fails with.
pub fn needs_run_approval_line(name: &str) -> String {
    format!(
        "routine {name} was not run: it calls a tier-2 tool, and a manual run needs your approval every time; run `tau routine run {name}` in a terminal without --json and answer the question"
    )
}

/// A Subscribe attachment on a session (a new one when `session` is empty).
struct Attached {
    session_id: String,
    attachment: String,
    stream: Streaming<pb::SubscribeResponse>,
}

async fn attach(
    client: &HubClient,
    session: &str,
    channel: &str,
    deadline: Duration,
) -> Result<Attached, String> {
    let mut hub = client.clone();
    let session_id = if session.is_empty() {
        let opened = within(
            deadline,
            hub.open_session(pb::OpenSessionRequest {
                target: Some(Target::NewSession(true)),
                channel: channel.to_owned(),
                ..Default::default()
            }),
        )
        .await
        .map_err(|e| format!("cannot open a session to ask in: {e}"))?;
        opened.session.map(|s| s.session_id).unwrap_or_default()
    } else {
        session.to_owned()
    };
    let mut stream = within(
        deadline,
        hub.subscribe(pb::SubscribeRequest {
            session_id: session_id.clone(),
            after_seq: None,
            channel: channel.to_owned(),
            stream_id: String::new(),
        }),
    )
    .await
    .map_err(|e| format!("cannot attach to session {session_id}: {e}"))?;
    let attachment = match tokio::time::timeout(deadline, stream.message()).await {
        Ok(Ok(Some(pb::SubscribeResponse {
            kind: Some(subscribe_response::Kind::Snapshot(snapshot)),
        }))) => snapshot.attachment_id,
        _ => return Err("the hub sent no snapshot on the session's stream".to_owned()),
    };
    Ok(Attached {
        session_id,
        attachment,
        stream,
    })
}

/// What the question is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Add,
    Run,
}

/// One hub call in progress whose question this client answers.
struct Question {
    hub: HubClient,
    attachment: String,
    /// How the tool use id of the question this call asks begins.
    tool_use_prefix: String,
    name: String,
    purpose: Purpose,
    asking: Asking,
    deadline: Duration,
    /// Set when a question was rejected because nobody could be asked.
    refused_unasked: Option<String>,
}

impl Question {
    async fn run<T>(
        mut self,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
        mut stream: Streaming<pb::SubscribeResponse>,
    ) -> Result<T, String> {
        tokio::pin!(call);
        let overall = tokio::time::sleep(REGISTER_WAIT);
        tokio::pin!(overall);
        let mut watching = true;
        loop {
            tokio::select! {
                answered = &mut call => {
                    return match (answered, self.refused_unasked.take()) {
                        (Ok(answered), _) => Ok(answered.into_inner()),
                        (Err(_), Some(line)) => Err(line),
                        (Err(status), None) => Err(status.message().to_owned()),
                    };
                }
                message = stream.message(), if watching => {
                    let question = match message {
                        Ok(Some(pb::SubscribeResponse {
                            kind: Some(subscribe_response::Kind::Event(event)),
                        })) => match event.kind {
                            Some(Kind::ApprovalRequested(asked)) => asked.approval,
                            _ => None,
                        },
                        Ok(Some(_)) => None,
                        // The hub closes the question with the stream: the call answers.
                        Ok(None) | Err(_) => {
                            watching = false;
                            None
                        }
                    };
                    if let Some(question) =
                        question.filter(|q| q.tool_use_id.starts_with(&self.tool_use_prefix))
                    {
                        let approve = self.answer(&question, &mut stream).await?;
                        if let Some(approve) = approve {
                            self.decide(&question, approve).await?;
                        }
                    }
                }
                () = &mut overall => {
                    let what = match self.purpose {
                        Purpose::Add => "added",
                        Purpose::Run => "run",
                    };
                    return Err(format!(
                        "routine {} was not {what}: no decision within {} s",
                        self.name,
                        REGISTER_WAIT.as_secs()
                    ));
                }
            }
        }
    }

    /// The person's answer (`Some(true)` approves); `None` when the question was resolved
    /// elsewhere while it was open.
    async fn answer(
        &mut self,
        question: &pb::PendingApproval,
        stream: &mut Streaming<pb::SubscribeResponse>,
    ) -> Result<Option<bool>, String> {
        let lang = match self.asking {
            Asking::Terminal(lang) => lang,
            Asking::Nobody => {
                self.refused_unasked = Some(match self.purpose {
                    Purpose::Add => needs_approval_line(&self.name, &question.tool),
                    Purpose::Run => needs_run_approval_line(&self.name),
                });
                return Ok(Some(false));
            }
        };
        let messages = Messages::builtin();
        let prompt = format_approval_prompt(
            &messages,
            lang,
            &ApprovalPrompt {
                tool: &question.tool,
                tier: tau_api::tiers::asked_tier(question.tier),
                arguments: &question.arguments,
                effect: &question.effect,
            },
        )
        .map_err(|e| e.to_string())?;
        match ask_while_open(&prompt, &question.approval_id, stream).await? {
            Answered::Person(approve) => Ok(Some(approve)),
            Answered::Elsewhere(resolution) => {
                eprintln!(
                    "\n(the approval was resolved elsewhere: {})",
                    tau_client::present::resolution_name(resolution)
                );
                Ok(None)
            }
            // Without its stream the question is closed by the hub; the answer is moot.
            Answered::StreamEnded => Ok(None),
        }
    }

    async fn decide(
        &mut self,
        question: &pb::PendingApproval,
        approve: bool,
    ) -> Result<(), String> {
        let request = tau_client::approvals::request(
            &question.approval_id,
            tau_client::approvals::decision(approve),
            &self.attachment,
        );
        within(self.deadline, self.hub.decide_approval(request))
            .await
            .map(|_| ())
            .map_err(|e| format!("cannot send the decision: {e}"))
    }
}

/// What became of a question shown on the terminal while its session's stream was watched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answered {
    /// The person typed a line: `true` approves.
    Person(bool),
    /// Something else resolved it first (its `ApprovalResolution`).
    Elsewhere(i32),
    /// The session's stream ended.
    StreamEnded,
}

/// Shows `prompt` on the terminal and waits for the person's line, or for approval
/// `approval_id` to be resolved elsewhere (seen on `stream`), or for the stream's end.
pub(crate) async fn ask_while_open(
    prompt: &str,
    approval_id: &str,
    stream: &mut Streaming<pb::SubscribeResponse>,
) -> Result<Answered, String> {
    let mut asking =
        approve::ask_on_tty(prompt).map_err(|e| format!("cannot ask on the terminal: {e}"))?;
    loop {
        tokio::select! {
            line = asking.line() => {
                return Ok(Answered::Person(line.as_deref().is_some_and(is_approval_answer)));
            }
            message = stream.message() => match message {
                Ok(Some(pb::SubscribeResponse {
                    kind: Some(subscribe_response::Kind::Event(event)),
                })) => {
                    if let Some(Kind::ApprovalResolved(resolved)) = &event.kind
                        && resolved.approval_id == approval_id
                    {
                        return Ok(Answered::Elsewhere(resolved.resolution));
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return Ok(Answered::StreamEnded),
            },
        }
    }
}

/// Waits for a hub call at most `deadline`; the error as a short text.
pub(crate) async fn within<T>(
    deadline: Duration,
    future: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, String> {
    tau_client::call::within(deadline, future)
        .await
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unasked_line_says_how_to_approve() {
        let line = needs_approval_line("lamp-off", "demo_physical_action");
        assert!(line.contains("needs your approval"), "{line}");
        assert!(line.contains("without --json"), "{line}");
        assert!(!line.contains('\n'));
        let line = needs_run_approval_line("lamp-off");
        assert!(line.contains("was not run"), "{line}");
        assert!(line.contains("tau routine run lamp-off"), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn json_never_asks() {
        assert_eq!(Asking::detect(true, Lang::En), Asking::Nobody);
    }
}
