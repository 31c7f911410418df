//! The hub's own files, checked at every start: the data directory, the sessions directory, the
//! logs, `hub/`, `routines.json`, `spend.json`, the Telegram state and the SQLite database are put
//! back to 0700 (directories) and 0600 (files) when someone loosened them, and a `.env` or
//! `tau.toml` that others can read is warned about.
//!
//! Invariants: only what exists is touched, and only its group and other bits (a file is set to
//! 0600, a directory to 0700); a symlink is never followed or changed (it is reported); each fix is
//! reported once, naming the file and both modes, and a fix that fails is reported, never fatal;
//! the configuration files are only warned about (they belong to the person, who may share them on
//! purpose).

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tau_api::paths::Paths;

/// The mode the hub's directories are kept at.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode the hub's files are kept at.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// The hub's own directories and files under `paths` (whether or not they exist yet).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnFiles {
    pub dirs: Vec<PathBuf>,
    pub files: Vec<PathBuf>,
    /// Directories whose plain files are all the hub's (the Telegram state).
    pub dirs_of_files: Vec<PathBuf>,
}

impl OwnFiles {
    /// What a hub with `paths` keeps private; `data_files` are the names of its files in the data
    /// directory (`routines.json`, `spend.json`: their modules own the names).
    pub fn of(paths: &Paths, data_files: &[&str]) -> Self {
        let data = &paths.data_dir;
        Self {
            dirs: vec![
                data.clone(),
                paths.sessions_dir.clone(),
                paths.logs_dir.clone(),
                paths.hub.dir.clone(),
            ],
            files: data_files
                .iter()
                .map(|name| data.join(name))
                .chain(
                    ["sessions.db", "sessions.db-wal", "sessions.db-shm"]
                        .into_iter()
                        .map(|name| data.join(name)),
                )
                .collect(),
            dirs_of_files: vec![data.join("telegram")],
        }
    }
}

/// One change (or failed change) made to a file's mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeFix {
    pub path: PathBuf,
    pub was: u32,
    pub now: u32,
    /// Why it could not be changed, when it could not.
    pub failed: Option<String>,
}

impl std::fmt::Display for ModeFix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.failed {
            None => write!(
                f,
                "{} was {:04o}, readable by others; set to {:04o}",
                self.path.display(),
                self.was,
                self.now
            ),
            Some(why) => write!(
                f,
                "{} is {:04o}, readable by others, and could not be set to {:04o}: {why}",
                self.path.display(),
                self.was,
                self.now
            ),
        }
    }
}

/// Puts every existing path of `own` back to its private mode; returns what it changed or failed
/// to change (nothing when all was private already).
pub fn make_private(own: &OwnFiles) -> Vec<ModeFix> {
    let mut fixes = Vec::new();
    for dir in &own.dirs {
        fixes.extend(fix(dir, PRIVATE_DIR_MODE, true));
    }
    for file in &own.files {
        fixes.extend(fix(file, PRIVATE_FILE_MODE, false));
    }
    for dir in &own.dirs_of_files {
        fixes.extend(fix(dir, PRIVATE_DIR_MODE, true));
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            fixes.extend(fix(&entry.path(), PRIVATE_FILE_MODE, false));
        }
    }
    fixes
}

/// `path` set to `mode` when it exists with group or other bits; `None` when nothing was needed.
fn fix(path: &Path, mode: u32, dir: bool) -> Option<ModeFix> {
    let meta = fs::symlink_metadata(path).ok()?;
    let was = meta.permissions().mode() & 0o7777;
    if meta.file_type().is_symlink() {
        return Some(ModeFix {
            path: path.to_owned(),
            was,
            now: mode,
            failed: Some("it is a symlink; the hub leaves it alone".to_owned()),
        });
    }
    let kind_fits = if dir { meta.is_dir() } else { meta.is_file() };
    if !kind_fits || was & 0o077 == 0 {
        return None;
    }
    let failed = fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .err()
        .map(|e: io::Error| e.to_string());
    Some(ModeFix {
        path: path.to_owned(),
        was,
        now: mode,
        failed,
    })
}

