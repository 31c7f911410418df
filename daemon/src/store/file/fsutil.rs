//! The file backend's disk primitives: symlink-refusing path walks and reads, private directories,
//! and the two atomic writes (create-new and replace) with fsync.
//!
//! Invariants:
//! - Directories are created 0700 and files 0600; nothing here ever deletes a record (only its own
//!   temporary files).
//! - No path component under the store root is followed if it is a symbolic link: directories are
//!   checked with `symlink_metadata`, files are opened with `O_NOFOLLOW`.
//! - A record becomes visible only complete: it is written to a temporary file in the same directory
//!   (name starting with `.`, never a valid id or message name), fsynced, then given its name
//!   without replacing anything ([`name_new`], create-new: refused if the name exists), renamed
//!   over it ([`replace`]), or written into the record's spare and exchanged with it
//!   ([`replace_through_spare`]). With `Durability::Full` the directory is fsynced before the
//!   operation counts as done.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::BorrowedFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, OFlag};
use nix::unistd::linkat;

use crate::store::contract::Durability;
use crate::store::id::random_hex8;
use crate::store::store_error::SessionError;

pub(crate) const DIR_MODE: u32 = 0o700;
pub(crate) const FILE_MODE: u32 = 0o600;

fn is_symlink_error(err: &std::io::Error) -> bool {
    err.raw_os_error() == Some(Errno::ELOOP as i32)
}

/// Maps an open error on `path`, turning `ELOOP` (the `O_NOFOLLOW` refusal) into `Symlink`.
pub(crate) fn open_error(path: &Path, err: std::io::Error) -> SessionError {
    if is_symlink_error(&err) {
        SessionError::Symlink {
            path: path.to_path_buf(),
        }
    } else {
        SessionError::io(path, err)
    }
}

/// `root/components…` if every component exists as a real directory; `None` if one is missing.
/// A symbolic link is `Symlink`, a file where a directory belongs is `Corrupt`.
pub(crate) fn existing_dir(
    root: &Path,
    components: &[&str],
) -> Result<Option<PathBuf>, SessionError> {
    Ok(existing_dir_meta(root, components)?.map(|(path, _)| path))
}

/// [`existing_dir`], with the last directory's metadata (that of `root` when `components` is
/// empty).
pub(crate) fn existing_dir_meta(
    root: &Path,
    components: &[&str],
) -> Result<Option<(PathBuf, fs::Metadata)>, SessionError> {
    let mut path = root.to_path_buf();
    let mut last = None;
    for component in components {
        path.push(component);
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(SessionError::Symlink { path });
            }
            Ok(meta) if meta.is_dir() => last = Some(meta),
            Ok(_) => {
                return Err(SessionError::corrupt(
                    path.display(),
                    "expected a directory",
                ));
            }
            Err(err) if err.kind() == ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(SessionError::io(path, err)),
        }
    }
    let meta = match last {
        Some(meta) => meta,
        None => fs::metadata(&path).map_err(|err| SessionError::io(&path, err))?,
    };
    Ok(Some((path, meta)))
}

/// Creates `parent/name` as a private directory; `Ok(true)` if it was created, `Ok(false)` if a real
/// directory was there already.
pub(crate) fn make_dir(parent: &Path, name: &str) -> Result<bool, SessionError> {
    let path = parent.join(name);
    match DirBuilder::new().mode(DIR_MODE).create(&path) {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == ErrorKind::AlreadyExists => {
            match existing_dir(parent, &[name])? {
                Some(_) => Ok(false),
                None => Err(SessionError::io(path, err)),
            }
        }
        Err(err) => Err(SessionError::io(path, err)),
    }
}

/// Creates the store root (and its parents) as private directories if missing; the root itself may
/// be a symbolic link the user set up.
pub(crate) fn make_root(root: &Path) -> Result<(), SessionError> {
    DirBuilder::new()
        .mode(DIR_MODE)
        .recursive(true)
        .create(root)
        .map_err(|err| SessionError::io(root, err))
}

/// fsyncs a directory so the names created or replaced in it are durable.
pub(crate) fn sync_dir(dir: &Path, durability: Durability) -> Result<(), SessionError> {
    if durability == Durability::NoSync {
        return Ok(());
    }
    let file = File::open(dir).map_err(|err| SessionError::io(dir, err))?;
    file.sync_all().map_err(|err| SessionError::io(dir, err))
}

/// Opens a file for reading without following a symbolic link; `None` if it does not exist.
pub(crate) fn open_read(path: &Path) -> Result<Option<File>, SessionError> {
    match OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(path)
    {
        Ok(file) => Ok(Some(file)),
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(None),
        Err(err) => Err(open_error(path, err)),
    }
}

