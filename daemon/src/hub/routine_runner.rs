//! How the hub fires a routine: a prompt as a turn on the routine's own session, on the routine's
//! `approval_channel`, queued behind any running turn like every turn; a tool action through the
//! gate of that session's agent, exempt only as `routine::fire_tool_action` allows.
//!
//! Invariants: the routine's session (`routine-<name>`) is created on its first firing and then
//! reused; a prompt firing's turn is started unattended: the runner's stream is nobody's
//! attachment, so it never decides, and the turn's tier-2 questions are held (shown to every
//! subscriber of the session, to the watchers of the approval channel, e.g. Telegram's card, and
//! to `tau approvals`) until `[routines] approval_timeout`, then end `timeout`: the call does not
//! run, the firing is recorded `failed` with a detail beginning `timeout:`, and the firings queued
//! behind it go on. A firing holds only a weak reference to the core, so the engine never keeps a
//! stopped hub alive; a prompt firing waits for its turn's end or for cancellation (hub
//! shutdown), never longer; a tool firing's `tool_call` record is stored in the routine's session
//! and taken back from the recorder, so nothing accumulates between turns, and the session is
//! flushed after it as after a turn (its events reach `events.jsonl` within the record interval). `schedule_routine`
//! proposals are registered here too, from the calling session and channel, as the model's
//! (always asked).

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::core::{CoreInner, HubCore, StartTurn};
use super::error::CoreError;
use super::event::EventKind;
use super::routine_api::AddRoutine;
use crate::agent::TurnEnd;
use crate::gate::{ApprovalOutcome, CallContext};
use crate::model::StopReason;
use crate::routine::{
    CatchUp, Creator, DueFiring, FiringResult, ROUTINE_CHANNEL, Routine, RoutineAction,
    RoutineRunner, fire_tool_action,
};
use crate::store::{Session, SessionError, SessionMeta};
use crate::tool::ToolCatalog;
use crate::tool::ToolContext;
use crate::tool::builtin::{RoutineProposal, RoutineProposer, ScheduleRoutine};

/// The engine's runner inside the hub.
pub(crate) struct HubRoutineRunner {
    pub(crate) core: Weak<CoreInner>,
}

#[async_trait]
impl RoutineRunner for HubRoutineRunner {
    async fn fire(
        &self,
        routine: &Routine,
        due: &DueFiring,
        cancel: CancellationToken,
    ) -> FiringResult {
        let Some(core) = HubCore::from_weak(&self.core) else {
            return failed("the hub is stopping".into());
        };
        match core.fire_routine(routine, due, cancel).await {
            Ok(result) => result,
            Err(err) => failed(err.to_string()),
        }
    }
}

/// How a prompt firing ended: failed with `timeout:` first when a question went unanswered.
fn firing_result(
    end: &TurnEnd,
    unanswered: &[String],
    channel: &str,
    hold: std::time::Duration,
) -> FiringResult {
    let ended = format!(
        "the turn ended: {}{}",
        end.stop_reason.as_str(),
        end.notice
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    );
    if !unanswered.is_empty() {
        return failed(format!(
            "timeout: nobody answered the question about {} on channel {channel} within {} s, so it did not run; {ended}",
            unanswered.join(", "),
            hold.as_secs()
        ));
    }
    if end.stop_reason == StopReason::EndTurn {
        FiringResult {
            succeeded: true,
            detail: end.text.chars().take(200).collect(),
        }
    } else {
        failed(ended)
    }
}

fn failed(detail: String) -> FiringResult {
    FiringResult {
        succeeded: false,
        detail,
    }
}

