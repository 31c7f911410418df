//! Helpers of the MCP tests: specs for the fake MCP server (`fixtures/fake_mcp.py`, run with
//! python3) and waits with deadlines.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use taud::mcp::{Backoff, McpManager, McpServerSpec, Phase, ServerStatus};
use taud::tool::Tier;

pub const DEADLINE: Duration = Duration::from_secs(15);

pub fn fake_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_mcp.py")
}

/// The fake server with every tool tiered except `untiered_tool`, short timeouts and fast
/// restarts; `extra` are more arguments of the script.
pub fn fake_spec(key: &str, extra: &[&str]) -> McpServerSpec {
    let env = tau_api::env::Env::from_process();
    let mut spec = McpServerSpec::new(key, "python3", &env)
        .tool("read_state", Tier::Read, None)
        .tool(
            "write_note",
            Tier::DigitalWrite,
            Some("Writes a note in the test's notebook."),
        )
        .tool(
            "lamp",
            Tier::Physical,
            Some("Switches the test lamp on or off."),
        )
        .tool("slow", Tier::Read, None)
        .tool("crash", Tier::Read, None)
        .tool("fail", Tier::Read, None)
        .tool("image", Tier::Read, None)
        .tool("big", Tier::Read, None)
        .tool("add_tool", Tier::Read, None)
        .tool("wipe", Tier::Read, None)
        .tool("progress", Tier::Read, None)
        .tool("notify_changes", Tier::Read, None)
        .tool("bump", Tier::Read, None)
        .tool("extra", Tier::Read, None)
        .tool("ghost", Tier::Read, None);
    spec.args = vec!["-u".into(), fake_script().display().to_string()];
    spec.args.extend(extra.iter().map(|s| s.to_string()));
    spec.startup_timeout = Duration::from_secs(5);
    spec.call_timeout = Duration::from_secs(5);
    spec.kill_grace = Duration::from_millis(500);
    spec.backoff = Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_millis(400),
    };
    spec
}

/// Waits until `check` holds for server `index`'s status.
pub async fn wait_for(
    manager: &McpManager,
    index: usize,
    what: &str,
    check: impl Fn(&ServerStatus) -> bool,
) -> ServerStatus {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let status = manager.status().remove(index);
        if check(&status) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited for {what}; status: {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The JSON lines the fake server wrote with `--log` so far.
pub fn log_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Waits until the fake server's `--log` holds a line for which `check` holds, and returns it.
pub async fn wait_log(
    path: &std::path::Path,
    what: &str,
    check: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(line) = log_lines(path).into_iter().find(|l| check(l)) {
            return line;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited for {what}; log: {:?}",
            log_lines(path)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn ready(manager: &McpManager, index: usize) -> ServerStatus {
    wait_for(manager, index, "ready", |s| s.state == Phase::Ready).await
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
pub fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

pub async fn wait_gone(pid: u32) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !gone(pid) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} is still alive"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