/// Reads a whole file into `buf` (cleared first) without following a symbolic link; `false` if the
/// file does not exist.
pub(crate) fn read_into(path: &Path, buf: &mut Vec<u8>) -> Result<bool, SessionError> {
    buf.clear();
    let Some(mut file) = open_read(path)? else {
        return Ok(false);
    };
    file.read_to_end(buf)
        .map_err(|err| SessionError::io(path, err))?;
    Ok(true)
}

/// Reads and parses a JSON record; `None` if the file does not exist.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Option<T>, SessionError> {
    let mut buf = Vec::new();
    if !read_into(path, &mut buf)? {
        return Ok(None);
    }
    parse_json(path, &buf).map(Some)
}

/// [`read_json`] for a record replaced through a spare ([`replace_through_spare`]): a reader that
/// opened it just before two replacements holds the file the second one rewrites, so a record
/// that does not parse is read once more (its name then holds a whole one).
pub(crate) fn read_json_replaced<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Option<T>, SessionError> {
    match read_json(path) {
        Err(SessionError::Corrupt { .. }) => read_json(path),
        read => read,
    }
}

pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
) -> Result<T, SessionError> {
    serde_json::from_slice(bytes).map_err(|err| SessionError::corrupt(path.display(), err))
}

/// Refuses a record name that is a symbolic link (one missing is fine: it is about to be made).
fn refuse_symlink(target: &Path) -> Result<(), SessionError> {
    match fs::symlink_metadata(target) {
        Ok(meta) if meta.file_type().is_symlink() => Err(SessionError::Symlink {
            path: target.to_path_buf(),
        }),
        Ok(_) => Ok(()),
        Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
        Err(err) => Err(SessionError::io(target, err)),
    }
}

/// Writes `bytes` to `file` (at `path`), synced with `Durability::Full`.
fn write_synced(
    file: &mut File,
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), SessionError> {
    file.write_all(bytes)
        .map_err(|err| SessionError::io(path, err))?;
    if durability == Durability::Full {
        file.sync_all().map_err(|err| SessionError::io(path, err))?;
    }
    Ok(())
}

/// A complete, fsynced temporary file waiting to be linked or renamed to its name. Dropping it
/// removes the temporary name (never the record it was linked to).
pub(crate) struct TempFile {
    path: PathBuf,
    armed: bool,
}

impl TempFile {
    /// Writes `bytes` to a new temporary file in `dir` (fsynced with `Durability::Full`).
    pub(crate) fn write(
        dir: &Path,
        name: &str,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<Self, SessionError> {
        let path = dir.join(format!(".{name}.{}.tmp", random_hex8()?));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .custom_flags(OFlag::O_NOFOLLOW.bits())
            .open(&path)
            .map_err(|err| open_error(&path, err))?;
        let temp = TempFile { path, armed: true };
        write_synced(&mut file, &temp.path, bytes, durability)?;
        Ok(temp)
    }

    /// Where the content is until it gets its name.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Gives the content the name `target` unless that name exists (`Ok(false)` then). The
    /// directory is not fsynced here.
    pub(crate) fn name_new(mut self, target: &Path) -> Result<bool, SessionError> {
        let named = name_new(AT_FDCWD, &self.path, target)
            .map_err(|errno| SessionError::io(target, errno.into()))?;
        if named == Named::Renamed {
            self.armed = false;
        } else {
            self.remove();
        }
        Ok(named != Named::Taken)
    }

    /// Atomically replaces `target` (which must not be a symbolic link) with the content. The
    /// directory is not fsynced here.
    pub(crate) fn replace(mut self, target: &Path) -> Result<(), SessionError> {
        refuse_symlink(target)?;
        fs::rename(&self.path, target).map_err(|err| SessionError::io(target, err))?;
        self.armed = false;
        Ok(())
    }

    fn remove(&mut self) {
        if self.armed {
            self.armed = false;
            if let Err(err) = fs::remove_file(&self.path) {
                tracing::warn!(path = %self.path.display(), %err, "could not remove a temporary file");
            }
        }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        self.remove();
    }
}

/// How [`name_new`] named a temporary file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    /// Renamed: the temporary name is gone.
    Renamed,
    /// Linked: the temporary name is still there.
    Linked,
    /// The name was taken: the temporary file is still there.
    Taken,
}

