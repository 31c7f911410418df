//! Attachments: the live client streams that may decide approvals, and their [`Attachment`] guards.
//!
//! Invariants:
//! - An attachment becomes a viewer of exactly the approvals its stream shows (see the parent
//!   module doc): a Subscribe attachment of every approval pending on its session and channel when
//!   it attaches (its snapshot lists them) and of every one asked there later; a StartTurn
//!   attachment only of its own turn's.
//! - At most [`AttachLimits::per_session`] live attachments per session and
//!   [`AttachLimits::total`] overall; one more is refused with [`AttachError::TooMany`] and changes
//!   nothing (a `ResourceExhausted` [`CoreError`] for the caller). Held (cut-off) attachments count
//!   until their hold ends.
//! - Dropping the guard detaches: the attachment stops viewing, and every approval it was the last
//!   viewer of ends as `ChannelClosed`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{ApprovalRegistry, AttachmentEntry, Scope};
use crate::hub::error::CoreError;
use crate::hub::events::EventBus;
use crate::hub::ids::new_id;

/// Live attachments allowed per session by default.
pub const MAX_ATTACHMENTS_PER_SESSION: usize = 64;
/// Live attachments allowed over all sessions by default.
pub const MAX_ATTACHMENTS: usize = 1024;

/// How many live attachments the registry allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachLimits {
    pub per_session: usize,
    pub total: usize,
}

impl Default for AttachLimits {
    fn default() -> Self {
        Self {
            per_session: MAX_ATTACHMENTS_PER_SESSION,
            total: MAX_ATTACHMENTS,
        }
    }
}

/// An attachment that was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    #[error(
        "too many clients are attached ({live} live {scope}; at most {limit}); close a stream before opening another"
    )]
    TooMany {
        live: usize,
        limit: usize,
        scope: &'static str,
    },
}

impl From<AttachError> for CoreError {
    fn from(error: AttachError) -> Self {
        match error {
            AttachError::TooMany { .. } => Self::ResourceExhausted(error.to_string()),
        }
    }
}

impl ApprovalRegistry {
    /// Attaches a Subscribe stream on `bus`'s session and `channel`: it is shown every approval
    /// pending there (its snapshot lists them) and every one asked there later.
    pub fn attach(
        self: &Arc<Self>,
        bus: &Arc<EventBus>,
        channel: &str,
    ) -> Result<Attachment, AttachError> {
        self.attach_scoped(bus, channel, Scope::Session)
    }

    /// Attaches the StartTurn stream of turn `turn_id`: it is shown only that turn's approvals.
    pub fn attach_turn(
        self: &Arc<Self>,
        bus: &Arc<EventBus>,
        channel: &str,
        turn_id: &str,
    ) -> Result<Attachment, AttachError> {
        self.attach_scoped(bus, channel, Scope::Turn(turn_id.to_owned()))
    }

    fn attach_scoped(
        self: &Arc<Self>,
        bus: &Arc<EventBus>,
        channel: &str,
        scope: Scope,
    ) -> Result<Attachment, AttachError> {
        let id = new_id("att", self.ids.fetch_add(1, Ordering::Relaxed));
        let session_id = bus.session_id().to_owned();
        let mut state = self.lock();
        let total = state.attachments.len();
        if total >= self.limits.total {
            return Err(AttachError::TooMany {
                live: total,
                limit: self.limits.total,
                scope: "over all sessions",
            });
        }
        let on_session = state.per_session.get(&session_id).copied().unwrap_or(0);
        if on_session >= self.limits.per_session {
            return Err(AttachError::TooMany {
                live: on_session,
                limit: self.limits.per_session,
                scope: "on this session",
            });
        }
        let entry = AttachmentEntry {
            session_id: session_id.clone(),
            channel: channel.to_owned(),
            scope,
        };
        for pending in state.pending.values_mut() {
            if entry.shows(&pending.info) {
                pending.viewers.insert(id.clone());
            }
        }
        state.attachments.insert(id.clone(), entry);
        *state.per_session.entry(session_id.clone()).or_insert(0) += 1;
        Ok(Attachment {
            registry: Arc::clone(self),
            id,
            session_id,
            channel: channel.to_owned(),
        })
    }

    /// Marks a live attachment as held after a lag: it stays attached but no longer decides.
    pub(super) fn hold(&self, attachment_id: &str) {
        let mut state = self.lock();
        if state.attachments.contains_key(attachment_id) {
            state.held.insert(attachment_id.to_owned());
        }
    }

    /// Live attachments on a session, over all channels.
    pub fn attachments_on(&self, session_id: &str) -> usize {
        self.lock()
            .per_session
            .get(session_id)
            .copied()
            .unwrap_or(0)
    }

    /// How many live attachments other than `except` were shown the pending approval
    /// `approval_id` and could decide it (held ones excepted); 0 when it is not pending. Only
    /// tests ask: the hub itself never counts deciders, it waits for the first answer.
    #[cfg(test)]
    pub fn deciders_besides(&self, approval_id: &str, except: &str) -> usize {
        let state = self.lock();
        state.pending.get(approval_id).map_or(0, |pending| {
            pending
                .viewers
                .iter()
                .filter(|id| id.as_str() != except && !state.held.contains(id.as_str()))
                .count()
        })
    }

    /// Live attachments over all sessions.
    pub fn attachment_count(&self) -> usize {
        self.lock().attachments.len()
    }

    fn detach(&self, attachment_id: &str) {
        let unwatched: Vec<(String, Arc<EventBus>)> = {
            let mut state = self.lock();
            let Some(entry) = state.attachments.remove(attachment_id) else {
                return;
            };
            state.held.remove(attachment_id);
            if let Some(n) = state.per_session.get_mut(&entry.session_id) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    state.per_session.remove(&entry.session_id);
                }
            }
            let mut unwatched = Vec::new();
            for pending in state.pending.values_mut() {
                if pending.viewers.remove(attachment_id)
                    && pending.viewers.is_empty()
                    && !pending.info.held
                {
                    unwatched.push((
                        pending.info.request.approval_id.clone(),
                        Arc::clone(&pending.bus),
                    ));
                }
            }
            unwatched
        };
        self.close_unwatched(unwatched);
    }
}

/// One client's attachment on a session and channel; dropping it detaches.
pub struct Attachment {
    pub(super) registry: Arc<ApprovalRegistry>,
    pub(super) id: String,
    pub(super) session_id: String,
    pub(super) channel: String,
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("id", &self.id)
            .field("session_id", &self.session_id)
            .field("channel", &self.channel)
            .finish()
    }
}

impl Attachment {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Re-scopes a StartTurn attachment to the turn its stream turned out to carry (a repeated
    /// StartTurn carries the earlier turn, from its start): it is shown that turn's approvals.
    pub fn show_turn(&self, turn_id: &str) {
        let mut state = self.registry.lock();
        let Some(entry) = state.attachments.get_mut(&self.id) else {
            return;
        };
        entry.scope = Scope::Turn(turn_id.to_owned());
        let scope = AttachmentEntry {
            session_id: entry.session_id.clone(),
            channel: entry.channel.clone(),
            scope: entry.scope.clone(),
        };
        for pending in state.pending.values_mut() {
            if scope.shows(&pending.info) {
                pending.viewers.insert(self.id.clone());
            }
        }
    }
}

impl Drop for Attachment {
    fn drop(&mut self) {
        self.registry.detach(&self.id);
    }
}
