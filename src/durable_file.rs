//! Small files replaced atomically and durably, shared by the hub's rooms and the Telegram channel.
//!
//! Owns: the one way tau replaces a small state file (`write_atomic`) and the clean-up of the
//! temporary files a killed process left (`remove_stale_temp_files`). Invariants: a reader sees
//! the old file or the new one, never a part; the new file is 0600; when `write_atomic` returns
//! `Ok`, the data and the rename are on disk (file and directory fsynced); a failed write leaves
//! no temporary file of its own behind. A temporary file (`<name>.tmp.<pid>.<random>`, one per
//! write; older builds wrote `<name>.tmp.<pid>`) is locked (`flock`) by its writer from before it
//! is written until it is renamed, and the lock dies with the writer: clean-up removes exactly the
//! temporary files nobody holds, whatever pid their name carries (a restarted hub may get its
//! predecessor's pid, as a container's first process does).
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt};
use std::path::Path;

/// How many times a write starts over when clean-up removed its temporary file under it.
const WRITE_ATTEMPTS: usize = 3;

/// Replaces `path` with `bytes` atomically and durably; the file is 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} has no file name", path.display())))?;
    let mut attempt = 0;
    let (tmp, file) = loop {
        attempt += 1;
        let mut tmp_name = file_name.to_owned();
        tmp_name.push(format!(".tmp.{}.{:016x}", std::process::id(), random_u64()));
        let tmp = path.with_file_name(tmp_name);
        match locked_temp(&tmp) {
            Ok(Some(file)) => break (tmp, file),
            Ok(None) if attempt < WRITE_ATTEMPTS => {}
            Ok(None) => {
                return Err(io::Error::other(format!(
                    "{} was removed while being written, {WRITE_ATTEMPTS} times",
                    tmp.display()
                )));
            }
            Err(e) => return Err(e),
        }
    };
    let result = (|| {
        let mut file = file;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        // The rename is durable only once the directory entry is.
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A random number for a temporary file's name, from the standard library's randomly keyed
/// hasher (no global state of our own).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// Creates the temporary file `tmp` and locks it; `None` when clean-up removed it before the lock
/// was taken (start over with another name).
fn locked_temp(tmp: &Path) -> io::Result<Option<File>> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(tmp)?;
    file.lock()?;
    let still_there = match fs::symlink_metadata(tmp) {
        Ok(meta) => {
            let own = file.metadata()?;
            meta.ino() == own.ino() && meta.dev() == own.dev()
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    Ok(still_there.then_some(file))
}

/// Removes every temporary file [`write_atomic`] left in `dir` when a process died between
/// writing and renaming (`<name>.tmp.<pid>[.<random>]` that no writer holds locked); other files are never
/// touched. Returns how many it removed.
pub fn remove_stale_temp_files(dir: &Path) -> io::Result<usize> {
    remove_stale(dir, None)
}

/// Like [`remove_stale_temp_files`], for the temporary files of `path` only.
pub fn remove_stale_temp_files_of(path: &Path) -> io::Result<usize> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Ok(0);
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    remove_stale(dir, Some(name))
}

fn remove_stale(dir: &Path, only: Option<&str>) -> io::Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let temporary = name.rsplit_once(".tmp.").is_some_and(|(stem, tail)| {
            let (pid, random) = tail.split_once('.').unwrap_or((tail, "0"));
            !stem.is_empty()
                && only.is_none_or(|only| stem == only)
                && !pid.is_empty()
                && pid.bytes().all(|b| b.is_ascii_digit())
                && !random.is_empty()
                && random.bytes().all(|b| b.is_ascii_hexdigit())
        });
        if temporary && entry.file_type()?.is_file() && remove_if_unheld(&entry.path())? {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Removes the temporary file at `path` unless a live writer holds its lock.
fn remove_if_unheld(path: &Path) -> io::Result<bool> {
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        // Removed while locked, so no writer takes it between the check and the removal.
        Ok(()) => match fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        },
        Err(fs::TryLockError::WouldBlock) => Ok(false),
        Err(fs::TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_write_replaces_the_file_privately_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn a_failed_write_reports_and_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"old").unwrap();
        // A directory where the file goes: the rename is refused.
        let blocked = dir.path().join("blocked");
        fs::create_dir(&blocked).unwrap();
        fs::write(blocked.join("inside"), b"x").unwrap();
        assert!(write_atomic(&blocked, b"new").is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
        let mut names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["blocked", "state.json"], "no temporary file left");
    }

    #[test]
    fn clean_up_removes_every_leftover_nobody_holds_whatever_its_pid() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join("mark.json.tmp.999999999");
        let other_stale = dir.path().join("state.json.tmp.12");
        // A killed hub whose successor got the same pid left this one.
        let same_pid = dir
            .path()
            .join(format!("mark.json.tmp.{}", std::process::id()));
        let held = dir.path().join("mark.json.tmp.77.0a1b2c3d4e5f6789");
        let odd = dir.path().join("mark.json.tmp.x1");
        let plain = dir.path().join("mark.json");
        for path in [&stale, &other_stale, &same_pid, &held, &odd, &plain] {
            fs::write(path, b"x").unwrap();
        }
        let writer = OpenOptions::new().write(true).open(&held).unwrap();
        writer.lock().unwrap();
        assert_eq!(
            remove_stale_temp_files_of(&dir.path().join("mark.json")).unwrap(),
            2
        );
        assert!(!stale.exists() && !same_pid.exists());
        assert!(held.exists() && other_stale.exists() && odd.exists());
        assert_eq!(remove_stale_temp_files(dir.path()).unwrap(), 1);
        assert!(!other_stale.exists() && held.exists() && odd.exists() && plain.exists());
        drop(writer);
        assert_eq!(remove_stale_temp_files(dir.path()).unwrap(), 1);
        assert!(!held.exists());
    }

    #[test]
    fn a_write_beside_a_leftover_of_the_same_pid_is_whole_and_the_leftover_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let leftover = dir
            .path()
            .join(format!("state.json.tmp.{}", std::process::id()));
        fs::write(&leftover, b"a much longer leftover of a killed write").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(remove_stale_temp_files_of(&path).unwrap(), 1);
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn writers_of_one_file_in_one_process_take_turns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::thread::scope(|scope| {
            for n in 0..8u8 {
                let path = &path;
                scope.spawn(move || {
                    for _ in 0..20 {
                        write_atomic(path, &[b'a' + n; 64]).unwrap();
                    }
                });
            }
        });
        let written = fs::read(&path).unwrap();
        assert_eq!(written.len(), 64);
        assert!(written.iter().all(|&b| b == written[0]), "{written:?}");
    }
}
