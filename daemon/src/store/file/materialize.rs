//! A batch serialized once, and the writing of its files. An append ([`encode_batch`]) serializes
//! each event and message once: the journal line is made of those bytes, and the same bytes are
//! what a materialization writes later, `events.jsonl`'s lines ([`EventsFile`]) and each message's
//! file ([`MessagesDir::create`]), without serializing (or copying the records) again.
//!
//! Invariants:
//! - [`encode_batch`] writes the journal's version 2 line exactly as `journal_replay`'s
//!   `encode_line` of the same record would (a test holds them equal), checksum included.
//! - A message file gets its name only whole (written to a temporary file of the store's pattern
//!   in the held directory, `O_EXCL`, never through a link, 0600, then given the name without
//!   replacing anything: `renameat2(RENAME_NOREPLACE)` on Linux, a link elsewhere), so a crash
//!   leaves no torn file even when the journal line that held it is damaged too. A name taken
//!   already is left as it is.
//! - A held directory or file is only ever used by the journal entry that opened it; one found
//!   no longer at its path (a directory replaced behind the store's back) is opened again.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde_json::Value;

use super::fsutil::{FILE_MODE, Named, name_new, open_error};
use super::journal_replay::{CRC_FIELD, JOURNAL_VERSION};
use super::jsonl::Appender;
use super::layout::{EVENTS_FILE, message_file_name};
use super::sync_pool::HeldDir;
use crate::store::contract::Durability;
use crate::store::records::SessionMessage;
use crate::store::store_error::SessionError;

/// An agent's messages directory, held open: message files are looked up and created relative
/// to it, without walking their path again.
pub(super) struct MessagesDir {
    path: PathBuf,
    dir: File,
    /// The directory's device and inode when opened.
    id: (u64, u64),
}

