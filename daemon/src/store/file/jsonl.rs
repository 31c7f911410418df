//! Append-only JSON-lines files of the file backend: each session's `events.jsonl` and the sessions
//! directory's listing index. Each session's `journal.jsonl` is appended here too
//! ([`append_bytes`]), but read by `journal`, which checks every line's checksum.
//!
//! Invariants and the torn-line policy:
//! - An append is one `write` of complete lines (`O_APPEND`; one line, or the lines of one batch),
//!   then one `fdatasync` with `Durability::Full`. If the file does not end with a newline (an
//!   earlier append was torn by a crash), the first line is prefixed with one, so a torn fragment
//!   never swallows the next record.
//! - On read, a torn last line (no trailing newline) is skipped silently: its append never returned.
//!   A line in the middle that does not parse (a torn fragment terminated by a later append, or
//!   damage) is skipped with a warning, so one bad line never makes a history unreadable. Lines are
//!   never rewritten in place.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::contract::Durability;
use crate::store::file::fsutil::{FILE_MODE, open_error, read_into, sync_dir};
use crate::store::store_error::SessionError;

/// Appends one record as a line to `dir/name` (created 0600 if missing).
pub(crate) fn append_line<T: Serialize>(
    dir: &Path,
    name: &str,
    record: &T,
    durability: Durability,
) -> Result<(), SessionError> {
    append_lines(dir, name, std::slice::from_ref(record), durability)
}

/// Appends `records`, one line each, to `dir/name` (created 0600 if missing) with one write and
/// one sync.
pub(crate) fn append_lines<T: Serialize>(
    dir: &Path,
    name: &str,
    records: &[T],
    durability: Durability,
) -> Result<(), SessionError> {
    let mut lines = Vec::with_capacity(256);
    for record in records {
        serde_json::to_writer(&mut lines, record)
            .map_err(|err| SessionError::corrupt(dir.join(name).display(), err))?;
        lines.push(b'\n');
    }
    append_bytes(dir, name, &lines, durability)
}

/// Appends `lines`, complete lines each ending with a newline, to `dir/name` (created 0600 if
/// missing) with one write and one sync.
pub(crate) fn append_bytes(
    dir: &Path,
    name: &str,
    lines: &[u8],
    durability: Durability,
) -> Result<(), SessionError> {
    Appender::open(dir, name)?.append(lines, durability)
}

/// An append-only file held open between appends (`O_APPEND`, never through a link), so each
/// append is one write (and one sync) without an open or a look at the file's last byte: that
/// is known from the last append. After a failed append the file's end is not known, so its
/// holder drops it and opens it again.
pub(crate) struct Appender {
    file: File,
    path: PathBuf,
    /// The file does not end with a newline (an earlier append was torn by a crash).
    torn: bool,
    /// Created by this open: its directory is synced with the first synced append.
    created: bool,
}

impl Appender {
    /// Opens `dir/name` to append to it (created 0600 if missing).
    pub(crate) fn open(dir: &Path, name: &str) -> Result<Self, SessionError> {
        let path = dir.join(name);
        let open = |create: bool| {
            OpenOptions::new()
                .read(true)
                .append(true)
                .create_new(create)
                .mode(FILE_MODE)
                .custom_flags(OFlag::O_NOFOLLOW.bits())
                .open(&path)
        };
        let (file, created) = match open(false) {
            Ok(file) => (file, false),
            Err(err) if err.kind() == ErrorKind::NotFound => match open(true) {
                Ok(file) => (file, true),
                // Someone else created it in between.
                Err(err) if err.kind() == ErrorKind::AlreadyExists => {
                    (open(false).map_err(|err| open_error(&path, err))?, false)
                }
                Err(err) => return Err(open_error(&path, err)),
            },
            Err(err) => return Err(open_error(&path, err)),
        };
        let len = file
            .metadata()
            .map_err(|err| SessionError::io(&path, err))?
            .len();
        let mut torn = false;
        if len > 0 {
            let mut last = [0u8; 1];
            file.read_exact_at(&mut last, len - 1)
                .map_err(|err| SessionError::io(&path, err))?;
            torn = last[0] != b'\n';
        }
        Ok(Self {
            file,
            path,
            torn,
            created,
        })
    }

