//! Helpers for tau's end-to-end tests: locating the workspace's binaries and giving each test an
//! isolated TAU_HOME and TAU_DATA_DIR.
//!
//! `CARGO_BIN_EXE_*` is only set inside the package that owns a binary, so the binaries are found
//! next to the test executable instead: `cargo test --workspace` builds every member's binaries into
//! the same target directory before any test runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

/// The path of a workspace binary (`tau` or `taud`) in the target directory of this test run.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the test executable")?;
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("test executable has no target directory")?;
    let path = profile_dir.join(name);
    if !path.is_file() {
        bail!(
            "{} is missing: run the tests with `cargo test --workspace` so the binaries are built",
            path.display()
        );
    }
    Ok(path)
}

/// An isolated installation for one test: its own TAU_HOME and TAU_DATA_DIR under a temporary
/// directory, and a HOME that points there too, so nothing touches the real home directory.
pub struct Sandbox {
    root: tempfile::TempDir,
}

impl Sandbox {
    /// A fresh, empty sandbox.
    pub fn new() -> anyhow::Result<Self> {
        let root = tempfile::tempdir().context("creating a temporary directory")?;
        std::fs::create_dir_all(root.path().join("home"))?;
        std::fs::create_dir_all(root.path().join("data"))?;
        Ok(Self { root })
    }

    /// The sandbox's TAU_HOME.
    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// The sandbox's TAU_DATA_DIR.
    pub fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// A command for a workspace binary, with the sandbox's environment and nothing inherited that
    /// could point at the real installation or real credentials.
    pub fn command(&self, name: &str) -> anyhow::Result<Command> {
        let mut command = Command::new(binary(name)?);
        command
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root.path())
            .env("TAU_HOME", self.home())
            .env("TAU_DATA_DIR", self.data_dir())
            .env("NO_COLOR", "1")
            .current_dir(self.root.path());
        Ok(command)
    }
}
