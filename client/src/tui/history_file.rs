//! The composer's history across runs: `<TAU_DATA_DIR>/tui_history`, a versioned text file (first
//! line [`HEADER`]), one entry per line with backslash, newline and carriage return escaped.
//!
//! Invariants:
//! - The file holds at most [`MAX_HISTORY`] entries (the newest) and is written 0600, whole, by
//!   a rename (a reader never sees half a file); what a person types may be private.
//! - Only lines sent from the composer are stored: a key the approval card took never reaches
//!   the composer, so it never reaches this file.
//! - A missing file is an empty history; a damaged one (another version, a bad escape, not
//!   UTF-8) is ignored with a log line, never fatal, and replaced at the next save.

use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::input::MAX_HISTORY;

/// The file's name in the data directory.
pub const FILE_NAME: &str = "tui_history";

/// The first line, naming the format's version.
pub const HEADER: &str = "#tau-history v1";

/// Why a history file was not read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot read it: {0}")]
    Read(#[from] io::Error),
    #[error("it does not start with {HEADER:?}")]
    Version,
    #[error("line {0} has an unknown escape")]
    Escape(usize),
}

/// The stored entries, oldest first (empty when there is no file or it is damaged).
pub fn load(path: &Path) -> Vec<String> {
    match read(path) {
        Ok(entries) => entries,
        Err(HistoryError::Read(error)) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(error) => {
            tracing::warn!("ignoring the input history {}: {error}", path.display());
            Vec::new()
        }
    }
}

fn read(path: &Path) -> Result<Vec<String>, HistoryError> {
    let text = std::fs::read_to_string(path)?;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(HistoryError::Version);
    }
    let mut entries = lines
        .enumerate()
        .map(|(at, line)| unescape(line).ok_or(HistoryError::Escape(at + 2)))
        .collect::<Result<Vec<_>, _>>()?;
    if entries.len() > MAX_HISTORY {
        entries.drain(..entries.len() - MAX_HISTORY);
    }
    Ok(entries)
}

/// Writes the newest [`MAX_HISTORY`] of `entries` (oldest first) to `path`, 0600.
pub fn save(path: &Path, entries: &[String]) -> io::Result<()> {
    let newest = &entries[entries.len().saturating_sub(MAX_HISTORY)..];
    let mut text = String::from(HEADER);
    text.push('\n');
    for entry in newest {
        text.push_str(&escape(entry));
        text.push('\n');
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let partial = path.with_extension("partial");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&partial)?;
    // A file left by an earlier run keeps its mode on open: set it.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&partial, path)
}

fn escape(entry: &str) -> String {
    let mut out = String::with_capacity(entry.len());
    for c in entry.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(line: &str) -> Option<String> {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '\\' => out.push('\\'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_with_newlines_and_backslashes_survive_a_round_trip_written_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data").join(FILE_NAME);
        let entries = vec![
            "hello".to_owned(),
            "two\nlines\r\nand a \\n that is not one".to_owned(),
            "/resume 20261130-010203-abcd".to_owned(),
        ];
        save(&path, &entries).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(
            text.starts_with("#tau-history v1\nhello\ntwo\\nlines\\r\\n"),
            "{text}"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load(&path), entries);
    }

    #[test]
    fn only_the_newest_entries_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let entries: Vec<String> = (0..MAX_HISTORY + 20).map(|i| format!("line {i}")).collect();
        save(&path, &entries).unwrap();
        let loaded = load(&path);
        assert_eq!(loaded.len(), MAX_HISTORY);
        assert_eq!(loaded.first().map(String::as_str), Some("line 20"));
        assert_eq!(
            loaded.last().map(String::as_str),
            Some(format!("line {}", MAX_HISTORY + 19).as_str())
        );
    }

    #[test]
    fn a_missing_or_damaged_file_is_an_empty_history() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert!(load(&path).is_empty());
        for damaged in [
            &b"#tau-history v9\nhello\n"[..],
            b"hello\n",
            b"#tau-history v1\nbad \\q escape\n",
            b"#tau-history v1\n\xff\xfe\n",
            b"",
        ] {
            std::fs::write(&path, damaged).unwrap();
            assert!(load(&path).is_empty(), "{damaged:?}");
        }
        // The next save replaces it.
        save(&path, &["fresh".to_owned()]).unwrap();
        assert_eq!(load(&path), ["fresh"]);
    }

    #[test]
    fn a_file_left_with_a_wider_mode_is_written_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let partial = path.with_extension("partial");
        std::fs::write(&partial, "old").unwrap();
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o644)).unwrap();
        save(&path, &["x".to_owned()]).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
