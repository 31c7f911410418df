//! `tau doctor` through the real binary on an installation that runs as a node (TAU_ROLE=node in
//! the environment or in `.env`, or `[hub] role = "node"` in tau.toml): no persona and no model
//! credentials needed, one line saying what is skipped, the pairing with the hub checked instead;
//! the same installation as a hub still fails without its persona.

use crate::support;

use support::sandbox::{Sandbox, checks, doctor, status};

/// A node as `tau init` and a missing persona leave it: tau.toml names anthropic (no key set),
/// and there is no persona directory, which a hub refuses to start without.
fn node_without_persona() -> Sandbox {
    let sandbox = Sandbox::healthy();
    std::fs::remove_dir_all(sandbox.home().join("persona")).unwrap();
    let config = sandbox.read("home/tau.toml");
    sandbox.write(
        "home/tau.toml",
        &format!(
            "{config}\n[models.roles.cloud]\nprovider = \"anthropic\"\nmodel_id = \"claude-sonnet-4-5\"\n"
        ),
    );
    sandbox
}

fn names(json: &serde_json::Value) -> Vec<String> {
    json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_node_skips_the_hub_checks_and_checks_its_pairing() {
    let sandbox = node_without_persona();
    // As a hub this installation fails: no persona, no anthropic key.
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(status(&json, "persona"), ["fail"]);
    assert_eq!(status(&json, "role cloud"), ["fail"]);

    let mut node = sandbox;
    node.var("TAU_ROLE", "node");
    let (run, json) = doctor(&node);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let listed = names(&json);
    for skipped in ["persona", "user", "sessions", "role brain", "role cloud"] {
        assert!(
            !listed.iter().any(|n| n == skipped),
            "{skipped} in {listed:?}"
        );
    }
    let (s, message, _) = checks(&json, "node")[0];
    assert_eq!(s, "ok");
    assert!(message.contains("runs as a node"), "{message}");
    assert!(message.contains("persona"), "{message}");
    // Not paired yet: a warning that says how to join.
    let (s, message, fix) = checks(&json, "pairing")[0];
    assert_eq!(s, "warn", "{message}");
    assert!(fix.unwrap().contains("tau node join"));
    // What a node still needs is still checked.
    for kept in ["config", "components", "permissions", "hub"] {
        assert!(
            listed.iter().any(|n| n == kept),
            "{kept} missing from {listed:?}"
        );
    }
    assert!(checks(&json, "config")[0].1.contains("role node"));

    // Paired: the hub it pinned is named.
    node.write(
        "data/hub/nodes.json",
        r#"{"version":1,"nodes":[],"hub":{"name":"pi","address":"127.0.0.1:7443","fingerprint":"ab","paired_at":"2026-01-01T00:00:00Z"}}"#,
    );
    // As taud keeps them: the hub directory and the store private.
    node.chmod("data/hub", 0o700);
    node.chmod("data/hub/nodes.json", 0o600);
    let (run, json) = doctor(&node);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let (s, message, _) = checks(&json, "pairing")[0];
    assert_eq!(s, "ok");
    assert!(message.contains("127.0.0.1:7443"), "{message}");

    // A pairing store taud would refuse fails the check.
    node.write("data/hub/nodes.json", r#"{"version":9}"#);
    node.chmod("data/hub/nodes.json", 0o600);
    let (run, json) = doctor(&node);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(status(&json, "pairing"), ["fail"]);
}

#[test]
fn the_role_comes_from_dotenv_or_tau_toml_as_taud_reads_it() {
    let sandbox = node_without_persona();
    sandbox.write("home/.env", "TAU_ROLE=node\n");
    sandbox.chmod("home/.env", 0o600);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(status(&json, "node"), ["ok"]);
    assert!(status(&json, "persona").is_empty());

    std::fs::remove_file(sandbox.home().join(".env")).unwrap();
    let config = sandbox.read("home/tau.toml");
    let config = if config.contains("[hub]\n") {
        config.replacen("[hub]\n", "[hub]\nrole = \"node\"\n", 1)
    } else {
        format!("[hub]\nrole = \"node\"\n{config}")
    };
    sandbox.write("home/tau.toml", &config);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(status(&json, "node"), ["ok"]);

    // TAU_ROLE=hub overrides the file, as it does for taud: the persona is needed again.
    let mut hub = sandbox;
    hub.var("TAU_ROLE", "hub");
    let (run, json) = doctor(&hub);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(status(&json, "node").is_empty());
    assert_eq!(status(&json, "persona"), ["fail"]);
}
