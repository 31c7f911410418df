//! A client that is not `tau`: `tests/python/drive_turn.py` generates Python stubs from proto/
//! with grpcio-tools and drives a turn and its approval over the hub's Unix socket.
//!
//! The interpreter is `TAU_TEST_PYTHON` (`.ci/run` installs grpcio and grpcio-tools into a venv and
//! points it there), else `python3`. Without grpcio the test says so and passes, unless
//! `TAU_REQUIRE_PYTHON_CLIENT=1` (set by `.ci/run`) makes that a failure.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

use tau_e2e::Sandbox;

fn python() -> Option<String> {
    let python = std::env::var("TAU_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let usable = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    usable.then_some(python)
}

#[test]
fn a_python_grpcio_client_drives_a_turn_and_an_approval() {
    let Some(python) = python() else {
        tau_e2e::skip_unless_required(
            "TAU_REQUIRE_PYTHON_CLIENT",
            "python with grpcio is not available",
            "no python3 with grpcio and grpcio-tools (set TAU_TEST_PYTHON)",
        );
        return;
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let sandbox = Sandbox::new().unwrap();
    let hub = sandbox.start_hub(tau_e2e::free_port().unwrap()).unwrap();
    let socket = sandbox.data_dir().join("hub/taud.sock");
    let out = Command::new(&python)
        .arg(root.join("python/drive_turn.py"))
        .arg(root.join("../proto"))
        .arg(&socket)
        .output()
        .unwrap();
    drop(hub);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["ok"], true);
    assert!(report["events"].as_u64().unwrap() >= 6, "{report}");
}
