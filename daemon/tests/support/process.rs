//! Helpers for tests that spawn the real `taud` against a temporary installation: a temp TAU_HOME
//! (with a one-second heartbeat) and TAU_DATA_DIR, a free loopback port, polling with deadlines,
//! a raw HTTP/1.1 GET, and gRPC channels over the Unix socket and over TCP.
// Test-support code: a failed set-up step must fail the test at once, loudly.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tau_api::hub_files::{CrashReport, HubPaths, HubState};

/// How long any wait in these tests may take.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// Polls `cond` every 20 ms until it returns `Some`, or panics after [`DEADLINE`].
pub fn wait_for<T>(what: &str, mut cond: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = cond() {
            return value;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A port that was free a moment ago (bound to 127.0.0.1:0, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `taud` this crate's tests were built with.
fn taud_bin() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_taud"))
}

/// A temporary installation for `taud`.
pub struct Install {
    pub tmp: crate::support::temp::TestDir,
    pub home: PathBuf,
    pub data: PathBuf,
    pub port: u16,
    pub extra_env: Vec<(String, String)>,
    /// `ulimit` arguments the hub starts under (e.g. `-n 1024`), through `/bin/sh`.
    pub ulimit: Option<String>,
}

impl Install {
    pub fn new() -> Self {
        Self::with_config("[hub]\nheartbeat_seconds = 1\n")
    }

    pub fn with_config(toml: &str) -> Self {
        let tmp = crate::support::temp::dir();
        let home = tmp.path().join("home");
        let data = tmp.path().join("data");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(tmp.path().join("user")).unwrap();
        std::fs::write(home.join("tau.toml"), toml).unwrap();
        std::fs::create_dir_all(home.join("persona")).unwrap();
        std::fs::write(home.join("persona/persona.md"), "You are tau.\n").unwrap();
        Self {
            home,
            data,
            port: free_port(),
            extra_env: Vec::new(),
            ulimit: None,
            tmp,
        }
    }

    pub fn paths(&self) -> HubPaths {
        HubPaths::in_dir(self.data.join("hub"))
    }

    pub fn command(&self) -> Command {
        self.command_of(taud_bin())
    }

    /// [`Install::command`] for another `taud` binary (a build with other features).
    pub fn command_of(&self, taud: &Path) -> Command {
        let mut cmd = match &self.ulimit {
            // `exec` keeps the pid: the shell becomes taud.
            Some(limits) => {
                let mut sh = Command::new("/bin/sh");
                sh.arg("-c")
                    .arg(format!("ulimit {limits} && exec \"$0\" \"$@\""))
                    .arg(taud);
                sh
            }
            None => Command::new(taud),
        };
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.tmp.path().join("user"))
            .env("TAU_HOME", &self.home)
            .env("TAU_DATA_DIR", &self.data)
            .env("TAU_HUB_PORT", self.port.to_string())
            .current_dir(self.tmp.path())
            .stdin(Stdio::null());
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Starts `taud` with stderr captured to a file.
    pub fn spawn(&self) -> Hub {
        self.spawn_of(taud_bin())
    }

    /// [`Install::spawn`] of another `taud` binary (a build with other features).
    pub fn spawn_of(&self, taud: &Path) -> Hub {
        let n = std::fs::read_dir(self.tmp.path()).unwrap().count();
        let stderr_path = self.tmp.path().join(format!("stderr-{n}.log"));
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let child = self
            .command_of(taud)
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        Hub {
            child: Some(child),
            stderr_path,
        }
    }

    /// Runs `taud` to completion (for refused starts), with a deadline.
    pub fn run_to_exit(&self) -> (ExitStatus, String) {
        self.run_to_exit_of(taud_bin())
    }

    /// [`Install::run_to_exit`] of another `taud` binary (a build with other features).
    pub fn run_to_exit_of(&self, taud: &Path) -> (ExitStatus, String) {
        let mut hub = self.spawn_of(taud);
        let status = hub.wait_exit();
        (status, hub.stderr())
    }

    pub fn state(&self) -> Option<HubState> {
        let text = std::fs::read_to_string(self.paths().state_file).ok()?;
        serde_json::from_str(&text).ok()
    }

    pub fn crash_reports(&self) -> Vec<CrashReport> {
        match std::fs::read_to_string(self.paths().crash_reports_file) {
            Ok(text) => text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Waits until the hub with `pid` is serving: state.json names it and says every service
    /// started (`ready_at`), /health answers and the socket exists.
    pub fn wait_ready(&self, pid: u32) {
        wait_for("the hub to be ready", || {
            let state = self.state()?;
            (state.pid == pid
                && state.listening_port.is_some()
                && state.ready_at.is_some()
                && self.paths().socket.exists())
            .then_some(())
        });
        wait_for("/health", || {
            http_get(self.port, "/health", "127.0.0.1").ok()
        });
    }
}

/// A running `taud`; killed on drop.
pub struct Hub {
    pub child: Option<Child>,
    pub stderr_path: PathBuf,
}

impl Hub {
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid() as i32), signal).unwrap();
    }

    /// Waits for the process to exit (with the deadline) and reaps it.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let child = self.child.as_mut().unwrap();
        wait_for("taud to exit", || child.try_wait().unwrap())
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take()
            && child.try_wait().ok().flatten().is_none()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A raw HTTP/1.1 GET with the given Host header: (status code, body).
pub fn http_get(port: u16, path: &str, host: &str) -> std::io::Result<(u16, String)> {
    http_request(
        port,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
    )
}

/// Sends `request` as is and reads the answer: (status code, body).
pub fn http_request(port: u16, request: &str) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(request.as_bytes())?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad response: {response:?}")))?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// GET as JSON (status must be 200).
pub fn get_json(port: u16, path: &str) -> serde_json::Value {
    let (status, body) = http_get(port, path, "127.0.0.1").unwrap();
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// `GET /status` with the hub's token, as JSON (status must be 200).
pub fn get_status(install: &Install) -> serde_json::Value {
    let token = std::fs::read_to_string(install.paths().token_file).unwrap();
    let request = format!(
        "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        token.trim()
    );
    let (status, body) = http_request(install.port, &request).unwrap();
    assert_eq!(status, 200, "/status: {body}");
    serde_json::from_str(&body).unwrap()
}

/// A gRPC channel over the hub's Unix socket, connected as every client connects.
pub async fn uds_channel(socket: &Path) -> tonic::transport::Channel {
    tau_client::connect::unix_channel(socket, Duration::from_secs(10))
        .await
        .unwrap()
}

/// A gRPC channel over TCP loopback.
pub async fn tcp_channel(port: u16) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// A request carrying `authorization: Bearer <token>` when a token is given.
pub fn with_token<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    request
}