/// One warning per configuration file (`.env`, `tau.toml`) that others can read.
pub fn readable_config_warnings(paths: &Paths) -> Vec<String> {
    [&paths.env_file, &paths.config_file]
        .into_iter()
        .filter_map(|path| {
            let meta = fs::metadata(path).ok()?;
            let mode = meta.permissions().mode() & 0o777;
            (mode & 0o044 != 0).then(|| {
                format!(
                    "{} is {mode:04o}: other users of this machine can read it{}; `chmod 600 {}` keeps it to you",
                    path.display(),
                    if path == &paths.env_file {
                        ", and it may hold API keys"
                    } else {
                        ""
                    },
                    path.display()
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILES: &[&str] = &["routines.json", "spend.json"];

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn set(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn loosened_files_are_put_back_and_each_fix_is_reported_once() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths::from_roots(tmp.path().join("home"), tmp.path().join("data"));
        let own = OwnFiles::of(&paths, FILES);
        for dir in &own.dirs {
            fs::create_dir_all(dir).unwrap();
            set(dir, 0o755);
        }
        let routines = paths.data_dir.join("routines.json");
        let spend = paths.data_dir.join("spend.json");
        fs::write(&routines, "{}").unwrap();
        fs::write(&spend, "{}").unwrap();
        set(&routines, 0o644);
        set(&spend, 0o640);
        let telegram = paths.data_dir.join("telegram");
        fs::create_dir(&telegram).unwrap();
        set(&telegram, 0o755);
        fs::write(telegram.join("owner.json"), "{}").unwrap();
        set(&telegram.join("owner.json"), 0o666);

        let fixes = make_private(&own);
        let fixed: Vec<&Path> = fixes.iter().map(|f| f.path.as_path()).collect();
        assert_eq!(fixes.len(), 8, "{fixes:#?}");
        assert!(fixes.iter().all(|f| f.failed.is_none()), "{fixes:#?}");
        for dir in &own.dirs {
            assert_eq!(mode(dir), 0o700, "{}", dir.display());
            assert!(fixed.contains(&dir.as_path()));
        }
        assert_eq!(mode(&routines), 0o600);
        assert_eq!(mode(&spend), 0o600);
        assert_eq!(mode(&telegram), 0o700);
        assert_eq!(mode(&telegram.join("owner.json")), 0o600);
        let line = fixes
            .iter()
            .find(|f| f.path == routines)
            .unwrap()
            .to_string();
        assert!(line.contains("routines.json was 0644"), "{line}");
        assert!(line.contains("set to 0600"), "{line}");

        // Already private: nothing to say the next time.
        assert!(make_private(&own).is_empty());
    }

    #[test]
    fn a_symlink_is_reported_and_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths::from_roots(tmp.path().join("home"), tmp.path().join("data"));
        fs::create_dir_all(&paths.data_dir).unwrap();
        set(&paths.data_dir, 0o700);
        let elsewhere = tmp.path().join("elsewhere.json");
        fs::write(&elsewhere, "{}").unwrap();
        set(&elsewhere, 0o644);
        std::os::unix::fs::symlink(&elsewhere, paths.data_dir.join("spend.json")).unwrap();
        let fixes = make_private(&OwnFiles::of(&paths, FILES));
        assert_eq!(fixes.len(), 1, "{fixes:#?}");
        assert!(fixes[0].to_string().contains("symlink"), "{}", fixes[0]);
        assert_eq!(mode(&elsewhere), 0o644, "the target is not touched");
    }

    #[test]
    fn configuration_files_others_can_read_are_warned_about() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths::from_roots(tmp.path().join("home"), tmp.path().join("data"));
        fs::create_dir_all(&paths.home).unwrap();
        fs::write(&paths.env_file, "ANTHROPIC_API_KEY=x\n").unwrap();
        fs::write(&paths.config_file, "").unwrap();
        set(&paths.env_file, 0o644);
        set(&paths.config_file, 0o600);
        let warnings = readable_config_warnings(&paths);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains(".env is 0644"), "{}", warnings[0]);
        assert!(warnings[0].contains("API keys"), "{}", warnings[0]);
        assert_eq!(mode(&paths.env_file), 0o644, "only warned about");
        set(&paths.env_file, 0o600);
        assert!(readable_config_warnings(&paths).is_empty());
    }
}
