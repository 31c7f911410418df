//! A sandboxed installation for driving the real `tau` binary: a temporary root holding the user's
//! home (HOME), TAU_HOME and TAU_DATA_DIR, a cleared environment, a hub port nobody listens on and
//! stdin that is not a terminal; plus the helpers the init, doctor and components tests share (a
//! one-shot HTTP server stands in for a hub).
// Test helpers: a failed set-up step is a failed test, so unwrapping is the right response here.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tau_api::config::Config;
use tau_api::env::Env;

/// A credential value the tests plant; it must never appear in any output.
pub const SECRET: &str = "sk-test-secret-value-123";

pub struct Sandbox {
    root: tempfile::TempDir,
    port: u16,
    vars: Vec<(String, String)>,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.stdout))
    }
}

/// A loopback port that nothing listens on (bound by the system, then released).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

impl Sandbox {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("user")).unwrap();
        Self {
            root,
            port: free_port(),
            vars: Vec::new(),
        }
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The user's home directory (HOME).
    pub fn user(&self) -> PathBuf {
        self.root.path().join("user")
    }

    /// TAU_HOME.
    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    /// TAU_DATA_DIR.
    pub fn data(&self) -> PathBuf {
        self.root.path().join("data")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Uses `port` as TAU_HUB_PORT.
    pub fn set_port(&mut self, port: u16) {
        self.port = port;
    }

    /// Sets a variable in the environment of every later run.
    pub fn var(&mut self, name: &str, value: &str) -> &mut Self {
        self.vars.push((name.to_string(), value.to_string()));
        self
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tau"));
        command
            .args(args)
            .env_clear()
            .env("HOME", self.user())
            .env("TAU_HOME", self.home())
            .env("TAU_DATA_DIR", self.data())
            .env("TAU_HUB_PORT", self.port.to_string())
            .current_dir(self.root.path())
            .stdin(Stdio::null());
        for (name, value) in &self.vars {
            command.env(name, value);
        }
        command
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let output = self.command(args).output().unwrap();
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        }
    }

    pub fn read(&self, path: impl AsRef<Path>) -> String {
        std::fs::read_to_string(self.root.path().join(path)).unwrap()
    }

    pub fn write(&self, path: impl AsRef<Path>, text: &str) {
        let path = self.root.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn chmod(&self, path: impl AsRef<Path>, mode: u32) {
        let path = self.root.path().join(path);
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// An installation that passes every check: `tau init` on the fake provider, a user.md of the
    /// user's own and a private data directory.
    pub fn healthy() -> Self {
        let sandbox = Self::new();
        let run = sandbox.run(&["init", "--provider", "fake", "--yes"]);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        sandbox.write("home/persona/user.md", "### Name\n\n- Ada\n");
        std::fs::create_dir(sandbox.data()).unwrap();
        sandbox.chmod("data", 0o700);
        sandbox
    }
}

/// The repository file at `path` (relative to the workspace root).
pub fn repository_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)).unwrap()
}

pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

// `tau doctor`

pub fn doctor(sandbox: &Sandbox) -> (Run, Value) {
    let run = sandbox.run(&["doctor", "--json"]);
    let json = run.json();
    (run, json)
}

/// The checks named `name`, as (status, message, fix).
pub fn checks<'a>(json: &'a Value, name: &str) -> Vec<(&'a str, &'a str, Option<&'a str>)> {
    json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["check"] == name)
        .map(|c| {
            (
                c["status"].as_str().unwrap(),
                c["message"].as_str().unwrap(),
                c["fix"].as_str(),
            )
        })
        .collect()
}

pub fn status(json: &Value, name: &str) -> Vec<String> {
    checks(json, name)
        .into_iter()
        .map(|(s, _, _)| s.to_string())
        .collect()
}

pub fn anthropic_config(sandbox: &Sandbox) {
    sandbox.write(
        "home/tau.toml",
        "[models.roles.brain]\nprovider = \"anthropic\"\nmodel_id = \"claude-sonnet-4-5\"\n",
    );
}

