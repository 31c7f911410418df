//! `tau telegram pair` and `tau telegram status` against a sandboxed installation: the one-time
//! code is written 0600 in the channel's format and printed as `/start <code>`; status reads the
//! channel's files and says what is missing.

// Test set-up: a failed step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::os::unix::fs::PermissionsExt;

use support::sandbox::Sandbox;

#[test]
fn pair_prints_a_one_time_code_and_stores_it_privately() {
    let sandbox = Sandbox::healthy();
    let run = sandbox.run(&["telegram", "pair"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let line = run
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("/start "))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    let code = line.trim_start().trim_start_matches("/start ").trim();
    assert_eq!(code.len(), 10, "{code}");
    assert!(
        run.stderr.contains("[component.telegram]"),
        "{}",
        run.stderr
    );
    let file = sandbox.data().join("telegram/pairing.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let paths = tau_telegram::state::StatePaths::for_data_dir(&sandbox.data());
    let now = jiff::Timestamp::now().as_second();
    assert_eq!(
        tau_telegram::state::redeem_pairing_code(&paths, code, now).unwrap(),
        Ok(())
    );
}

#[test]
fn status_says_what_is_missing_and_speaks_json() {
    let sandbox = Sandbox::healthy();
    let run = sandbox.run(&["telegram", "status"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("configured:  no"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("owner:       none (run `tau telegram pair`)"),
        "{}",
        run.stdout
    );
    let json = sandbox.run(&["telegram", "status", "--json"]).json();
    assert_eq!(json["configured"], false);
    assert_eq!(json["owner"], serde_json::Value::Null);
    assert_eq!(json["hub"], serde_json::Value::Null);
}
