//! `tau doctor` through the real binary: the configuration, credentials, model servers, component
//! names and the hub probe against a local listener, with the exit code and the text and `--json`
//! output. The checks of files and permissions are in `doctor_files.rs`.

use crate::support;

use support::sandbox::{SECRET, Sandbox, anthropic_config, checks, doctor, serve_once, status};

#[test]
fn a_healthy_installation_passes_every_check() {
    let sandbox = Sandbox::healthy();
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(json["ok"], true);
    assert_eq!(json["counts"]["fail"], 0);
    assert_eq!(json["counts"]["warn"], 0, "{}", run.stdout);
    assert!(json["next"].is_null());
    let names: Vec<&str> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    for name in [
        "config",
        "role brain",
        "role fast",
        "role local",
        "sessions",
        "persona",
        "user",
        ".env",
        "components",
        "permissions",
        "hub",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    for check in json["checks"].as_array().unwrap() {
        let keys: Vec<&str> = check
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["check", "fix", "message", "status"]);
        assert_eq!(check["status"], "ok");
    }
    let (_, message, _) = checks(&json, "hub")[0];
    assert!(message.starts_with("no hub on 127.0.0.1:"), "{message}");

    let text = sandbox.run(&["doctor"]);
    assert_eq!(text.code, 0);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert_eq!(lines.len(), names.len() + 1, "{}", text.stdout);
    assert!(
        lines
            .iter()
            .take(names.len())
            .all(|l| l.starts_with("ok    "))
    );
    assert_eq!(
        *lines.last().unwrap(),
        format!("{} ok, 0 warnings, 0 failures", names.len())
    );
}

#[test]
fn no_config_is_a_warning_that_points_at_tau_init() {
    let sandbox = Sandbox::new();
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let config = checks(&json, "config");
    assert_eq!(config[0].0, "warn");
    assert!(config[0].1.contains("built-in defaults with provider fake"));
    assert!(config[0].2.unwrap().contains("tau init"));
    assert_eq!(status(&json, "persona"), ["warn"]);
    let text = sandbox.run(&["doctor"]);
    assert!(
        text.stdout
            .lines()
            .any(|l| l == "next: run `tau init` to write tau.toml and the persona files"),
        "{}",
        text.stdout
    );
}

#[test]
fn a_bad_config_fails_and_the_other_checks_still_run() {
    let sandbox = Sandbox::healthy();
    sandbox.write("home/tau.toml", "[agent]\ncontext = \"auto\"\n");
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1);
    assert_eq!(json["ok"], false);
    let (s, message, fix) = checks(&json, "config")[0];
    assert_eq!(s, "fail");
    assert!(
        message.contains("tau.toml") && message.contains("agent.context"),
        "{message}"
    );
    assert!(fix.is_some());
    for name in ["persona", ".env", "permissions", "hub"] {
        assert!(!checks(&json, name).is_empty(), "{name} missing");
    }
    let text = sandbox.run(&["doctor"]);
    assert_eq!(text.code, 1);
    assert!(text.stdout.starts_with("fail  config: "), "{}", text.stdout);
}

#[test]
fn a_bad_variable_fails_the_config_check() {
    let mut sandbox = Sandbox::healthy();
    sandbox.var("TAU_PROFILE", "office");
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1);
    assert!(checks(&json, "config")[0].1.contains("TAU_PROFILE"));
}

#[test]
fn a_missing_credential_fails_naming_the_variable_and_never_shows_values() {
    let sandbox = Sandbox::healthy();
    anthropic_config(&sandbox);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1);
    let (s, message, fix) = checks(&json, "role brain")[0];
    assert_eq!(s, "fail");
    assert!(
        message.contains("ANTHROPIC_API_KEY is not set"),
        "{message}"
    );
    assert!(fix.unwrap().contains(".env"));

    let mut with_key = Sandbox::healthy();
    anthropic_config(&with_key);
    with_key.var("ANTHROPIC_API_KEY", SECRET);
    let (run, json) = doctor(&with_key);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(status(&json, "role brain"), ["ok"]);
    assert!(!run.stdout.contains(SECRET));
}

