//! `tau hub run | start | status | stop` through the real `tau` binary, which execs (or, for `start`,
//! spawns) the real `taud`.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use tau_e2e::Sandbox;

const DEADLINE: Duration = Duration::from_secs(20);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn status(sandbox: &Sandbox, port: u16) -> (Option<i32>, serde_json::Value) {
    let output = sandbox
        .command("tau")
        .unwrap()
        .env("TAU_HUB_PORT", port.to_string())
        .args(["hub", "status", "--json"])
        .output()
        .unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "status --json is not JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    });
    (output.status.code(), json)
}

#[test]
fn run_status_stop_round_trip() {
    let sandbox = Sandbox::new().unwrap();
    let port = free_port();
    let (code, json) = status(&sandbox, port);
    assert_eq!(json["running"], false, "{json}");
    assert_ne!(code, Some(0), "a hub that is not running is not a success");

    let mut hub = sandbox
        .command("tau")
        .unwrap()
        .env("TAU_HUB_PORT", port.to_string())
        .args(["hub", "run"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let started = Instant::now();
    let json = loop {
        let (code, json) = status(&sandbox, port);
        if json["running"] == true {
            assert_eq!(code, Some(0));
            break json;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the hub never came up: {json}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        json["pid"],
        hub.id(),
        "tau hub run execs taud in place: {json}"
    );

    // `tau components` reads the hub's services from its /status, sending the hub token. A hub
    // counts as running once it holds its lock, a moment before its control API listens: ask
    // until it answers.
    let started = Instant::now();
    loop {
        let components = sandbox
            .command("tau")
            .unwrap()
            .env("TAU_HUB_PORT", port.to_string())
            .args(["components", "--json"])
            .output()
            .unwrap();
        let components: serde_json::Value = serde_json::from_slice(&components.stdout).unwrap();
        if components["hub"]["answered"] == true {
            break;
        }
        assert!(started.elapsed() < DEADLINE, "{components}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let stop = sandbox
        .command("tau")
        .unwrap()
        .env("TAU_HUB_PORT", port.to_string())
        .args(["hub", "stop"])
        .output()
        .unwrap();
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    let exit = hub.wait().unwrap();
    assert!(exit.success(), "a stopped hub exits cleanly: {exit}");
    let (_, json) = status(&sandbox, port);
    assert_eq!(json["running"], false, "{json}");
    assert!(
        !sandbox.data_dir().join("hub/taud.sock").exists(),
        "the socket is removed on a clean stop"
    );
}

/// `tau hub start` starts the hub in the background and returns once it answers; a second start
/// finds it running; `tau ask` then talks to it; `tau hub stop` ends it.
#[test]
fn start_runs_the_hub_in_the_background_until_stopped() {
    let sandbox = Sandbox::new().unwrap();
    let port = free_port();
    let start = || {
        let output = sandbox
            .command("tau")
            .unwrap()
            .env("TAU_HUB_PORT", port.to_string())
            .args(["hub", "start", "--json"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let first = start();
    assert_eq!(first["started"], true, "{first}");
    let (code, json) = status(&sandbox, port);
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json["pid"], first["pid"], "{json} {first}");
    let again = start();
    assert_eq!(again["started"], false, "{again}");

    let ask = sandbox
        .command("tau")
        .unwrap()
        .env("TAU_HUB_PORT", port.to_string())
        .args(["ask", "hello"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(ask.status.success(), "{ask:?}");
    assert!(String::from_utf8_lossy(&ask.stdout).contains("You said"));

    let stop = sandbox
        .command("tau")
        .unwrap()
        .env("TAU_HUB_PORT", port.to_string())
        .args(["hub", "stop"])
        .output()
        .unwrap();
    assert!(stop.status.success(), "{stop:?}");
    let (_, json) = status(&sandbox, port);
    assert_eq!(json["running"], false, "{json}");
}