/// Serves one connection on a new loopback port with `answer`. Returns the port and a thread that
/// yields the request it read (empty when nobody connected within ten seconds).
pub fn serve_once(answer: String) -> (u16, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let handle = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return String::new(),
            }
        };
        stream.set_nonblocking(false).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.ends_with(b"\r\n\r\n") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let _ = stream.write_all(answer.as_bytes());
        String::from_utf8_lossy(&request).into_owned()
    });
    (port, handle)
}

/// The hub token [`serve_hub`] writes to the sandbox and expects.
pub const HUB_TOKEN: &str = "0123abcd";

/// A stand-in hub on a new loopback port: answers `count` connections, `GET /health` with
/// `{"ok": true}` and, like taud, `GET /status` with `status` only to a request carrying the token
/// it writes to the sandbox's `data/hub/token` (liveness only without it), anything else with 404.
/// Returns the port and a thread that yields the request lines it read (it stops after ten
/// seconds without a caller).
pub fn serve_hub(
    sandbox: &Sandbox,
    status: Value,
    count: usize,
) -> (u16, std::thread::JoinHandle<Vec<String>>) {
    std::fs::create_dir_all(sandbox.data().join("hub")).unwrap();
    sandbox.chmod("data/hub", 0o700);
    sandbox.write("data/hub/token", &format!("{HUB_TOKEN}\n"));
    sandbox.chmod("data/hub/token", 0o600);
    let authorization = format!("\r\nauthorization: bearer {HUB_TOKEN}\r\n");
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let handle = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while seen.len() < count {
            let mut stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Err(_) => break,
            };
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let request = String::from_utf8_lossy(&request).into_owned();
            let line = request.lines().next().unwrap_or_default().to_string();
            let (code, body) = if line.starts_with("GET /health ") {
                (
                    "200 OK",
                    r#"{"ok": true, "pid": 7, "uptime_s": 1}"#.to_string(),
                )
            } else if line.starts_with("GET /status ")
                && request.to_ascii_lowercase().contains(&authorization)
            {
                ("200 OK", status.to_string())
            } else if line.starts_with("GET /status ") {
                (
                    "200 OK",
                    r#"{"ok": true, "pid": 7, "uptime_s": 1}"#.to_string(),
                )
            } else {
                ("404 Not Found", "{}".to_string())
            };
            let answer = format!(
                "HTTP/1.1 {code}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
            seen.push(line);
        }
        seen
    });
    (port, handle)
}

/// A `/status` body whose hub started the control API and failed to start gRPC.
pub fn status_with_failed_grpc() -> Value {
    serde_json::json!({
        "role": "hub",
        "pid": 7,
        "services": [
            {"name": "control-api", "state": "started"},
            {"name": "grpc", "state": "failed", "error": "failed to start: cannot bind the socket"},
        ],
    })
}

// `tau init`

pub fn config_of(sandbox: &Sandbox) -> Config {
    Config::load(&sandbox.home().join("tau.toml"), &Env::new()).unwrap()
}

pub fn providers(config: &Config) -> Vec<&str> {
    config
        .models
        .roles
        .values()
        .map(|r| r.provider.as_str())
        .collect()
}

pub fn write_own_files(sandbox: &Sandbox) {
    sandbox.write("home/tau.toml", "# mine\n");
    sandbox.write("home/persona/persona.md", "my persona\n");
    sandbox.write("home/persona/user.example.md", "my example\n");
    sandbox.write("home/persona/user.md", "me\n");
    sandbox.write("home/.env.example", "MINE=\n");
}

// `tau components`

pub fn configured(disabled: &str, context: &str) -> Sandbox {
    let sandbox = Sandbox::healthy();
    let config = sandbox
        .read("home/tau.toml")
        .replace("disabled = []", &format!("disabled = [{disabled}]"))
        .replace("context = []", &format!("context = [{context}]"));
    sandbox.write("home/tau.toml", &config);
    sandbox
}
