//! The rule that a session opens only under the conversation manager it was recorded under
//! ([`check_context`]); any other fails with [`SessionContextMismatch`]. [`read_agent_for_mode`]
//! reads an agent record through that rule.
//!
//! Invariant: a session id is validated before any read.

use super::context_mode::{ContextMode, SessionContextMismatch};
use super::contract::SessionStore;
use super::id::validate_id;
use super::records::{ConversationManagerState, SessionAgent};
use super::store_error::{IdKind, SessionError};

/// Checks that a recorded conversation manager matches `mode`.
pub fn check_context(
    session_id: &str,
    state: &ConversationManagerState,
    mode: ContextMode,
) -> Result<(), SessionContextMismatch> {
    if state.name == mode.manager_name() {
        return Ok(());
    }
    let recorded = ContextMode::from_manager_name(&state.name)
        .map(|m| m.as_str().to_owned())
        .unwrap_or_else(|| state.name.clone());
    Err(SessionContextMismatch {
        session_id: session_id.to_owned(),
        recorded,
    })
}

/// Reads an agent record for an agent about to run under `mode`: `None` if the session has no such
/// agent yet, [`SessionError::ContextMismatch`] if it was recorded under the other manager.
pub fn read_agent_for_mode(
    store: &dyn SessionStore,
    session_id: &str,
    agent_id: &str,
    mode: ContextMode,
) -> Result<Option<SessionAgent>, SessionError> {
    validate_id(IdKind::Session, session_id)?;
    let Some(agent) = store.read_agent(session_id, agent_id)? else {
        return Ok(None);
    };
    check_context(session_id, &agent.conversation_manager_state, mode)?;
    Ok(Some(agent))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::now_utc;

    #[test]
    fn mismatch_text_is_exact() {
        let state = ConversationManagerState::new(ContextMode::Sliding);
        let err =
            check_context("20260929-153012-3f9a", &state, ContextMode::Summarize).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Session 20260929-153012-3f9a was recorded with a different [agent] context setting; set it back to sliding or start a new session"
        );
        check_context("x", &state, ContextMode::Sliding).unwrap();
        let err = check_context(
            "x",
            &ConversationManagerState::new(ContextMode::Summarize),
            ContextMode::Sliding,
        )
        .unwrap_err();
        assert_eq!(err.recorded, "summarize");
    }

    #[test]
    fn unknown_recorded_managers_are_named_as_recorded() {
        let mut state = ConversationManagerState::new(ContextMode::Sliding);
        state.name = "NullConversationManager".into();
        let err = check_context("x", &state, ContextMode::Sliding).unwrap_err();
        assert!(
            err.to_string()
                .contains("set it back to NullConversationManager")
        );
    }

    #[test]
    fn agent_records_carry_the_manager() {
        let agent = SessionAgent::new("tau", ContextMode::Summarize, now_utc());
        assert_eq!(
            ContextMode::from_manager_name(&agent.conversation_manager_state.name),
            Some(ContextMode::Summarize)
        );
    }
}
