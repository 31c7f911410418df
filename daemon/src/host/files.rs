//! Small file primitives for the hub's directory: a private (0700) directory, atomic 0600 writes,
//! 0600 appends, reads that treat "missing" as `None`, and the RFC 3339 clock.
//!
//! Invariants: files are created 0600 and replaced atomically (write a temporary file in the same
//! directory, fsync, rename, fsync the directory), so a reader never sees a half-written
//! `state.json` and a power cut cannot bring back an older one (say, without the `stopped_at` that
//! tells a clean stop from a crash); the hub directory is never a symlink and is 0700, and every
//! directory created on the way to it (the data directory) is created 0700.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The current time as RFC 3339 in UTC, to the millisecond.
pub fn now_rfc3339() -> String {
    match jiff::Timestamp::now().round(jiff::Unit::Millisecond) {
        Ok(ts) => ts.to_string(),
        Err(_) => jiff::Timestamp::now().to_string(),
    }
}

/// Creates `dir` (and its missing parents, such as the data directory) 0700 from the start if
/// needed, and makes `dir` 0700. A symlink is refused.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(io::Error::other(format!(
                "{} is a symlink; the hub directory must be a real directory",
                dir.display()
            )));
        }
        Ok(meta) if !meta.is_dir() => {
            return Err(io::Error::other(format!(
                "{} exists and is not a directory",
                dir.display()
            )));
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        Err(e) => return Err(e),
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

pub use tau_api::durable_file::{remove_stale_temp_files, write_atomic};

/// Appends one line (a newline is added) to `path`, creating it 0600.
pub fn append_line(path: &Path, line: &str) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    file.write_all(&buf)?;
    file.sync_all()
}

/// Reads `path` as UTF-8; `Ok(None)` when it does not exist.
pub fn read_optional(path: &Path) -> io::Result<Option<String>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Removes `path`; a missing file is fine.
pub fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates `path` exclusively with mode 0600 (fails if it exists).
pub fn create_new_private(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn private_dir_is_0700_and_symlinks_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/hub");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        // The missing data directory above it is private too.
        assert_eq!(mode(&tmp.path().join("a")), 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(ensure_private_dir(&link).is_err());
    }

    #[test]
    fn only_the_temp_files_of_dead_writers_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        // A writer that is alive holds its temporary file locked; the pid in a name is no proof
        // (a restarted hub may have its predecessor's).
        let own = format!("state.json.tmp.{}", std::process::id());
        for name in [
            "state.json.tmp.4242",
            "token.tmp.1",
            "state.json",
            "notes.tmp",
            "live.json.tmp.5",
            own.as_str(),
        ] {
            fs::write(dir.path().join(name), "x").unwrap();
        }
        let live = fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("live.json.tmp.5"))
            .unwrap();
        live.lock().unwrap();
        fs::create_dir(dir.path().join("sub.tmp.7")).unwrap();
        assert_eq!(remove_stale_temp_files(dir.path()).unwrap(), 3);
        let mut left: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut expected = vec![
            "live.json.tmp.5".to_owned(),
            "notes.tmp".to_owned(),
            "state.json".to_owned(),
            "sub.tmp.7".to_owned(),
        ];
        expected.sort();
        assert_eq!(left, expected);
    }

    #[test]
    fn atomic_write_replaces_and_is_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(
            fs::read_dir(tmp.path()).unwrap().count(),
            1,
            "no temporary file left"
        );
    }

    #[test]
    fn append_adds_lines_and_read_optional_sees_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("x.jsonl");
        assert_eq!(read_optional(&path).unwrap(), None);
        append_line(&path, "a").unwrap();
        append_line(&path, "b").unwrap();
        assert_eq!(read_optional(&path).unwrap().unwrap(), "a\nb\n");
        assert_eq!(mode(&path), 0o600);
        remove_if_exists(&path).unwrap();
        remove_if_exists(&path).unwrap();
    }

    #[test]
    fn clock_is_rfc3339_utc() {
        let now = now_rfc3339();
        assert!(now.ends_with('Z'), "{now}");
        now.parse::<jiff::Timestamp>().unwrap();
    }
}