#[test]
fn credentials_in_home_dotenv_count() {
    let sandbox = Sandbox::healthy();
    anthropic_config(&sandbox);
    sandbox.write("home/.env", &format!("ANTHROPIC_API_KEY={SECRET}\n"));
    sandbox.chmod("home/.env", 0o600);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(status(&json, "role brain"), ["ok"]);
    assert!(!run.stdout.contains(SECRET));
}

#[test]
fn bedrock_profile_must_exist_and_hold_both_keys() {
    let mut sandbox = Sandbox::healthy();
    let run = sandbox.run(&["init", "--force", "--provider", "bedrock", "--yes"]);
    assert_eq!(run.code, 0);
    sandbox.write("home/persona/user.md", "### Name\n\n- Ada\n");
    sandbox
        .var("AWS_PROFILE", "work")
        .var("AWS_REGION", "eu-west-1");
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1);
    let (s, message, _) = checks(&json, "role brain")[0];
    assert_eq!(s, "fail");
    assert!(message.contains("AWS_PROFILE names a profile"), "{message}");
    assert!(!message.contains("work"));

    // Half a key pair cannot sign a request: still a failure.
    sandbox.write("user/.aws/credentials", "[work]\naws_access_key_id = x\n");
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert_eq!(status(&json, "role brain"), ["fail"]);

    sandbox.write(
        "user/.aws/credentials",
        "[work]\naws_access_key_id = x\naws_secret_access_key = y\n",
    );
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(status(&json, "role brain"), ["ok"]);
}

#[test]
fn an_ollama_role_is_checked_against_its_server() {
    let tags = r#"{"models":[{"name":"llama3:latest","model":"llama3:latest"}]}"#;
    let (port, request) = serve_once(format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{tags}",
        tags.len()
    ));
    let mut sandbox = Sandbox::healthy();
    sandbox.var("OLLAMA_HOST", &format!("127.0.0.1:{port}"));
    sandbox.write(
        "home/tau.toml",
        "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"fake\"\n\
         [models.roles.local]\nprovider = \"ollama\"\nmodel_id = \"llama3\"\n\
         fallback = { provider = \"ollama\", model_id = \"qwen3:8b\" }\n",
    );
    let (run, json) = doctor(&sandbox);
    assert!(request.join().unwrap().starts_with("GET /api/tags "));
    let local = checks(&json, "role local");
    assert_eq!(local[0].0, "ok", "{local:?}");
    assert_eq!(local[0].1, "ollama (llama3): no credentials needed");
    assert_eq!(local[1].0, "ok", "{local:?}");
    assert!(local[1].1.contains("has llama3"), "{local:?}");
    let fallback = checks(&json, "role local fallback");
    let missing = fallback.iter().find(|c| c.1.contains("no model")).unwrap();
    assert_eq!(missing.0, "fail");
    assert!(missing.2.unwrap().contains("`ollama pull qwen3:8b`"));
    assert_eq!(run.code, 1, "{}", run.stdout);
}

#[test]
fn an_ollama_that_does_not_answer_is_a_warning() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let sandbox = Sandbox::healthy();
    sandbox.write(
        "home/tau.toml",
        &format!(
            "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"fake\"\n\
             [models.roles.local]\nprovider = \"ollama\"\nmodel_id = \"llama3\"\n\
             [component.ollama]\nbase_url = \"http://127.0.0.1:{port}\"\n"
        ),
    );
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let local = checks(&json, "role local");
    assert_eq!(local[1].0, "warn", "{local:?}");
    assert!(local[1].1.contains("nothing listens"), "{local:?}");
    assert!(local[1].2.unwrap().contains("ollama serve"));
    assert_eq!(checks(&json, "config")[0].0, "ok");
}

