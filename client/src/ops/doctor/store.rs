//! The sqlite session store's check for `tau doctor`: the database file `<TAU_DATA_DIR>/sessions.db`
//! is absent (created on first use), or a regular SQLite file that only its owner may read.
//!
//! Invariants: read-only and without SQLite itself (the client does not link a database): the file
//! is opened for reading only to compare its first 16 bytes with the SQLite header, and its mode is
//! read from its metadata; nothing is created or changed.

use std::io::{ErrorKind, Read as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use tau_api::paths::Paths;

use super::report::{Check, shell_quote};

/// The first 16 bytes of every SQLite 3 database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// The sqlite store's database file.
pub fn sqlite(paths: &Paths) -> Check {
    let file = paths.sqlite_file();
    let shown = file.display();
    let metadata = match std::fs::metadata(&file) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Check::ok(
                "sessions",
                format!("sqlite store at {shown} (created on first use)"),
            );
        }
        Err(e) => {
            return Check::fail("sessions", format!("cannot inspect {shown}: {e}"))
                .fix(format!("make {shown} a file you own"));
        }
    };
    if !metadata.is_file() {
        return Check::fail("sessions", format!("{shown} is not a regular file"))
            .fix(format!("move {shown} away; the store creates its database"));
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Check::fail(
            "sessions",
            format!("{shown} is open to group or others (mode {mode:04o})"),
        )
        .fix(format!("chmod 600 {}", shell_quote(&file)));
    }
    match header(&file) {
        Err(e) => Check::fail("sessions", format!("cannot read {shown}: {e}"))
            .fix(format!("chmod 600 {}", shell_quote(&file))),
        // SQLite treats an empty file as an empty database.
        Ok(None) => Check::ok("sessions", format!("sqlite store at {shown} (empty)")),
        Ok(Some(bytes)) if &bytes == SQLITE_HEADER => {
            Check::ok("sessions", format!("sqlite store at {shown}"))
        }
        Ok(Some(_)) => Check::fail("sessions", format!("{shown} is not an SQLite database")).fix(
            format!("move {shown} away (tau starts a new store) or restore it from a backup"),
        ),
    }
}

/// The first 16 bytes of `file`; `None` for an empty file; a shorter file yields what it has.
fn header(file: &Path) -> std::io::Result<Option<[u8; 16]>> {
    let mut opened = std::fs::File::open(file)?;
    let mut bytes = [0u8; 16];
    let mut read = 0;
    while read < bytes.len() {
        match opened.read(&mut bytes[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok((read > 0).then_some(bytes))
}
