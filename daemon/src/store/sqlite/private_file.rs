//! The sqlite database file is private from the moment it exists: created 0600 (never through a
//! symbolic link) before sqlite opens it, and narrowed to 0600, with its companion files, when an
//! older version left it wider. See ARCHITECTURE.md (store).
//!
//! Invariant: sqlite gives its `-wal`, `-shm` and journal files the mode of the database file, so
//! a 0600 database keeps every file beside it 0600.

use std::fs::{self, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;

use crate::store::store_error::SessionError;

/// The mode of the database and of every file sqlite makes beside it.
const PRIVATE_FILE_MODE: u32 = 0o600;

/// The files sqlite keeps beside a database in WAL mode (and the rollback journal of other modes).
const COMPANION_SUFFIXES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Creates the database file 0600 if missing (never through a symbolic link), before sqlite opens
/// it, so it never exists with sqlite's default 0644; narrows an existing database or companion
/// file that is wider than 0600.
pub(super) fn create_private_file(path: &Path) -> Result<(), SessionError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(PRIVATE_FILE_MODE)
        .custom_flags(OFlag::O_NOFOLLOW.bits())
        .open(path)
        .map_err(|err| {
            if err.raw_os_error() == Some(Errno::ELOOP as i32) {
                SessionError::Symlink {
                    path: path.to_path_buf(),
                }
            } else {
                SessionError::io(path, err)
            }
        })?;
    let meta = file.metadata().map_err(|err| SessionError::io(path, err))?;
    if !meta.is_file() {
        return Err(SessionError::corrupt(path.display(), "not a regular file"));
    }
    if meta.permissions().mode() & 0o777 != PRIVATE_FILE_MODE {
        file.set_permissions(fs::Permissions::from_mode(PRIVATE_FILE_MODE))
            .map_err(|err| SessionError::io(path, err))?;
    }
    for suffix in COMPANION_SUFFIXES {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let companion = PathBuf::from(name);
        match fs::symlink_metadata(&companion) {
            Ok(meta)
                if meta.is_file() && meta.permissions().mode() & 0o777 != PRIVATE_FILE_MODE =>
            {
                fs::set_permissions(&companion, fs::Permissions::from_mode(PRIVATE_FILE_MODE))
                    .map_err(|err| SessionError::io(&companion, err))?;
            }
            Ok(_) => {}
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            Err(err) => return Err(SessionError::io(companion, err)),
        }
    }
    Ok(())
}
