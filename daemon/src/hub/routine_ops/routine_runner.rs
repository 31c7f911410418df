//! How the hub fires a routine: a prompt as a turn on the routine's own session, on the routine's
//! `approval_channel`, queued behind any running turn like every turn; a tool action through the
//! gate of that session's agent, over the catalog a turn would start with now (the MCP and node
//! tools offered now), exempt only as `routine::fire_tool_action` allows.
//!
//! Invariants: the routine's session (`routine-<name>`) is created on its first firing and then
//! reused; a prompt firing's turn is started unattended: the runner's stream is nobody's
//! attachment, so it never decides, and the turn's tier-2 questions are held (shown to every
//! subscriber of the session, to the watchers of the approval channel, e.g. Telegram's card, and
//! to `tau approvals`) until `[routines] approval_timeout`, then end `timeout`: the call does not
//! run, the firing is recorded `failed` with a detail beginning `timeout:`, and the firings queued
//! behind it go on. A firing holds only a weak reference to the core's state, so the engine never
//! keeps a stopped hub alive; a prompt firing waits for its turn's end or for cancellation (hub
//! shutdown), never longer; a tool firing's `tool_call` record is stored in the routine's session
//! and taken back from the recorder, so nothing accumulates between turns, and the session is
//! flushed after it as after a turn (its events reach `events.jsonl` within the record interval).
//! (`schedule_routine` proposals are registered in `routine_api`.)

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::agent::TurnEnd;
use crate::gate::{ApprovalOutcome, CallContext};
use crate::hub::error::CoreError;
use crate::hub::events::EventKind;
use crate::hub::sessions::CoreState;
use crate::hub::sessions::{StartTurn, start_turn};
use crate::model::StopReason;
use crate::routine::{
    DueFiring, FiringResult, ROUTINE_CHANNEL, Routine, RoutineAction, RoutineRunner,
    fire_tool_action,
};
use crate::store::{Session, SessionError, SessionMeta};

/// The engine's runner inside the hub.
pub(crate) struct HubRoutineRunner {
    pub(crate) state: Weak<CoreState>,
}

#[async_trait]
impl RoutineRunner for HubRoutineRunner {
    async fn fire(
        &self,
        routine: &Routine,
        due: &DueFiring,
        cancel: CancellationToken,
    ) -> FiringResult {
        let Some(state) = self.state.upgrade() else {
            return failed("the hub is stopping".into());
        };
        match fire_routine(&state, routine, due, cancel).await {
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

async fn fire_routine(
    state: &Arc<CoreState>,
    routine: &Routine,
    due: &DueFiring,
    cancel: CancellationToken,
) -> Result<FiringResult, CoreError> {
    let session_id = ensure_routine_session(state, routine).await?;
    match &due.action {
        RoutineAction::Prompt {
            text,
            approval_channel,
        } => {
            let hold = state.options().routine_approval_timeout;
            let request = StartTurn {
                session_id,
                text: text.clone(),
                channel: approval_channel.clone(),
                idempotency_key: format!("routine-{}-{}", routine.name, due.number),
            };
            let mut stream = start_turn(state, request, Some(hold)).await?;
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
            let runtime = state.runtime(&session_id, None).await?;
            let (agent, recorder) = runtime.agent();
            // The catalog a turn would start with now (node tools lent since the session's last
            // turn among them): the tool is resolved and gated as a turn's call would be.
            agent.refresh_catalog();
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
async fn ensure_routine_session(state: &CoreState, routine: &Routine) -> Result<String, CoreError> {
    let session_id = routine.session_id();
    let meta = SessionMeta {
        channel: Some(ROUTINE_CHANNEL.to_owned()),
        profile: Some(state.options().profile.clone()),
        role: Some(state.options().default_role.clone()),
        context: Some(state.options().context),
        title: Some(format!("routine {}", routine.name)),
        ..SessionMeta::default()
    };
    let id = session_id.clone();
    state
        .blocking(move |store| {
            match store.create_session(&Session::new(id.as_str(), jiff::Timestamp::now())) {
                Ok(()) => Ok(store.write_meta(&id, &meta)?),
                Err(SessionError::SessionExists(_)) => Ok(()),
                Err(err) => Err(err.into()),
            }
        })
        .await?;
    Ok(session_id)
}
