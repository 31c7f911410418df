//! The web client in a real browser: `tests/python/drive_web.py` drives the distribution's Chromium
//! through Playwright against a real `taud` with `[web] listen`, enrolled with links from
//! `tau web pair --json`: pairing (once), a streamed reply, the approval card's arming (a click and
//! `y` within 0.5 s do nothing, and the click leaves focus on Reject), Enter rejecting, Approve
//! running the tool once, a second device seeing "decided elsewhere", a phone-sized window that
//! chats and approves with a tap, another origin unable to read or act, a foreign Host refused,
//! `tau web revoke` ending a stream, a routine (added and fired with `tau routine`) shown with its
//! last firing, the nodes list, and the browser's side of the advisories: no secret (cookie, hub
//! token, pairing code) in the page, its web storage or any URL it requests, and no address taken
//! from a parameter of its own URL. It prints what it saw (`browser report:`) for the log.
//!
//! Chromium is `TAU_TEST_CHROMIUM` (else `/usr/bin/chromium`); Python with Playwright is
//! `TAU_TEST_PYTHON` (else `python3`). Without them the test says so and passes, unless
//! `TAU_REQUIRE_BROWSER=1` (set by `.ci/run`, which installs both) makes that a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tau_e2e::Sandbox;

fn tools() -> Option<(String, String)> {
    let python = std::env::var("TAU_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let chromium =
        std::env::var("TAU_TEST_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    let playwright = Command::new(&python)
        .args(["-c", "import playwright.sync_api"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (playwright && PathBuf::from(&chromium).exists()).then_some((python, chromium))
}

#[test]
fn a_browser_pairs_chats_and_answers_approvals_as_the_seed_asks() {
    let Some((python, chromium)) = tools() else {
        tau_e2e::skip_unless_required(
            "TAU_REQUIRE_BROWSER",
            "Chromium or Playwright is missing",
            "no Chromium with Python Playwright (set TAU_TEST_CHROMIUM, TAU_TEST_PYTHON)",
        );
        return;
    };
    let sandbox = Sandbox::new().unwrap();
    let hub_port = tau_e2e::free_port().unwrap();
    let web_port = tau_e2e::free_port().unwrap();
    std::fs::write(
        sandbox.home().join("tau.toml"),
        format!("[web]\nlisten = \"127.0.0.1:{web_port}\"\n"),
    )
    .unwrap();
    std::fs::create_dir_all(sandbox.home().join("persona")).unwrap();
    std::fs::write(sandbox.home().join("persona/persona.md"), "You are tau.\n").unwrap();
    let _hub = sandbox.start_hub(hub_port).unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", web_port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the web client never came up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pair = |name: &str| -> String {
        let out = sandbox
            .command("tau")
            .unwrap()
            .env("TAU_HUB_PORT", hub_port.to_string())
            .args(["web", "pair", "--name", name, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        answer["url"].as_str().unwrap().to_owned()
    };
    // A routine with a firing, for the page to show.
    for args in [
        &[
            "routine",
            "add",
            "clock",
            "--every",
            "1h",
            "--tool",
            "current_time",
        ][..],
        &["routine", "run", "clock", "--json"][..],
    ] {
        let out = sandbox
            .command("tau")
            .unwrap()
            .env("TAU_HUB_PORT", hub_port.to_string())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tau {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (laptop, phone) = (pair("laptop"), pair("phone"));
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut command = sandbox.command("tau").unwrap();
    let tau = command.get_program().to_owned();
    command = Command::new(&python);
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", sandbox.home().parent().unwrap())
        .env("TAU_HOME", sandbox.home())
        .env("TAU_DATA_DIR", sandbox.data_dir())
        .env("TAU_HUB_PORT", hub_port.to_string())
        .arg(root.join("python/drive_web.py"))
        .arg(format!("http://127.0.0.1:{web_port}"))
        .args([&laptop, &phone, &chromium])
        .arg(tau);
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    eprintln!("browser report: {report}");
    assert_eq!(report["foreign_host"], 403);
    assert_eq!(report["other_origin"]["stream"], "refused");
    assert!(report["early_input_ms"].as_u64().unwrap() < 500);
    assert!(report["phone_width"].as_u64().unwrap() <= 390);
    assert!(!report["decided_elsewhere"].as_str().unwrap().is_empty());
    assert!(!report["revoked"].as_str().unwrap().is_empty());
    assert_eq!(report["phone_approved"], true);
    let routine = report["routine"].as_str().unwrap();
    assert!(
        routine.contains("clock") && routine.contains("every 1h"),
        "{routine}"
    );
    assert!(
        report["routine_firing"]
            .as_str()
            .unwrap()
            .starts_with("last: succeeded"),
        "{report}"
    );
    assert!(
        report["nodes"]
            .as_str()
            .unwrap()
            .contains("No nodes paired."),
        "{report}"
    );
    assert_eq!(report["secrets_in_urls"], 0);
    assert!(report["requests"].as_u64().unwrap() > 10, "{report}");

    // The owner sees the laptop, and the phone no more.
    let out = sandbox
        .command("tau")
        .unwrap()
        .env("TAU_HUB_PORT", hub_port.to_string())
        .args(["web", "devices", "--json"])
        .output()
        .unwrap();
    let devices: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = devices
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["laptop"]);
}
