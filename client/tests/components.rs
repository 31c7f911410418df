//! `tau components` through the real binary: every group, versions, a tool switched off, names
//! nothing provides, `--json`, and a broken config.

use crate::support;

use serde_json::Value;
use support::sandbox::{Sandbox, configured};

#[test]
fn every_group_is_listed_with_a_disabled_tool_and_an_unknown_name() {
    let sandbox = configured(r#""demo_physical_action", "no_such_tool""#, "");
    let run = sandbox.run(&["components"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = run.stdout;
    let version = env!("CARGO_PKG_VERSION");
    for heading in ["providers", "sessions", "tools", "context", "hub_services"] {
        assert!(text.lines().any(|l| l == heading), "{heading}:\n{text}");
    }
    let line = |name: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
            .to_string()
    };
    let demo = line("demo_physical_action");
    assert!(demo.contains(" disabled "), "{demo}");
    assert!(demo.contains(&format!("taud {version}")), "{demo}");
    assert!(demo.contains("tier 2"), "{demo}");
    assert!(demo.contains("[components.tools] disabled"), "{demo}");
    let clock = line("current_time");
    assert!(
        clock.contains(" enabled ") && clock.contains("tier 0"),
        "{clock}"
    );
    assert!(line("ollama").contains(" enabled "));
    assert!(line("openai").contains(" enabled "));
    assert!(line("fake").contains("used by brain, fast, local"));
    assert!(line("grpc").contains(" enabled "));
    let web = line("web");
    assert!(
        web.contains(" disabled ") && web.contains("set [web] listen"),
        "{web}"
    );
    assert!(text.contains("  (none built in)\n"), "{text}");
    assert!(
        text.contains("unknown names in [components]\n  components.tools.disabled: 'no_such_tool' (no component provides it)\n"),
        "{text}"
    );
    assert!(text.lines().last().unwrap().starts_with("next: "), "{text}");
}

#[test]
fn json_lists_every_component_and_the_unknown_names() {
    let sandbox = configured(r#""demo_physical_action""#, r#""nodes""#);
    let run = sandbox.run(&["components", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = run.json();
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        json["config"],
        sandbox.home().join("tau.toml").display().to_string()
    );
    let components = json["components"].as_array().unwrap();
    let find = |name: &str| -> &Value {
        components
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    let demo = find("demo_physical_action");
    assert_eq!(demo["kind"], "tool");
    assert_eq!(demo["group"], "tools");
    assert_eq!(demo["enabled"], false);
    assert_eq!(demo["tier"], 2);
    assert_eq!(demo["distribution"], "taud");
    assert_eq!(demo["version"], env!("CARGO_PKG_VERSION"));
    assert!(demo["load_error"].is_null());
    assert_eq!(find("current_time")["enabled"], true);
    assert_eq!(find("file")["kind"], "session_backend");
    assert_eq!(find("control-api")["kind"], "hub_service");
    assert_eq!(find("bedrock")["kind"], "provider");
    let kinds: Vec<&str> = components
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    for kind in ["provider", "session_backend", "tool", "hub_service"] {
        assert!(kinds.contains(&kind), "{kind}");
    }
    assert_eq!(
        json["unknown"],
        serde_json::json!([{"key": "components.context", "name": "nodes"}])
    );
}

#[test]
fn without_a_config_the_defaults_are_listed() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["components", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let json = run.json();
    assert!(json["config"].is_null());
    assert!(
        json["components"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "tool")
            .all(|c| c["enabled"] == true)
    );
    assert_eq!(json["unknown"], serde_json::json!([]));
}

#[test]
fn a_broken_config_is_one_line_and_exit_1() {
    let sandbox = Sandbox::new();
    sandbox.write("home/tau.toml", "[agent]\nmax_turns = \"many\"\n");
    let run = sandbox.run(&["components"]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.is_empty());
    let first = run.stderr.lines().next().unwrap();
    assert!(
        first.starts_with("tau components: ") && first.contains("agent.max_turns"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("tau doctor"));
}

#[test]
fn a_running_hub_reports_a_failed_service_as_its_load_error() {
    let mut sandbox = support::sandbox::configured("", "");
    let (port, server) =
        support::sandbox::serve_hub(&sandbox, support::sandbox::status_with_failed_grpc(), 2);
    sandbox.set_port(port);
    let run = sandbox.run(&["components"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = &run.stdout;
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains(&format!("as the hub on 127.0.0.1:{port} reports them")),
        "{text}"
    );
    let grpc = text
        .lines()
        .find(|l| l.trim_start().starts_with("grpc "))
        .unwrap();
    assert!(grpc.contains(" disabled "), "{grpc}");
    assert!(
        grpc.contains("load error: failed to start: cannot bind the socket"),
        "{grpc}"
    );
    let json = sandbox.run(&["components", "--json"]).json();
    assert_eq!(json["hub"]["answered"], true);
    let grpc = json["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "grpc")
        .unwrap();
    assert_eq!(
        grpc["load_error"],
        "failed to start: cannot bind the socket"
    );
    assert_eq!(grpc["enabled"], false);
    let requests = server.join().unwrap();
    assert_eq!(requests, ["GET /status HTTP/1.1", "GET /status HTTP/1.1"]);
}

#[test]
fn without_a_hub_one_line_says_the_table_is_built_in_only() {
    let sandbox = support::sandbox::configured("", "");
    let run = sandbox.run(&["components"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout.lines().next(),
        Some("hub not running: built-in table only")
    );
    let json = sandbox.run(&["components", "--json"]).json();
    assert_eq!(json["hub"]["answered"], false);
    assert_eq!(
        json["hub"]["message"],
        "hub not running: built-in table only"
    );
}

#[test]
fn the_clients_are_listed_tau_tui_included() {
    let sandbox = configured("", "");
    let run = sandbox.run(&["components"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.lines().any(|l| l == "clients"), "{}", run.stdout);
    for command in ["tau chat", "tau tui", "tau ask"] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.starts_with(&format!("  {command}"))),
            "{command}:\n{}",
            run.stdout
        );
    }
    let run = sandbox.run(&["components", "--json"]);
    let json = run.json();
    let commands: Vec<&str> = json["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(commands, ["tau chat", "tau tui", "tau ask"]);
}

#[test]
fn help_lists_tau_tui() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["--help"]);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("tui ")),
        "{}",
        run.stdout
    );
}

#[test]
fn a_running_hub_reports_the_telegram_channel_state_on_its_row() {
    let mut sandbox = support::sandbox::configured("", "");
    let config = sandbox.read("home/tau.toml");
    sandbox.write(
        "home/tau.toml",
        &format!("{config}\n[component.telegram]\npoll_timeout_seconds = 5\n"),
    );
    let status = serde_json::json!({
        "role": "hub",
        "pid": 7,
        "services": [
            {"name": "control-api", "state": "started"},
            {"name": "grpc", "state": "started"},
            {"name": "telegram", "state": "started"},
        ],
        "channels": [
            {"name": "telegram", "state": "stopped", "error": "another process polls this bot (409 Conflict)", "restarts": 0},
        ],
    });
    let (port, _server) = support::sandbox::serve_hub(&sandbox, status, 2);
    sandbox.set_port(port);
    let run = sandbox.run(&["components"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let row = run
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("telegram "))
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(row.contains("channel stopped"), "{row}");
    assert!(row.contains("409 Conflict"), "{row}");
}