/// Gives the whole temporary file `temp` the name `name` unless that name exists (relative
/// names are looked up in `dir`). On Linux one `renameat2(RENAME_NOREPLACE)`; elsewhere, or on a
/// file system without it, a link (the caller then removes the temporary name). A rename frees
/// no inode: on ext4 without a journal each inode freed in the last few minutes is looked at,
/// and passed over, by every later file creation in its group, a cost that grows with each
/// link-and-remove.
pub(crate) fn name_new(dir: BorrowedFd<'_>, temp: &Path, name: &Path) -> nix::Result<Named> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{RenameFlags, renameat2};
        match renameat2(dir, temp, dir, name, RenameFlags::RENAME_NOREPLACE) {
            Ok(()) => return Ok(Named::Renamed),
            Err(Errno::EEXIST) => return Ok(Named::Taken),
            // Not supported here: linked instead.
            Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => {}
            Err(errno) => return Err(errno),
        }
    }
    match linkat(dir, temp, dir, name, AtFlags::empty()) {
        Ok(()) => Ok(Named::Linked),
        Err(Errno::EEXIST) => Ok(Named::Taken),
        Err(errno) => Err(errno),
    }
}

/// Writes `dir/name` atomically if it does not exist yet (`Ok(false)` if it does), then fsyncs `dir`.
pub(crate) fn create_new(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    durability: Durability,
) -> Result<bool, SessionError> {
    let created = TempFile::write(dir, name, bytes, durability)?.name_new(&dir.join(name))?;
    if created {
        sync_dir(dir, durability)?;
    }
    Ok(created)
}

/// Replaces `dir/name` atomically, then fsyncs `dir`.
pub(crate) fn replace(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), SessionError> {
    TempFile::write(dir, name, bytes, durability)?.replace(&dir.join(name))?;
    sync_dir(dir, durability)
}

/// The name of the spare file kept beside `name` by [`replace_through_spare`]: a dot name that is
/// no record's and not the temporary pattern, so no listing, read or clean-up takes it.
fn spare_name(name: &str) -> String {
    format!(".{name}.spare")
}

/// Replaces `dir/name` atomically, then fsyncs `dir`, like [`replace`] but without freeing an
/// inode: the bytes are written into a spare file kept beside the record ([`spare_name`],
/// truncated first, synced with `Durability::Full`), which is then exchanged with the record
/// (`renameat2(RENAME_EXCHANGE)`), so the old record becomes the next replacement's spare. On
/// ext4 without a journal each inode freed in the last minutes is looked at by every later file
/// creation in its group, and a record replaced once a second (a session's `session.json`) would
/// add one a second. A torn spare is never read by name; a reader that opened the record before
/// two replacements can read its old file being rewritten as the spare, so such records are read
/// with [`read_json_replaced`]. The caller makes sure one replacement of a name
/// runs at a time (two would write one spare). Where the exchange is not available, the spare is
/// renamed over the record (the old one's inode freed, as [`replace`] does).
pub(crate) fn replace_through_spare(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), SessionError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let target = dir.join(name);
    refuse_symlink(&target)?;
    let spare = dir.join(spare_name(name));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(&spare)
        .map_err(|err| open_error(&spare, err))?;
    let io = |err| SessionError::io(&spare, err);
    // It becomes the record: private, whatever an earlier hand left on the spare.
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(SessionError::corrupt(spare.display(), "expected a file"));
    }
    if meta.mode() & 0o777 != FILE_MODE {
        file.set_permissions(fs::Permissions::from_mode(FILE_MODE))
            .map_err(io)?;
    }
    write_synced(&mut file, &spare, bytes, durability)?;
    drop(file);
    if !exchange(&spare, &target).map_err(|errno| SessionError::io(&target, errno.into()))? {
        fs::rename(&spare, &target).map_err(|err| SessionError::io(&target, err))?;
    }
    sync_dir(dir, durability)
}

