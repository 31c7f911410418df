//! How the file backend stores new records ([`FileBackend::write_batch`]): a batch's events and
//! messages are one line of the session's journal, appended with one write and one sync (see
//! `journal`); their files follow later. One message (`create_message`) or one event
//! (`append_event`) is a batch of one.
//!
//! Invariants: a batch is durable whole or not at all (a journal line that is torn, or whose
//! checksum fails, is skipped on replay);
//! a message id already taken refuses the whole batch before anything is written; the session's
//! count and time are updated in memory once the batch is journaled (they reach `session.json` at
//! `flush_session`); a message is written only into a messages directory opened after a walk of
//! its path that found no link in any component, and held by the session's journal while one
//! look at its whole path still finds that directory.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use serde_json::Value;

use super::FileBackend;
use super::deferred_record::Deferred;
use super::fsutil::existing_dir_meta;
use super::layout::{AGENTS_DIR, MESSAGES_DIR};
use super::materialize::MessagesDir;
use crate::store::records::SessionMessage;
use crate::store::store_error::SessionError;

impl FileBackend {
    /// Journals `events`, then `messages` (see the module documentation).
    pub(super) fn write_batch(
        &self,
        session_id: &str,
        agent_id: &str,
        events: &[Value],
        messages: &[SessionMessage],
    ) -> Result<(), SessionError> {
        if events.is_empty() && messages.is_empty() {
            return Ok(());
        }
        // The agent is checked first, so a batch for a missing one writes nothing; its
        // directory also proves the session's, which is then not checked again.
        let messages_dir = match messages {
            [] => None,
            _ => Some(self.messages_dir_for(session_id, agent_id)?),
        };
        let session_dir = match messages_dir {
            Some(_) => self.root.join(session_id),
            None => self.require_session_dir(session_id)?,
        };
        self.journal_batch(
            session_id,
            &session_dir,
            messages_dir.as_ref().map(|dir| (agent_id, dir)),
            events,
            messages,
        )?;
        for message in messages {
            self.note_message(session_id, message)?;
        }
        Ok(())
    }

    /// The agent's messages directory, open: the one the session's journal holds while it is
    /// still the directory at its path (checked at every write), else opened now after a walk
    /// of its path that refuses a link in any component.
    fn messages_dir_for(
        &self,
        session_id: &str,
        agent_id: &str,
    ) -> Result<Arc<MessagesDir>, SessionError> {
        if let Some(dir) = self.held_messages_dir(session_id, agent_id) {
            // One look at the whole path (the last component not followed) instead of a walk
            // of four: a directory opened after a walk that found no link, and still the one
            // at its path, is written to through its descriptor, never through a path. (A
            // link put in place of a parent that leads back to the same directory would not
            // be noticed; files still go where the walk had found them.) Anything else is
            // walked again.
            if std::fs::symlink_metadata(dir.path()).is_ok_and(|meta| dir.is(&meta)) {
                return Ok(dir);
            }
        }
        let components = [session_id, AGENTS_DIR, agent_id, MESSAGES_DIR];
        let Some((path, meta)) = existing_dir_meta(&self.root, &components)? else {
            // Missing: the precise error.
            self.require_messages_dir(session_id, agent_id)?;
            return Err(SessionError::AgentNotFound {
                session_id: session_id.to_owned(),
                agent_id: agent_id.to_owned(),
            });
        };
        self.ensure_reconciled(session_id, &self.root.join(session_id));
        if let Some(dir) = self.held_messages_dir(session_id, agent_id)
            && dir.is(&meta)
        {
            return Ok(dir);
        }
        MessagesDir::open(path).map(Arc::new)
    }

    /// Keeps the session's new count and time in memory until `flush_session` (a crash before
    /// it leaves `session.json` behind its message files, which the next reconciliation repairs
    /// to the same values).
    fn note_message(&self, session_id: &str, message: &SessionMessage) -> Result<(), SessionError> {
        let mut deferred = self.lock_deferred();
        let file = match deferred.entry(session_id.to_owned()) {
            Entry::Occupied(entry) => {
                let entry = entry.into_mut();
                entry.stored = false;
                &mut entry.file
            }
            Entry::Vacant(entry) => {
                let file = self
                    .read_session_file(&self.root.join(session_id))?
                    .ok_or_else(|| SessionError::SessionNotFound(session_id.to_owned()))?;
                &mut entry
                    .insert(Deferred {
                        file,
                        flushing: false,
                        stored: false,
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
