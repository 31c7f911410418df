//! Helpers for tau's end-to-end tests: locating the workspace's binaries and giving each test an
//! isolated TAU_HOME and TAU_DATA_DIR.
//!
//! `CARGO_BIN_EXE_*` is only set inside the package that owns a binary, and `cargo test` does not
//! build other packages' binaries, so the first call to [`binary`] in a test process runs
//! `cargo build --workspace --bins` into the same target directory (a no-op when they are fresh;
//! cargo releases its build lock before tests run) and the binaries are found next to the test
//! executable.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context as _, bail};

/// The path of a workspace binary (`tau` or `taud`), built fresh for this test run.
pub fn binary(name: &str) -> anyhow::Result<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let profile_dir = BUILT
        .get_or_init(|| build_binaries().map_err(|error| format!("{error:#}")))
        .as_ref()
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    let path = profile_dir.join(name);
    if !path.is_file() {
        bail!("{} is missing after building the workspace", path.display());
    }
    Ok(path)
}

/// Builds every binary of the workspace into this test run's target directory and returns the
/// profile directory (`target/debug`) that holds them.
fn build_binaries() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the test executable")?;
    // target/<profile>/deps/<test> → target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .context("test executable has no target directory")?;
    let target_dir = profile_dir
        .parent()
        .context("test executable has no target directory")?;
    let release = profile_dir
        .file_name()
        .is_some_and(|name| name == "release");
    let mut command = Command::new(env!("CARGO"));
    command
        .args(["build", "--workspace", "--bins", "--quiet", "--target-dir"])
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if release {
        command.arg("--release");
    }
    let status = command.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --workspace --bins failed ({status})");
    }
    Ok(profile_dir.to_path_buf())
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

pub mod chat;

/// A `taud` started in a sandbox by [`Sandbox::start_hub`]; killed when dropped.
pub struct RunningHub {
    child: std::process::Child,
}

impl Drop for RunningHub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long [`Sandbox::start_hub`] waits for the hub's socket and state file.
pub const HUB_START_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// For a test whose tool (`what`) is missing here: fails when `.ci/run` requires it (`require_var`
/// is `1`, set where CI installs the tool), else says on stderr that the test is skipped and
/// `how` to run it. The caller then returns.
#[track_caller]
pub fn skip_unless_required(require_var: &str, what: &str, how: &str) {
    let required = std::env::var(require_var).is_ok_and(|v| v == "1");
    assert!(!required, "{require_var}=1 but {what}");
    eprintln!("skipped: {how}");
}

/// A loopback TCP port that was free a moment ago, for a hub's `TAU_HUB_PORT`.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Sandbox {
    /// Starts `taud` on `port` (output discarded) and waits until its socket and state file exist.
    pub fn start_hub(&self, port: u16) -> anyhow::Result<RunningHub> {
        let child = self
            .command("taud")?
            .env("TAU_HUB_PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("starting taud")?;
        let hub = RunningHub { child };
        let socket = self.data_dir().join("hub/taud.sock");
        let state = self.data_dir().join("hub/state.json");
        let started = std::time::Instant::now();
        while !(socket.exists() && state.exists()) {
            if started.elapsed() > HUB_START_DEADLINE {
                bail!("the hub never came up");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(hub)
    }
}
