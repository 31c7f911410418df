//! How the file backend stores new records ([`FileBackend::write_batch`]): a batch's events are
//! appended to `events.jsonl` with one write and one sync, then its messages are linked one by
//! one in id order, each written whole and synced first, and their directory is synced once for
//! all of them. One message (`create_message`) is a batch of one.
//!
//! Invariants: a message is visible only complete and never overwritten (`TempFile::link_new`);
//! every message linked is synced, directory included, before the call returns, also when a later
//! one fails; the session's count and time are updated in memory only for messages linked (they
//! reach `session.json` at `flush_session`). A crash leaves a prefix of the batch: its events
//! first, then messages in id order.

use std::collections::hash_map::Entry;
use std::path::Path;

use serde_json::Value;

use super::deferred_record::Deferred;
use super::fsutil::{TempFile, sync_dir};
use super::layout::{EVENTS_FILE, message_file_name};
use super::{FileBackend, jsonl, to_json};
use crate::store::contract::Durability;
use crate::store::records::SessionMessage;
use crate::store::store_error::SessionError;

impl FileBackend {
    /// Appends `events`, then stores `messages` (see the module documentation).
    pub(super) fn write_batch(
        &self,
        session_id: &str,
        agent_id: &str,
        events: &[Value],
        messages: &[SessionMessage],
    ) -> Result<(), SessionError> {
        // The agent is checked first, so a batch for a missing one writes nothing; its
        // directory also proves the session's, which is then not checked again.
        let messages_dir = match messages {
            [] => None,
            _ => Some(self.require_messages_dir(session_id, agent_id)?),
        };
        if !events.is_empty() {
            let dir = match messages_dir {
                Some(_) => self.root.join(session_id),
                None => self.require_session_dir(session_id)?,
            };
            jsonl::append_lines(&dir, EVENTS_FILE, events, self.durability)?;
        }
        let Some(dir) = messages_dir else {
            return Ok(());
        };
        let mut linked = 0;
        let outcome = messages.iter().try_for_each(|message| {
            link_message(&dir, session_id, agent_id, message, self.durability)?;
            linked += 1;
            Ok(())
        });
        if linked > 0 {
            // A message is durable once its name is: one directory sync covers every link.
            sync_dir(&dir, self.durability)?;
            for message in &messages[..linked] {
                self.note_message(session_id, message)?;
            }
        }
        outcome
    }

    /// Keeps the session's new count and time in memory until `flush_session` (a crash before
    /// it leaves `session.json` behind its message files, which the next reconciliation repairs
    /// to the same values).
    fn note_message(&self, session_id: &str, message: &SessionMessage) -> Result<(), SessionError> {
        let mut deferred = self.lock_deferred();
        let file = match deferred.entry(session_id.to_owned()) {
            Entry::Occupied(entry) => &mut entry.into_mut().file,
            Entry::Vacant(entry) => {
                let file = self
                    .read_session_file(&self.root.join(session_id))?
                    .ok_or_else(|| SessionError::SessionNotFound(session_id.to_owned()))?;
                &mut entry
                    .insert(Deferred {
                        file,
                        flushing: false,
                    })
                    .file
            }
        };
        // The time a reconciliation would give: the newest message's, never backwards.
        file.session.updated_at = file.session.updated_at.max(message.created_at);
        // Saturating: a damaged count (or id) at the top of the range must not overflow.
        file.message_count = file
            .message_count
            .saturating_add(1)
            .max(message.message_id.saturating_add(1));
        Ok(())
    }
}

/// Writes `message` whole (synced) and links it under its own name; `MessageExists` if taken.
fn link_message(
    dir: &Path,
    session_id: &str,
    agent_id: &str,
    message: &SessionMessage,
    durability: Durability,
) -> Result<(), SessionError> {
    let name = message_file_name(message.message_id);
    let created =
        TempFile::write(dir, &name, &to_json(message)?, durability)?.link_new(&dir.join(&name))?;
    if created {
        Ok(())
    } else {
        Err(SessionError::MessageExists {
            session_id: session_id.to_owned(),
            agent_id: agent_id.to_owned(),
            message_id: message.message_id,
        })
    }
}