/// Swaps the files at `a` and `b`; `Ok(false)` if that cannot be done here (`b` missing, or no
/// `RENAME_EXCHANGE`).
fn exchange(a: &Path, b: &Path) -> nix::Result<bool> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use nix::fcntl::{RenameFlags, renameat2};
        match renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT | Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => Ok(false),
            Err(errno) => Err(errno),
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (a, b);
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn create_new_never_replaces_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(create_new(dir.path(), "a.json", b"1", Durability::Full).unwrap());
        assert!(!create_new(dir.path(), "a.json", b"2", Durability::Full).unwrap());
        assert_eq!(fs::read(dir.path().join("a.json")).unwrap(), b"1");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        assert_eq!(mode(&dir.path().join("a.json")), FILE_MODE);
    }

    #[test]
    fn a_new_name_is_the_temporary_file_itself_and_never_replaces_one_taken() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (temp, target) = (dir.path().join(".a.tmp"), dir.path().join("a"));
        fs::write(&temp, b"one").unwrap();
        let inode = fs::metadata(&temp).unwrap().ino();
        let named = name_new(AT_FDCWD, &temp, &target).unwrap();
        // Renamed where the system can (no inode freed), else linked: the same file either way.
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert_eq!(named, Named::Renamed);
            assert!(!temp.exists());
        }
        assert_ne!(named, Named::Taken);
        assert_eq!(fs::metadata(&target).unwrap().ino(), inode);
        let other = dir.path().join(".b.tmp");
        fs::write(&other, b"two").unwrap();
        assert_eq!(name_new(AT_FDCWD, &other, &target).unwrap(), Named::Taken);
        assert_eq!(fs::read(&target).unwrap(), b"one");
        assert!(
            other.exists(),
            "a refused temporary file is the caller's to remove"
        );
    }

    #[test]
    fn replace_swaps_content_and_refuses_a_symlink_target() {
        let dir = tempfile::tempdir().unwrap();
        replace(dir.path(), "a.json", b"1", Durability::Full).unwrap();
        replace(dir.path(), "a.json", b"2", Durability::Full).unwrap();
        assert_eq!(fs::read(dir.path().join("a.json")).unwrap(), b"2");
        let outside = dir.path().join("outside");
        fs::write(&outside, b"keep").unwrap();
        symlink(&outside, dir.path().join("b.json")).unwrap();
        let err = replace(dir.path(), "b.json", b"x", Durability::Full).unwrap_err();
        assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
        assert_eq!(fs::read(&outside).unwrap(), b"keep");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            3,
            "temporary file left behind"
        );
    }

    #[test]
    fn a_replacement_through_the_spare_keeps_the_inodes_and_refuses_links() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let (record, spare) = (dir.path().join("a.json"), dir.path().join(".a.json.spare"));
        let ino = |path: &Path| fs::metadata(path).unwrap().ino();
        // No record yet: the spare becomes it.
        replace_through_spare(dir.path(), "a.json", b"one", Durability::Full).unwrap();
        assert_eq!(fs::read(&record).unwrap(), b"one");
        replace_through_spare(dir.path(), "a.json", b"two, longer", Durability::Full).unwrap();
        replace_through_spare(dir.path(), "a.json", b"3", Durability::Full).unwrap();
        assert_eq!(
            fs::read(&record).unwrap(),
            b"3",
            "a shorter one leaves no tail"
        );
        assert_eq!(mode(&record), FILE_MODE);
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            // The two files trade places: the old record is the next spare, no inode freed.
            let inodes = [ino(&record), ino(&spare)];
            assert_eq!(fs::read(&spare).unwrap(), b"two, longer");
            replace_through_spare(dir.path(), "a.json", b"4", Durability::Full).unwrap();
            assert_eq!([ino(&spare), ino(&record)], inodes);
            assert_eq!(fs::read(&record).unwrap(), b"4");
        }
        // A spare left readable by another hand becomes a private record.
        fs::set_permissions(&spare, fs::Permissions::from_mode(0o644)).unwrap();
        replace_through_spare(dir.path(), "a.json", b"5", Durability::Full).unwrap();
        assert_eq!(mode(&record), FILE_MODE);
        // Links are refused, for the record and for the spare, and nothing behind them changes.
        let outside = dir.path().join("outside");
        fs::write(&outside, b"keep").unwrap();
        symlink(&outside, dir.path().join("b.json")).unwrap();
        let err = replace_through_spare(dir.path(), "b.json", b"x", Durability::Full).unwrap_err();
        assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
        symlink(&outside, dir.path().join(".c.json.spare")).unwrap();
        let err = replace_through_spare(dir.path(), "c.json", b"x", Durability::Full).unwrap_err();
        assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
        assert_eq!(fs::read(&outside).unwrap(), b"keep");
    }

    #[test]
    fn reads_refuse_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("real"), b"{}").unwrap();
        symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
        let err = read_json::<serde_json::Value>(&dir.path().join("link")).unwrap_err();
        assert!(matches!(err, SessionError::Symlink { .. }), "{err}");
        assert!(
            read_json::<serde_json::Value>(&dir.path().join("none"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn walks_refuse_symlinked_and_non_directory_components() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert!(make_dir(root, "real").unwrap());
        assert!(!make_dir(root, "real").unwrap());
        assert_eq!(mode(&root.join("real")), DIR_MODE);
        symlink(root.join("real"), root.join("link")).unwrap();
        fs::write(root.join("file"), b"").unwrap();
        assert!(existing_dir(root, &["real"]).unwrap().is_some());
        assert!(existing_dir(root, &["missing", "x"]).unwrap().is_none());
        assert!(matches!(
            existing_dir(root, &["link", "x"]),
            Err(SessionError::Symlink { .. })
        ));
        assert!(matches!(
            make_dir(root, "link"),
            Err(SessionError::Symlink { .. })
        ));
        assert!(matches!(
            existing_dir(root, &["file"]),
            Err(SessionError::Corrupt { .. })
        ));
    }
}
