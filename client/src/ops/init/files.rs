//! How `tau init` touches the file system: private directories, exclusive creation, atomic
//! replacement and appending one line to `.env`.
//!
//! Invariants: [`write_file`] without `replace` never clobbers a file (it creates with O_EXCL and
//! reports one that appeared meanwhile as kept); with `replace` the new content is written to a
//! temporary file in the same directory, synced and renamed over the old one, so a reader sees the
//! old or the new file, never half of one. Modes are set at creation, not after.

use std::fmt;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// Created.
    Created(PathBuf),
    /// Replaced (`--force`).
    Replaced(PathBuf),
    /// Left as it was.
    Kept { path: PathBuf, why: &'static str },
    /// A line was appended.
    Appended { path: PathBuf, what: String },
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Written::Created(path) => write!(f, "wrote    {}", path.display()),
            Written::Replaced(path) => write!(f, "replaced {}", path.display()),
            Written::Kept { path, why } => write!(f, "kept     {} ({why})", path.display()),
            Written::Appended { path, what } => write!(f, "added    {what} to {}", path.display()),
        }
    }
}

/// Creates `dir` and its missing parents with mode 0700 (an existing directory is left as it is).
pub fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))
}

/// Writes `text` to `path` with `mode`: a new file when `replace` is false (an existing one is
/// kept), else an atomic replacement of whatever is there.
pub fn write_file(path: &Path, text: &str, mode: u32, replace: bool) -> anyhow::Result<Written> {
    if replace {
        let existed = path.exists();
        replace_atomically(path, text, mode)?;
        return Ok(if existed {
            Written::Replaced(path.to_path_buf())
        } else {
            Written::Created(path.to_path_buf())
        });
    }
    let mut file = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            return Ok(Written::Kept {
                path: path.to_path_buf(),
                why: "exists; never overwritten",
            });
        }
        Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
    };
    let result = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all());
    if let Err(e) = result {
        // Leave no half-written file behind.
        let _ = std::fs::remove_file(path);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(Written::Created(path.to_path_buf()))
}

fn replace_atomically(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .with_context(|| format!("{} has no parent directory", path.display()))?;
    let name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| -> std::io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("replacing {}", path.display()));
    }
    Ok(())
}

/// Appends `line` (and a newline) to `path`, creating it with mode 0600; when the file does not end
/// with a newline, one is added first so the new line stands on its own.
pub fn append_line(path: &Path, line: &str) -> anyhow::Result<()> {
    let context = || format!("appending to {}", path.display());
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .with_context(context)?;
    let len = file.metadata().with_context(context)?.len();
    let mut text = String::new();
    if len > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::End(-1)).with_context(context)?;
        file.read_exact(&mut last).with_context(context)?;
        if last[0] != b'\n' {
            text.push('\n');
        }
    }
    text.push_str(line);
    text.push('\n');
    file.write_all(text.as_bytes()).with_context(context)?;
    file.sync_all().with_context(context)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_files_never_clobber() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        assert_eq!(
            write_file(&path, "one", 0o600, false).unwrap(),
            Written::Created(path.clone())
        );
        assert_eq!(mode(&path), 0o600);
        assert!(matches!(
            write_file(&path, "two", 0o600, false).unwrap(),
            Written::Kept { .. }
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one");
    }

    #[test]
    fn replacing_is_atomic_and_sets_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "old").unwrap();
        assert_eq!(
            write_file(&path, "new", 0o644, true).unwrap(),
            Written::Replaced(path.clone())
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(mode(&path), 0o644);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left behind");
    }

    #[test]
    fn append_adds_a_missing_newline_and_creates_privately() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        append_line(&path, "A=1").unwrap();
        assert_eq!(mode(&path), 0o600);
        std::fs::write(&path, "A=1\nB=2").unwrap();
        append_line(&path, "C=3").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "A=1\nB=2\nC=3\n");
    }

    #[test]
    fn private_dirs_are_0700() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        create_private_dir(&nested).unwrap();
        assert_eq!(mode(&nested), 0o700);
        assert_eq!(mode(&dir.path().join("a")), 0o700);
    }
}
