//! `tau usage` through the real `tau` and `taud` binaries: after a few `tau ask` turns on a priced
//! role, `tau usage --json` adds up to the turns' own usage and cost, and the table shows the
//! role's budget.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Output, Stdio};

use serde_json::Value;
use tau_e2e::{RunningHub, Sandbox};

fn free_port() -> u16 {
    tau_e2e::free_port().unwrap()
}

fn start_hub(sandbox: &Sandbox, port: u16) -> RunningHub {
    sandbox.start_hub(port).unwrap()
}

fn tau(sandbox: &Sandbox, port: u16, args: &[&str]) -> Output {
    let out = sandbox
        .command("tau")
        .unwrap()
        .env("TAU_HUB_PORT", port.to_string())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tau {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn usage_json_adds_up_to_the_turns_usage_and_cost() {
    let sandbox = Sandbox::new().unwrap();
    let home = sandbox.home();
    std::fs::create_dir_all(home.join("persona")).unwrap();
    std::fs::write(
        home.join("persona/persona.md"),
        include_str!("../../persona/persona.md"),
    )
    .unwrap();
    std::fs::write(
        home.join("tau.toml"),
        "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"fake\"\n\
         price = { input_per_mtok = 2, output_per_mtok = 10 }\n\n\
         [budget.brain]\ndaily_usd = 100\n",
    )
    .unwrap();
    let port = free_port();
    let _hub = start_hub(&sandbox, port);

    let (mut input, mut output, mut calls) = (0u64, 0u64, 0u64);
    // The time question makes two model calls (the clock tool, then the answer).
    for question in ["hello there", "what time is it?", "thanks"] {
        let out = tau(&sandbox, port, &["ask", "--json", question]);
        let end = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .find(|event| event["type"] == "turn_ended")
            .expect("a turn_ended event");
        input += end["usage"]["input_tokens"].as_u64().unwrap();
        output += end["usage"]["output_tokens"].as_u64().unwrap();
        calls += end["model_calls"].as_u64().unwrap();
    }
    assert!(
        input > 0 && output > 0 && calls >= 4,
        "{input} {output} {calls}"
    );

    // The ledger is saved after each call; the hub answers from memory at once.
    let out = tau(&sandbox, port, &["usage", "--json", "--days", "1"]);
    let usage: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(usage["time_zone"], "Europe/Istanbul");
    assert_eq!(usage["days"].as_array().unwrap().len(), 1, "{usage}");
    let brain = &usage["days"][0]["roles"][0];
    assert_eq!(brain["role"], "brain");
    assert_eq!(brain["budget_usd"], 100.0);
    assert_eq!(usage["total"]["input_tokens"], input, "{usage}");
    assert_eq!(usage["total"]["output_tokens"], output, "{usage}");
    assert_eq!(usage["total"]["model_calls"], calls, "{usage}");
    let cost = usage["total"]["cost_usd"].as_f64().unwrap();
    let expected = (input as f64 * 2.0 + output as f64 * 10.0) / 1e6;
    assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");

    let table = String::from_utf8(tau(&sandbox, port, &["usage"]).stdout).unwrap();
    assert!(table.contains(" brain "), "{table}");
    assert!(table.contains(" / 100,00 $"), "{table}");
    // The ledger's writer saves the first change once it settled, off the turn path.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let ledger =
            std::fs::read_to_string(sandbox.data_dir().join("spend.json")).unwrap_or_default();
        if ledger.contains("\"version\": 1") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{ledger}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn without_a_hub_usage_says_how_to_start_one() {
    let sandbox = Sandbox::new().unwrap();
    let out = sandbox
        .command("tau")
        .unwrap()
        .env("TAU_HUB_PORT", free_port().to_string())
        .args(["usage", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("tau usage: ") && stderr.contains("tau hub start"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(out.stdout.is_empty());
}
