//! A test's temporary directory, owned by the test (or its fixture) for its life and removed when
//! dropped, even when a hub core, store or routine engine of the test still closes on another
//! thread: a file store writes its clean-stop mark and deferred records when its last handle goes,
//! which a task of a multi-threaded runtime may do while the directory is being removed, so one
//! removal can find a new file in a directory it just emptied.
//!
//! Invariant: after [`TestDir`]'s drop the directory is gone, unless it still refused removal
//! after [`REMOVAL_TRIES`] tries [`REMOVAL_PAUSE`] apart (then it is left, with a line on stderr
//! naming it). Nothing written after a removal recreates it: the stores create their root only
//! when opened.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Removal tries at most.
pub const REMOVAL_TRIES: u32 = 50;
/// Pause between two removal tries.
pub const REMOVAL_PAUSE: Duration = Duration::from_millis(20);

/// A fresh temporary directory (under `TMPDIR`), removed when dropped.
pub struct TestDir {
    path: PathBuf,
}

/// A new [`TestDir`].
pub fn dir() -> TestDir {
    TestDir::new()
}

impl TestDir {
    pub fn new() -> Self {
        let path = tempfile::Builder::new()
            .prefix(".tmp")
            .tempdir()
            .unwrap()
            .keep();
        Self { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Default for TestDir {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        for _ in 0..REMOVAL_TRIES {
            match std::fs::remove_dir_all(&self.path) {
                Ok(()) => return,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(REMOVAL_PAUSE),
            }
        }
        eprintln!("temporary directory left behind: {}", self.path.display());
    }
}