impl HubCore {
    async fn fire_routine(
        &self,
        routine: &Routine,
        due: &DueFiring,
        cancel: CancellationToken,
    ) -> Result<FiringResult, CoreError> {
        let session_id = self.ensure_routine_session(routine).await?;
        match &due.action {
            RoutineAction::Prompt {
                text,
                approval_channel,
            } => {
                let hold = self.options().routine_approval_timeout;
                let request = StartTurn {
                    session_id,
                    text: text.clone(),
                    channel: approval_channel.clone(),
                    idempotency_key: format!("routine-{}-{}", routine.name, due.number),
                };
                let mut stream = self.start_unattended_turn(request, hold).await?;
                // The tools whose question nobody answered in time.
                let mut unanswered: Vec<String> = Vec::new();
                loop {
                    let next = tokio::select! {
                        () = cancel.cancelled() => return Ok(failed("the hub stopped during the turn".into())),
                        next = stream.next() => next,
                    };
                    match next {
                        Ok(Some(event)) => match &event.kind {
                            EventKind::ApprovalResolved {
                                tool,
                                resolution: ApprovalOutcome::Timeout,
                                ..
                            } => unanswered.push(tool.clone()),
                            EventKind::TurnEnded(end) => {
                                return Ok(firing_result(end, &unanswered, approval_channel, hold));
                            }
                            _ => {}
                        },
                        Ok(None) => {
                            return Ok(failed("the turn's events ended before its end".into()));
                        }
                        Err(_) => return Ok(failed("the turn's events were cut off".into())),
                    }
                }
            }
            RoutineAction::Tool { .. } => {
                let runtime = self.runtime(&session_id, None).await?;
                let (agent, recorder) = runtime.agent();
                let ctx = CallContext {
                    session_id,
                    channel: ROUTINE_CHANNEL.to_owned(),
                    cancel,
                };
                let result = fire_tool_action(agent.gate(), routine, due, &ctx).await;
                recorder.take_tool_call(&format!("routine-{}-{}", routine.name, due.number));
                // Outside a turn nothing else writes the seed's files: do it now, as a turn's end
                // does, so events.jsonl tells the truth within the record interval.
                runtime.flush_session().await;
                Ok(result)
            }
        }
    }

    /// Creates the routine's session on its first firing.
    async fn ensure_routine_session(&self, routine: &Routine) -> Result<String, CoreError> {
        let session_id = routine.session_id();
        let meta = SessionMeta {
            channel: Some(ROUTINE_CHANNEL.to_owned()),
            profile: Some(self.options().profile.clone()),
            role: Some(self.options().default_role.clone()),
            context: Some(self.options().context),
            title: Some(format!("routine {}", routine.name)),
            ..SessionMeta::default()
        };
        let id = session_id.clone();
        self.blocking(move |store| {
            match store.create_session(&Session::new(id.as_str(), jiff::Timestamp::now())) {
                Ok(()) => Ok(store.write_meta(&id, &meta)?),
                Err(SessionError::SessionExists(_)) => Ok(()),
                Err(err) => Err(err.into()),
            }
        })
        .await?;
        Ok(session_id)
    }
}

/// What `schedule_routine` proposes, registered as `AddRoutine` from the calling session and
/// channel (so a tier-2 action is asked there, inside the running turn).
pub(crate) struct HubRoutineProposer {
    pub(crate) core: Weak<CoreInner>,
}

#[async_trait]
impl RoutineProposer for HubRoutineProposer {
    async fn propose(
        &self,
        proposal: RoutineProposal,
        ctx: &ToolContext,
    ) -> Result<String, String> {
        let core = HubCore::from_weak(&self.core).ok_or("the hub is stopping")?;
        let action = match (proposal.prompt, proposal.tool) {
            (Some(text), None) => RoutineAction::Prompt {
                text,
                approval_channel: ctx.channel.clone(),
            },
            (None, Some((tool, arguments))) => RoutineAction::Tool { tool, arguments },
            _ => return Err("give exactly one action: a prompt or a tool".to_owned()),
        };
        let name = proposal.name;
        let view = core
            .add_routine(AddRoutine {
                name: name.clone(),
                cron: proposal.cron,
                every: proposal.every,
                at: proposal.at,
                action,
                catch_up: if proposal.skip_missed {
                    CatchUp::Skip
                } else {
                    CatchUp::RunOnce
                },
                replace: false,
                session_id: ctx.session_id.clone(),
                channel: ctx.channel.clone(),
                created_by: Creator::Model,
            })
            .await
            .map_err(|e| e.to_string())?;
        let next = view.next_firing.map_or_else(
            || "none".to_owned(),
            |t| {
                t.to_zoned(crate::clock::istanbul())
                    .strftime("%Y-%m-%d %H:%M")
                    .to_string()
            },
        );
        Ok(format!(
            "Routine {name} registered ({}); next firing {next} (Europe/Istanbul).",
            view.schedule_text
        ))
    }
}

/// `catalog` with `schedule_routine` when routines are on (then `disabled` applied again, so the
/// owner can still remove it).
pub(crate) fn with_routine_tool(
    mut catalog: ToolCatalog,
    proposer: Option<&Arc<dyn RoutineProposer>>,
    disabled: &[String],
) -> ToolCatalog {
    if let Some(proposer) = proposer {
        if let Err(err) = catalog.add(Arc::new(ScheduleRoutine::new(Arc::clone(proposer)))) {
            tracing::warn!("schedule_routine left out: {err}");
        }
        catalog.disable(disabled);
    }
    catalog
}
