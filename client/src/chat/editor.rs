//! The chat's input line: line editing and history (rustyline), with the history kept in a file
//! of the installation's data directory.
//!
//! Invariants: the history file is created 0600 (what a person types may be private) and only
//! lines sent to tau or typed as commands enter it, never an approval answer (those are read by
//! the approval prompt, not here); a history file that cannot be read or written never stops the
//! chat.

use std::path::{Path, PathBuf};

use rustyline::error::ReadlineError;
use rustyline::history::{FileHistory, History};
use rustyline::{Config, Editor};

/// What the person did at the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A line (without its newline).
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D on an empty line, or the end of piped input.
    Eof,
}

/// Why the line editor could not be used.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the input line: {0}")]
pub struct EditorError(#[from] ReadlineError);

/// The input line with its history.
pub struct LineEditor {
    editor: Editor<(), FileHistory>,
    history_file: Option<PathBuf>,
}

impl LineEditor {
    /// An editor whose history lives in `history_file` (loaded now when it exists).
    pub fn new(history_file: Option<PathBuf>) -> Result<Self, EditorError> {
        let config = Config::builder()
            .auto_add_history(false)
            .max_history_size(1000)?
            .history_ignore_space(true)
            .build();
        let mut editor = Editor::with_config(config)?;
        if let Some(file) = history_file.as_ref().filter(|file| file.is_file()) {
            let _ = editor.load_history(file);
        }
        Ok(Self {
            editor,
            history_file,
        })
    }

    /// Reads one line after showing `prompt`.
    pub fn read(&mut self, prompt: &str) -> Result<Input, EditorError> {
        match self.editor.readline(prompt) {
            Ok(line) => Ok(Input::Line(line)),
            Err(ReadlineError::Interrupted) => Ok(Input::Interrupted),
            Err(ReadlineError::Eof) => Ok(Input::Eof),
            Err(error) => Err(EditorError(error)),
        }
    }

    /// Remembers `line` in the history and appends it to the history file.
    pub fn remember(&mut self, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        let _ = self.editor.add_history_entry(line);
        if let Some(file) = &self.history_file {
            let _ = append(self.editor.history_mut(), file);
        }
    }
}

fn append(history: &mut FileHistory, file: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = file.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    // Create it 0600 before rustyline writes to it.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(file)?;
    history.append(file).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn remembered_lines_reach_a_private_history_file_and_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data/chat_history");
        let mut editor = LineEditor::new(Some(file.clone())).unwrap();
        editor.remember("turn on the lamp");
        editor.remember("   ");
        editor.remember("/sessions");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = LineEditor::new(Some(file)).unwrap();
        let entries: Vec<String> = again
            .editor
            .history()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(entries, ["turn on the lamp", "/sessions"]);
    }
}