impl MessagesDir {
    /// Opens the directory at `path` (never through a link).
    pub(super) fn open(path: PathBuf) -> Result<Self, SessionError> {
        let dir = OpenOptions::new()
            .read(true)
            .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW).bits())
            .open(&path)
            .map_err(|err| open_error(&path, err))?;
        let meta = dir.metadata().map_err(|err| SessionError::io(&path, err))?;
        Ok(Self {
            id: (meta.dev(), meta.ino()),
            path,
            dir,
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this is the directory `meta` (a look at its path) describes.
    pub(super) fn is(&self, meta: &std::fs::Metadata) -> bool {
        self.id == (meta.dev(), meta.ino())
    }

    /// Whether anything has message `id`'s name here.
    pub(super) fn holds(&self, id: u64) -> bool {
        fstatat(
            &self.dir,
            message_file_name(id).as_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .is_ok()
    }

    /// Creates message `id`'s file holding `bytes` (not synced); `Ok(false)`, nothing written,
    /// if the name is taken. The bytes go to a temporary file first, given the name once whole
    /// ([`MessagesDir::name_new`]): a process killed in the middle leaves only the temporary
    /// file (removed on the next open), never a torn message whose journal line may be lost too.
    pub(super) fn create(&self, id: u64, bytes: &[u8]) -> Result<bool, SessionError> {
        let name = message_file_name(id);
        // One materialization at a time writes a session's files (its entry's lock), so a
        // name of the store's temporary pattern without a random part is free; one a failed
        // write left is removed first.
        let temp = format!(".{name}.{TEMP_MARK}.tmp");
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mode = Mode::from_bits_truncate(FILE_MODE);
        let fd = match openat(&self.dir, temp.as_str(), flags, mode) {
            Err(Errno::EEXIST) => {
                let _ = unlinkat(&self.dir, temp.as_str(), UnlinkatFlags::NoRemoveDir);
                openat(&self.dir, temp.as_str(), flags, mode)
            }
            opened => opened,
        }
        .map_err(|errno| open_error(&self.path.join(&temp), errno.into()))?;
        let written = File::from(fd)
            .write_all(bytes)
            .map_err(|err| SessionError::io(self.path.join(&temp), err));
        let named = match written {
            Ok(()) => self.name_new(&temp, &name),
            Err(err) => Err(err),
        };
        // Renamed: the temporary name is gone already.
        if !matches!(named, Ok(Named::Renamed))
            && let Err(errno) = unlinkat(&self.dir, temp.as_str(), UnlinkatFlags::NoRemoveDir)
        {
            tracing::warn!(path = %self.path.join(&temp).display(), %errno, "could not remove a temporary file");
        }
        named.map(|named| named != Named::Taken)
    }

    /// Gives the whole temporary file `temp` the name `name` unless that name exists
    /// ([`name_new`]).
    fn name_new(&self, temp: &str, name: &str) -> Result<Named, SessionError> {
        name_new(self.dir.as_fd(), Path::new(temp), Path::new(name))
            .map_err(|errno| SessionError::io(self.path.join(name), errno.into()))
    }
}

impl HeldDir for MessagesDir {
    /// Syncs message `id`'s file, opened relative to this directory (one not there is
    /// nothing to sync).
    fn sync_message(&self, id: u64) -> Result<(), SessionError> {
        let name = message_file_name(id);
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = match openat(&self.dir, name.as_str(), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Ok(()),
            Err(errno) => return Err(open_error(&self.path.join(&name), errno.into())),
        };
        File::from(fd)
            .sync_all()
            .map_err(|err| SessionError::io(self.path.join(&name), err))
    }

    /// Syncs the directory itself (the names created in it).
    fn sync(&self) -> Result<(), SessionError> {
        self.dir
            .sync_all()
            .map_err(|err| SessionError::io(&self.path, err))
    }
}

/// The random part of a materialization's temporary file name (see [`MessagesDir::create`]).
const TEMP_MARK: &str = "00000000";

/// A message journaled and not yet materialized: its directory, id and file's bytes.
pub(super) struct PendingMessage {
    pub(super) dir: Arc<MessagesDir>,
    pub(super) id: u64,
    pub(super) bytes: Vec<u8>,
}

impl PendingMessage {
    /// Writes the message's file (not synced); a file there already is kept.
    pub(super) fn write(&self) -> Result<(), SessionError> {
        if !self.dir.create(self.id, &self.bytes)? {
            // Refused at the append, so only someone writing behind the store's back.
            tracing::warn!(
                path = %self.dir.path().join(message_file_name(self.id)).display(),
                "a journaled message's file exists already; kept"
            );
        }
        Ok(())
    }
}

/// A session's `events.jsonl`, held open between materializations.
#[derive(Default)]
pub(super) struct EventsFile(Option<Appender>);

impl EventsFile {
    /// Appends `lines` (whole lines) unsynced, opening the file first when not held.
    pub(super) fn append(&mut self, session_dir: &Path, lines: &[u8]) -> Result<(), SessionError> {
        let appender = match &mut self.0 {
            Some(appender) => appender,
            None => self.0.insert(Appender::open(session_dir, EVENTS_FILE)?),
        };
        let appended = appender.append(lines, Durability::NoSync);
        if appended.is_err() {
            // Its end is not known now: opened again at the next append.
            self.0 = None;
        }
        appended
    }
}

/// A batch serialized once: its journal line, its events as `events.jsonl` lines, and each
/// message's id and file bytes.
pub(super) struct EncodedBatch {
    pub(super) line: Vec<u8>,
    pub(super) event_lines: Vec<u8>,
    pub(super) messages: Vec<(u64, Vec<u8>)>,
}

fn json_error(err: serde_json::Error) -> SessionError {
    SessionError::corrupt("journal record", err)
}

/// Serializes a batch: `events` (each once), and `messages` of `agent_id` (each once; `agent_id`
/// is written only with messages), as a journal line whose first line began with `events_len`.
pub(super) fn encode_batch(
    events_len: Option<u64>,
    agent_id: &str,
    events: &[Value],
    messages: &[SessionMessage],
) -> Result<EncodedBatch, SessionError> {
    let mut event_lines = Vec::with_capacity(256 * events.len());
    let mut ends = Vec::with_capacity(events.len());
    for event in events {
        serde_json::to_writer(&mut event_lines, event).map_err(json_error)?;
        ends.push(event_lines.len());
        event_lines.push(b'\n');
    }
    let messages = messages
        .iter()
        .map(|message| {
            Ok((
                message.message_id,
                serde_json::to_vec(message).map_err(json_error)?,
            ))
        })
        .collect::<Result<Vec<_>, SessionError>>()?;
    let body: usize = messages.iter().map(|(_, bytes)| bytes.len() + 1).sum();
    let mut line = Vec::with_capacity(96 + agent_id.len() + event_lines.len() + body);
    // The fields in `JournalLine`'s order, each as serde writes it (`encode_line`).
    write!(line, "{{\"v\":{JOURNAL_VERSION}")
        .map_err(|err| SessionError::io("journal record", err))?;
    if let Some(len) = events_len {
        write!(line, ",\"events_len\":{len}")
            .map_err(|err| SessionError::io("journal record", err))?;
    }
    if !messages.is_empty() {
        line.extend_from_slice(b",\"agent_id\":");
        serde_json::to_writer(&mut line, agent_id).map_err(json_error)?;
    }
    if !events.is_empty() {
        line.extend_from_slice(b",\"events\":[");
        let mut start = 0;
        for (n, &end) in ends.iter().enumerate() {
            if n > 0 {
                line.push(b',');
            }
            line.extend_from_slice(&event_lines[start..end]);
            start = end + 1;
        }
        line.push(b']');
    }
    if !messages.is_empty() {
        line.extend_from_slice(b",\"messages\":[");
        for (n, (_, bytes)) in messages.iter().enumerate() {
            if n > 0 {
                line.push(b',');
            }
            line.extend_from_slice(bytes);
        }
        line.push(b']');
    }
    let crc = crc32fast::hash(&line);
    line.extend_from_slice(CRC_FIELD);
    writeln!(line, "{crc:08x}\"}}").map_err(|err| SessionError::io("journal record", err))?;
    Ok(EncodedBatch {
        line,
        event_lines,
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::super::journal_replay::{JournalLine, encode_line};
    use super::*;
    use crate::store::records::SessionMessage;
    use serde_json::json;

    fn message(id: u64, text: &str) -> SessionMessage {
        SessionMessage::new(
            id,
            crate::message::Message::user_text(text),
            crate::store::records::now_utc(),
        )
    }

    #[test]
    fn a_batch_is_encoded_as_its_journal_line() {
        let events = vec![
            json!({"type": "turn", "n": 1}),
            json!({"type": "x", "s": "é\n\"q\""}),
        ];
        let messages = vec![message(3, "hello"), message(4, "a \"quoted\"\nline")];
        let cases = [
            (Some(12), events.clone(), messages.clone()),
            (None, events.clone(), Vec::new()),
            (Some(0), Vec::new(), messages.clone()),
            (None, Vec::new(), Vec::new()),
        ];
        for (events_len, events, messages) in cases {
            let batch = encode_batch(events_len, "tau", &events, &messages).unwrap();
            let record = JournalLine {
                v: JOURNAL_VERSION,
                events_len,
                agent_id: (!messages.is_empty()).then(|| "tau".to_owned()),
                events: events.clone(),
                messages: messages.clone(),
            };
            let mut expected = Vec::new();
            encode_line(&record, &mut expected).unwrap();
            assert_eq!(
                String::from_utf8(batch.line).unwrap(),
                String::from_utf8(expected).unwrap()
            );
            let lines: Vec<Value> =
                crate::store::file::jsonl::parse_lines(Path::new("events"), &batch.event_lines);
            assert_eq!(lines, events);
            for ((id, bytes), message) in batch.messages.iter().zip(&messages) {
                assert_eq!(*id, message.message_id);
                let read: SessionMessage = serde_json::from_slice(bytes).unwrap();
                assert_eq!(&read, message);
            }
        }
    }

    #[test]
    fn a_message_file_is_created_once() {
        let dir = tempfile::tempdir().unwrap();
        let messages = MessagesDir::open(dir.path().to_path_buf()).unwrap();
        assert!(!messages.holds(7));
        assert!(messages.create(7, b"{}").unwrap());
        assert!(messages.holds(7));
        assert!(!messages.create(7, b"[]").unwrap());
        let path = dir.path().join(message_file_name(7));
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, FILE_MODE);
        let link = dir.path().join(message_file_name(8));
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(messages.holds(8), "a link holds the name");
        assert!(!messages.create(8, b"x").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        // A temporary file a failed write left is no obstacle, and none is left behind.
        std::fs::write(dir.path().join(".000009.json.00000000.tmp"), b"stale").unwrap();
        assert!(messages.create(9, b"[]").unwrap());
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["000007.json", "000008.json", "000009.json"]);
    }
}