    /// Appends `lines`, complete lines each ending with a newline, with one write and (with
    /// `Durability::Full`) one `fdatasync`; the directory too after the file's creation.
    pub(crate) fn append(
        &mut self,
        lines: &[u8],
        durability: Durability,
    ) -> Result<(), SessionError> {
        let written = if self.torn {
            // Rare (an earlier append was cut short): still one write.
            let mut prefixed = Vec::with_capacity(lines.len() + 1);
            prefixed.push(b'\n');
            prefixed.extend_from_slice(lines);
            self.file.write_all(&prefixed)
        } else {
            self.file.write_all(lines)
        };
        written.map_err(|err| SessionError::io(&self.path, err))?;
        self.torn = false;
        if durability == Durability::Full {
            self.file
                .sync_data()
                .map_err(|err| SessionError::io(&self.path, err))?;
        }
        if self.created && durability == Durability::Full {
            if let Some(dir) = self.path.parent() {
                sync_dir(dir, durability)?;
            }
            self.created = false;
        }
        Ok(())
    }

    /// Cuts the file to nothing (unsynced).
    pub(crate) fn truncate(&mut self) -> Result<(), SessionError> {
        self.file
            .set_len(0)
            .map_err(|err| SessionError::io(&self.path, err))?;
        self.torn = false;
        Ok(())
    }
}

/// Reads every record of `path` (empty if the file does not exist), applying the torn-line policy.
pub(crate) fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, SessionError> {
    let mut buf = Vec::new();
    if !read_into(path, &mut buf)? {
        return Ok(Vec::new());
    }
    Ok(parse_lines(path, &buf))
}

/// Parses the content of a JSON-lines file; see the module documentation for what is skipped.
pub(crate) fn parse_lines<T: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Vec<T> {
    let mut records = Vec::new();
    let mut rest = bytes;
    let mut line_no = 0usize;
    while !rest.is_empty() {
        line_no += 1;
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            tracing::debug!(path = %path.display(), line = line_no, "skipping a torn last line");
            break;
        };
        let line = &rest[..end];
        rest = &rest[end + 1..];
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<T>(line) {
            Ok(record) => records.push(record),
            Err(err) => {
                tracing::warn!(path = %path.display(), line = line_no, %err, "skipping an unreadable line");
            }
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value, json};

    fn objects(bytes: &[u8]) -> Vec<Value> {
        parse_lines::<Map<String, Value>>(Path::new("e"), bytes)
            .into_iter()
            .map(Value::Object)
            .collect()
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let bytes = b"{\"a\":1}\n{\"b\":2}\n{\"c\":";
        assert_eq!(objects(bytes), vec![json!({"a": 1}), json!({"b": 2})]);
    }

    #[test]
    fn bad_middle_lines_are_skipped() {
        let bytes = b"{\"a\":1}\n{\"c\":\n[1]\n\n{\"b\":2}\n";
        assert_eq!(objects(bytes), vec![json!({"a": 1}), json!({"b": 2})]);
    }

    #[test]
    fn an_append_after_a_torn_line_starts_on_a_new_line() {
        let dir = tempfile::tempdir().unwrap();
        append_line(dir.path(), "e.jsonl", &json!({"a": 1}), Durability::Full).unwrap();
        let path = dir.path().join("e.jsonl");
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"torn\":").unwrap();
        append_line(dir.path(), "e.jsonl", &json!({"b": 2}), Durability::Full).unwrap();
        let read: Vec<Value> = read_lines(&path).unwrap();
        assert_eq!(read, vec![json!({"a": 1}), json!({"b": 2})]);
    }

    #[test]
    fn a_missing_file_reads_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read_lines::<Value>(&dir.path().join("none"))
                .unwrap()
                .is_empty()
        );
    }
}
