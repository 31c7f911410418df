//! The hub's Unix socket file: bound 0600 inside the 0700 hub directory, a stale socket from a
//! dead hub replaced, removed on a clean stop; and its [`Acceptor`], which records each peer's
//! credentials (`UdsConnectInfo`) on its requests for the same-uid check.
//!
//! Invariants: only a socket is ever removed (a regular file, directory or symlink at the path is
//! refused, never deleted); the caller holds the hub lock, so no live hub owns a socket found here.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use tokio::net::{UnixListener, UnixStream};
use tonic::transport::server::{Connected, UdsConnectInfo};

use crate::listen::Acceptor;

/// The hub socket's listener, served by [`crate::listen::serve`].
pub struct SocketAcceptor(pub UnixListener);

impl Acceptor for SocketAcceptor {
    type Io = UnixStream;
    type Info = UdsConnectInfo;

    async fn accept(&mut self) -> io::Result<(Self::Io, Self::Info)> {
        let (stream, _) = self.0.accept().await?;
        let info = stream.connect_info();
        Ok((stream, info))
    }
}

/// Binds the socket at `path`, replacing a stale one, and makes it 0600.
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            tracing::info!("replacing the stale hub socket {}", path.display());
            fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::other(format!(
                "{} exists and is not a socket; refusing to replace it",
                path.display()
            )));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Removes the socket file if it is (still) a socket.
pub fn remove(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => fs::remove_file(path),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stale_socket_is_replaced_and_others_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("taud.sock");
        let first = bind(&path).unwrap();
        drop(first);
        assert!(path.exists(), "a dropped listener leaves its file behind");
        let _second = bind(&path).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        remove(&path).unwrap();
        assert!(!path.exists());

        fs::write(&path, "not a socket").unwrap();
        assert!(bind(&path).is_err());
        remove(&path).unwrap();
        assert!(path.exists(), "a regular file is never removed");
    }
}
