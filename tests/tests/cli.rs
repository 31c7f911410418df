//! The command line surface of both binaries: help, versions, and commands not built yet.

use tau_e2e::Sandbox;

#[test]
fn tau_help_lists_every_command_with_one_line() {
    let sandbox = Sandbox::new().unwrap();
    let output = sandbox
        .command("tau")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    for command in ["chat", "hub", "components", "doctor", "init", "version"] {
        let line = text
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{command} ")))
            .unwrap_or_else(|| panic!("`{command}` missing from:\n{text}"));
        assert!(
            line.split_whitespace().count() > 2,
            "no description: {line}"
        );
    }
    for option in ["--lang", "--profile", "--verbose"] {
        assert!(text.contains(option), "{option} missing from:\n{text}");
    }
}

#[test]
fn tau_version_reports_both_binaries() {
    let sandbox = Sandbox::new().unwrap();
    let output = sandbox
        .command("tau")
        .unwrap()
        .args(["version", "--json"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(json["tau"], version);
    assert_eq!(json["taud"], version);

    let output = sandbox
        .command("tau")
        .unwrap()
        .arg("version")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains(&format!("tau  {version}")), "{text}");
    assert!(text.contains(&format!("taud {version}")), "{text}");

    // The answer is kept for this very binary: a later `tau version` reads it instead of
    // starting taud (a planted version shows that the cache, not taud, answered).
    let cache = sandbox.data_dir().join("cache/taud-version.json");
    let mut cached: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
    assert_eq!(cached["version"], version, "{cached}");
    cached["version"] = "9.9.9-cached".into();
    std::fs::write(&cache, cached.to_string()).unwrap();
    let output = sandbox
        .command("tau")
        .unwrap()
        .args(["version", "--json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["taud"], "9.9.9-cached");
}

#[test]
fn taud_help_describes_the_daemon() {
    let sandbox = Sandbox::new().unwrap();
    let output = sandbox
        .command("taud")
        .unwrap()
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(text.contains("Usage: taud"), "{text}");
}

#[test]
fn lang_rejects_an_unknown_language() {
    let sandbox = Sandbox::new().unwrap();
    let output = sandbox
        .command("tau")
        .unwrap()
        .args(["--lang", "de", "version"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let text = String::from_utf8(output.stderr).unwrap();
    assert!(text.contains("'de'"), "{text}");
}