#[test]
fn unknown_component_names_are_warnings() {
    let sandbox = Sandbox::healthy();
    let mut config = sandbox.read("home/tau.toml");
    config = config.replace(
        "disabled = []",
        "disabled = [\"demo_physical_action\", \"no_such_tool\"]",
    );
    config = config.replace("context = []", "context = [\"nodes\"]");
    sandbox.write("home/tau.toml", &config);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let components = checks(&json, "components");
    let warned: Vec<&str> = components
        .iter()
        .filter(|(s, _, _)| *s == "warn")
        .map(|(_, m, _)| *m)
        .collect();
    assert_eq!(warned.len(), 2, "{components:?}");
    assert!(warned[0].contains("components.context names 'nodes'"));
    assert!(warned[1].contains("components.tools.disabled names 'no_such_tool'"));
    assert!(components[0].1.contains("none failed to register"));
}

#[test]
fn a_hub_that_answers_health_is_reported() {
    let mut sandbox = Sandbox::healthy();
    let body = r#"{"ok": true, "pid": 4242, "uptime_s": 90}"#;
    let (port, server) = serve_once(format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    ));
    sandbox.set_port(port);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let (s, message, _) = checks(&json, "hub")[0];
    assert_eq!(s, "ok");
    assert_eq!(
        message,
        format!("a hub answers on 127.0.0.1:{port} (pid 4242, up 90 s)")
    );
    let request = server.join().unwrap();
    assert!(request.starts_with("GET /health HTTP/1.1\r\n"), "{request}");
    assert!(request.contains(&format!("Host: 127.0.0.1:{port}\r\n")));
}

#[test]
fn something_else_on_the_port_is_a_warning_only() {
    let mut sandbox = Sandbox::healthy();
    let (port, server) =
        serve_once("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string());
    sandbox.set_port(port);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    let (s, message, fix) = checks(&json, "hub")[0];
    assert_eq!(s, "warn");
    assert!(message.contains("HTTP 404"), "{message}");
    assert!(fix.unwrap().contains("TAU_HUB_PORT"));
    assert!(
        server
            .join()
            .unwrap()
            .starts_with("GET /health HTTP/1.1\r\n")
    );
}

#[test]
fn a_fallback_without_credentials_is_only_a_warning() {
    let sandbox = Sandbox::healthy();
    sandbox.write(
        "home/tau.toml",
        "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"fake\"\n\
         fallback = { provider = \"anthropic\", model_id = \"claude-haiku-4-5\" }\n",
    );
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert_eq!(status(&json, "role brain"), ["ok"]);
    let (s, message, fix) = checks(&json, "role brain fallback")[0];
    assert_eq!(s, "warn");
    assert!(
        message.contains("ANTHROPIC_API_KEY is not set"),
        "{message}"
    );
    assert!(fix.unwrap().contains("ANTHROPIC_API_KEY"));
}

#[test]
fn a_hub_service_that_failed_to_start_fails_the_components_check() {
    let mut sandbox = Sandbox::healthy();
    let (port, server) =
        support::sandbox::serve_hub(&sandbox, support::sandbox::status_with_failed_grpc(), 2);
    sandbox.set_port(port);
    let (run, json) = doctor(&sandbox);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let components = checks(&json, "components");
    assert_eq!(components.len(), 1, "{components:?}");
    let (s, message, fix) = components[0];
    assert_eq!(s, "fail");
    assert_eq!(
        message,
        "hub_service 'grpc' from taud failed to load: failed to start: cannot bind the socket"
    );
    assert!(fix.unwrap().contains("tau components"));
    assert_eq!(status(&json, "hub"), ["ok"]);
    let requests = server.join().unwrap();
    assert_eq!(requests, ["GET /health HTTP/1.1", "GET /status HTTP/1.1"]);
}

#[test]
fn without_a_hub_the_components_check_says_built_in_table_only() {
    let sandbox = Sandbox::healthy();
    let (_, json) = doctor(&sandbox);
    let (s, message, _) = checks(&json, "components")[0];
    assert_eq!(s, "ok");
    assert!(
        message.ends_with("(hub not running: built-in table only)"),
        "{message}"
    );
}
