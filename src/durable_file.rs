//! Small files replaced atomically and durably, shared by the hub's rooms and the Telegram channel.
//!
//! Owns: the one way tau replaces a small state file (`write_atomic`) and the clean-up of the
//! temporary files a killed process left (`remove_stale_temp_files`). Invariants: a reader sees
//! the old file or the new one, never a part; the new file is 0600; when `write_atomic` returns
//! `Ok`, the data and the rename are on disk (file and directory fsynced); a failed write leaves
//! no temporary file of its own behind. Temporary files are named `<name>.tmp.<pid>`, so clean-up
//! can tell another process's leftovers from this process's write in progress.
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Replaces `path` with `bytes` atomically and durably; the file is 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} has no file name", path.display())))?;
    let mut tmp_name = file_name.to_owned();
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
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

/// Removes every temporary file [`write_atomic`] left in `dir` when a process died between
/// writing and renaming (`<name>.tmp.<pid>` of another pid); other files are never touched. Call
/// it only while no other process writes there (the hub lock). Returns how many it removed.
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
    let own_pid = std::process::id().to_string();
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let stale = name.rsplit_once(".tmp.").is_some_and(|(stem, pid)| {
            !stem.is_empty()
                && only.is_none_or(|only| stem == only)
                && !pid.is_empty()
                && pid.bytes().all(|b| b.is_ascii_digit())
                && pid != own_pid
        });
        if stale && entry.file_type()?.is_file() {
            fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
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
        assert!(
            !dir.path()
                .join(format!("blocked.tmp.{}", std::process::id()))
                .exists()
        );
    }

    #[test]
    fn clean_up_removes_other_processes_leftovers_only() {
        let dir = tempfile::tempdir().unwrap();
        let stale = dir.path().join("mark.json.tmp.999999999");
        let other_stale = dir.path().join("state.json.tmp.12");
        let own = dir
            .path()
            .join(format!("mark.json.tmp.{}", std::process::id()));
        let odd = dir.path().join("mark.json.tmp.x1");
        let plain = dir.path().join("mark.json");
        for path in [&stale, &other_stale, &own, &odd, &plain] {
            fs::write(path, b"x").unwrap();
        }
        assert_eq!(
            remove_stale_temp_files_of(&dir.path().join("mark.json")).unwrap(),
            1
        );
        assert!(!stale.exists() && other_stale.exists() && own.exists() && odd.exists());
        assert_eq!(remove_stale_temp_files(dir.path()).unwrap(), 1);
        assert!(!other_stale.exists() && own.exists() && odd.exists() && plain.exists());
    }
}
