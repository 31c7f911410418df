//! A Node.js client: `tests/node/drive_turn.js` loads proto/ at run time with @grpc/proto-loader and
//! drives a turn and its approval over the hub's Unix socket with @grpc/grpc-js, as the Python client
//! (`python_client.rs`) does with grpcio.
//!
//! The modules come from `TAU_TEST_NODE_MODULES` (a `node_modules` directory; `.ci/run` installs
//! `tests/node/package.json` under the cargo target directory and points it there) and the runtime
//! from `TAU_TEST_NODE`, else `node`. Without them the test says so and passes, unless
//! `TAU_REQUIRE_NODE_CLIENT=1` (set by `.ci/run`) makes that a failure.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use tau_e2e::{Sandbox, free_port};

/// The runtime and the `node_modules` directory, when both are there.
fn node() -> Option<(String, PathBuf)> {
    let node = std::env::var("TAU_TEST_NODE").unwrap_or_else(|_| "node".to_owned());
    let modules = PathBuf::from(std::env::var_os("TAU_TEST_NODE_MODULES")?);
    let usable = Command::new(&node)
        .args([
            "-e",
            "require('@grpc/grpc-js'); require('@grpc/proto-loader')",
        ])
        .env("NODE_PATH", &modules)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    usable.then_some((node, modules))
}

#[test]
fn a_node_grpc_js_client_drives_a_turn_and_an_approval() {
    let Some((node, modules)) = node() else {
        tau_e2e::skip_unless_required(
            "TAU_REQUIRE_NODE_CLIENT",
            "node with @grpc/grpc-js is not available",
            "no node with @grpc/grpc-js (set TAU_TEST_NODE_MODULES)",
        );
        return;
    };
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let sandbox = Sandbox::new().unwrap();
    let hub = sandbox.start_hub(free_port().unwrap()).unwrap();
    let out = Command::new(&node)
        .arg(root.join("node/drive_turn.js"))
        .arg(root.join("../proto"))
        .arg(sandbox.data_dir().join("hub/taud.sock"))
        .env("NODE_PATH", &modules)
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
