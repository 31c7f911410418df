//! The real `taud` binary against a temporary installation: single instance, heartbeat, clean
//! stop, crash reports, the JSON control API, gRPC over the Unix socket and TCP, file modes, and a
//! failing service that the hub survives.

use crate::support;
use support::process as common;

use std::os::unix::fs::PermissionsExt;

use common::{
    Install, get_json, get_status, http_get, http_request, tcp_channel, uds_channel, wait_for,
    with_token,
};
use nix::sys::signal::Signal;
use tau_api::hub_files::{CrashNote, FORMAT_VERSION, UNEXPECTED_EXIT_REASON, exit};
use tau_api::proto::v1::GetStatusRequest;
use tau_api::proto::v1::tau_client::TauClient;

fn mode(path: &std::path::Path) -> u32 {
    match std::fs::metadata(path) {
        Ok(meta) => meta.permissions().mode() & 0o777,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

#[test]
fn a_second_start_exits_1_naming_the_running_pid() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let (status, stderr) = install.run_to_exit();
    assert_eq!(
        status.code(),
        Some(i32::from(exit::ALREADY_RUNNING)),
        "{stderr}"
    );
    assert!(
        stderr.starts_with(&format!("tau hub is already running (pid {})", hub.pid())),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // The refused start changed nothing: the first hub still answers and owns state.json.
    assert_eq!(install.state().unwrap().pid, hub.pid());
    assert_eq!(get_json(install.port, "/health")["pid"], hub.pid());
}

#[test]
fn under_launchd_a_refused_start_exits_0() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut cmd = install.command();
    let out = cmd.arg("--launchd").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("tau hub is already running"));
}

#[test]
fn a_bad_config_exits_78_with_one_line() {
    let install = Install::with_config("[hub]\nheartbeat_seconds = 0\n");
    let (status, stderr) = install.run_to_exit();
    assert_eq!(status.code(), Some(i32::from(exit::CONFIG)), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("tau.toml") && stderr.contains("heartbeat_seconds"),
        "{stderr}"
    );
    assert!(
        !install.paths().lock_file.exists(),
        "refused before touching the hub's files"
    );
}

#[test]
fn a_missing_or_empty_persona_exits_78_naming_the_file() {
    let install = Install::new();
    let persona = install.home.join("persona/persona.md");
    std::fs::remove_file(&persona).unwrap();
    let (status, stderr) = install.run_to_exit();
    assert_eq!(status.code(), Some(i32::from(exit::CONFIG)), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&persona.display().to_string()) && stderr.contains("does not exist"),
        "{stderr}"
    );
    std::fs::write(&persona, "  \n<!-- to do -->\n").unwrap();
    let (status, stderr) = install.run_to_exit();
    assert_eq!(status.code(), Some(i32::from(exit::CONFIG)), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&persona.display().to_string()) && stderr.contains("empty"),
        "{stderr}"
    );
    assert!(!install.paths().lock_file.exists());
}

#[test]
fn without_a_tau_toml_the_shipped_persona_is_used() {
    let install = Install::new();
    std::fs::remove_file(install.home.join("tau.toml")).unwrap();
    std::fs::remove_dir_all(install.home.join("persona")).unwrap();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    assert_eq!(get_json(install.port, "/health")["pid"], hub.pid());
}

#[test]
fn the_heartbeat_advances() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let first = install.state().unwrap();
    assert_eq!(first.version, FORMAT_VERSION);
    assert_eq!(first.heartbeat_seconds, 1);
    assert_eq!(first.stopped_at, None);
    let later = wait_for("a newer heartbeat", || {
        install
            .state()
            .filter(|s| s.heartbeat_at > first.heartbeat_at)
    });
    assert_eq!(later.started_at, first.started_at);
    assert!(later.heartbeat_at.parse::<jiff::Timestamp>().is_ok());
}

#[test]
fn sigterm_stops_cleanly_and_the_next_start_finds_no_crash() {
    let install = Install::new();
    let mut hub = install.spawn();
    install.wait_ready(hub.pid());
    hub.signal(Signal::SIGTERM);
    assert_eq!(hub.wait_exit().code(), Some(0));
    let state = install.state().unwrap();
    assert!(state.stopped_at.is_some(), "{state:?}");
    assert!(
        !install.paths().socket.exists(),
        "socket removed on clean stop"
    );
    assert!(!install.paths().crash_file.exists());

    let hub = install.spawn();
    install.wait_ready(hub.pid());
    assert!(install.crash_reports().is_empty());
    assert_eq!(get_status(&install)["last_crash"], serde_json::Value::Null);
}

#[test]
fn sigint_stops_cleanly_too() {
    let install = Install::new();
    let mut hub = install.spawn();
    install.wait_ready(hub.pid());
    hub.signal(Signal::SIGINT);
    assert_eq!(hub.wait_exit().code(), Some(0));
    assert!(install.state().unwrap().stopped_at.is_some());
}

#[test]
fn kill_9_then_restart_records_an_unexpected_exit() {
    let install = Install::new();
    let mut dead = install.spawn();
    install.wait_ready(dead.pid());
    let dead_pid = dead.pid();
    dead.signal(Signal::SIGKILL);
    dead.wait_exit();
    assert!(
        install.paths().socket.exists(),
        "a killed hub leaves its socket behind"
    );

    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let reports = install.crash_reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].reason, UNEXPECTED_EXIT_REASON);
    assert_eq!(reports[0].pid, dead_pid);
    let last: tau_api::hub_files::CrashReport =
        serde_json::from_str(&std::fs::read_to_string(install.paths().last_crash_file).unwrap())
            .unwrap();
    assert_eq!(last, reports[0]);
    let status = get_status(&install);
    assert_eq!(status["last_crash"]["reason"], UNEXPECTED_EXIT_REASON);
    assert_eq!(status["last_crash"]["pid"], dead_pid);
}

#[test]
fn the_reason_in_crash_json_is_used() {
    let install = Install::new();
    let mut dead = install.spawn();
    install.wait_ready(dead.pid());
    dead.signal(Signal::SIGKILL);
    dead.wait_exit();
    // What the dying hub's panic hook writes (see tests/panic_hook.rs for the hook itself).
    let note = CrashNote {
        version: FORMAT_VERSION,
        pid: dead.pid(),
        at: "2026-01-01T00:00:00Z".into(),
        reason: "panic: the sky fell (at src/sky.rs:1)".into(),
    };
    std::fs::write(
        install.paths().crash_file,
        serde_json::to_string(&note).unwrap(),
    )
    .unwrap();

    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let reports = install.crash_reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].reason, note.reason);
    assert!(!install.paths().crash_file.exists(), "the note is consumed");
}

#[test]
fn health_status_and_the_host_check() {
    let mut install = Install::new();
    install
        .extra_env
        .push(("TAU_PROFILE".into(), "travel".into()));
    let hub = install.spawn();
    install.wait_ready(hub.pid());

    let health = get_json(install.port, "/health");
    assert_eq!(health["ok"], true);
    assert_eq!(health["pid"], hub.pid());
    assert!(health["uptime_s"].is_u64());

    let status = get_status(&install);
    for key in [
        "role",
        "profile",
        "version",
        "started_at",
        "heartbeat_at",
        "uptime_s",
        "last_crash",
        "approvals_pending",
        "nodes",
    ] {
        assert!(status.get(key).is_some(), "/status lacks {key}: {status}");
    }
    assert_eq!(status["profile"], "travel");
    assert_eq!(status["role"], "hub");
    assert_eq!(status["version"], tau_api::VERSION);
    assert_eq!(status["approvals_pending"], 0);
    assert_eq!(status["nodes"], serde_json::json!([]));

    for host in ["localhost", "localhost:1234", "127.0.0.1:9", "[::1]:7877"] {
        assert_eq!(
            http_get(install.port, "/health", host).unwrap().0,
            200,
            "{host}"
        );
    }
    for host in [
        "evil.example",
        "evil.example:7877",
        "192.168.1.10",
        "localhost.evil.example",
    ] {
        let (code, body) = http_get(install.port, "/status", host).unwrap();
        assert_eq!(code, 403, "{host}: {body}");
    }
    assert_eq!(http_get(install.port, "/nope", "localhost").unwrap().0, 404);

    // No Host header at all is refused like a wrong one (HTTP/1.0 allows leaving it out).
    for path in ["/health", "/status"] {
        let (code, body) =
            http_request(install.port, &format!("GET {path} HTTP/1.0\r\n\r\n")).unwrap();
        assert_eq!(code, 403, "{path} without Host: {body}");
    }
}

#[test]
fn status_without_the_token_shows_only_liveness() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    for authorization in [
        "",
        "Authorization: Bearer 0123\r\n",
        "Authorization: Basic x\r\n",
    ] {
        let request = format!(
            "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n{authorization}Connection: close\r\n\r\n"
        );
        let (code, body) = http_request(install.port, &request).unwrap();
        assert_eq!(code, 200, "{authorization:?}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["ok", "pid", "uptime_s"], "{authorization:?}: {body}");
        assert_eq!(json["pid"], hub.pid());
    }
    let full = get_status(&install);
    assert_eq!(full["pid"], hub.pid());
    assert!(full["services"].is_array(), "{full}");
    assert!(full.get("heartbeat_at").is_some(), "{full}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_over_the_socket_and_over_tcp_with_and_without_the_token() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());

    let mut over_socket = TauClient::new(uds_channel(&install.paths().socket).await);
    let status = over_socket
        .get_status(GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.pid, hub.pid());
    assert_eq!(status.role, "hub");
    assert_eq!(status.version, tau_api::VERSION);

    let token = std::fs::read_to_string(install.paths().token_file).unwrap();
    let mut over_tcp = TauClient::new(tcp_channel(install.port).await);
    let status = over_tcp
        .get_status(with_token(GetStatusRequest {}, Some(token.trim())))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.pid, hub.pid());

    for bad in [None, Some("0123"), Some("")] {
        let err = over_tcp
            .get_status(with_token(GetStatusRequest {}, bad))
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unauthenticated, "{bad:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_reflection_are_served() {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::{HealthCheckRequest, health_check_response::ServingStatus};
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let channel = uds_channel(&install.paths().socket).await;

    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: "tau.v1.Tau".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(health.status(), ServingStatus::Serving);

    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let response = responses.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection answer: {response:?}");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"tau.v1.Tau".to_owned()), "{names:?}");
    assert!(
        names.contains(&"grpc.health.v1.Health".to_owned()),
        "{names:?}"
    );
}

#[test]
fn files_are_private() {
    let install = Install::new();
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let paths = install.paths();
    assert_eq!(mode(&paths.dir), 0o700);
    assert_eq!(mode(&paths.socket), 0o600);
    assert_eq!(mode(&paths.token_file), 0o600);
    assert_eq!(mode(&paths.state_file), 0o600);
    assert_eq!(mode(&paths.lock_file), 0o600);
    // The data directory did not exist: it and every directory under it are private from the
    // start, and every file in them is 0600.
    let mut dirs = vec![install.data.clone()];
    while let Some(dir) = dirs.pop() {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            } else {
                assert_eq!(mode(&entry.path()), 0o600, "{}", entry.path().display());
            }
        }
    }
    let token = std::fs::read_to_string(&paths.token_file).unwrap();
    assert_eq!(token.len(), 64);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_fails_to_start_is_skipped_and_the_hub_runs_on() {
    let install = Install::new();
    // Something that is not a socket where the gRPC socket goes: the gRPC service cannot start.
    std::fs::create_dir_all(install.paths().socket.join("occupied")).unwrap();
    let mut hub = install.spawn();
    let pid = hub.pid();
    wait_for("/health", || {
        http_get(install.port, "/health", "localhost").ok()
    });
    assert_eq!(get_json(install.port, "/health")["pid"], pid);
    // /health answers as soon as the control API is up, which is before the gRPC service has
    // tried and failed to start: wait for the skip to be logged.
    wait_for("the skipped gRPC service in the log", || {
        let stderr = hub.stderr();
        (stderr.contains("grpc") && stderr.contains("skipped")).then_some(())
    });
    // /status reports it as failed, with the error, for tau components and tau doctor.
    let grpc = wait_for("gRPC's report in /status", || {
        let status = get_status(&install);
        status["services"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == "grpc")
            .cloned()
    });
    assert_eq!(grpc["state"], "failed", "{grpc}");
    assert!(
        grpc["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("failed to start: ")),
        "{grpc}"
    );
    // gRPC is not mounted on TCP: an honest UNIMPLEMENTED, not a hang.
    let token = std::fs::read_to_string(install.paths().token_file).unwrap_or_default();
    let err = TauClient::new(tcp_channel(install.port).await)
        .get_status(with_token(GetStatusRequest {}, Some(token.trim())))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented, "{err}");
    // The heartbeat goes on and the hub still stops cleanly.
    let first = install.state().unwrap();
    wait_for("a newer heartbeat", || {
        install
            .state()
            .filter(|s| s.heartbeat_at > first.heartbeat_at)
    });
    hub.signal(Signal::SIGTERM);
    assert_eq!(hub.wait_exit().code(), Some(0));
    assert!(
        install.paths().socket.join("occupied").exists(),
        "never deleted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_port_skips_the_control_api_but_grpc_serves_the_socket() {
    let install = Install::new();
    let _squatter = std::net::TcpListener::bind(("127.0.0.1", install.port)).unwrap();
    let hub = install.spawn();
    wait_for("the socket", || {
        install.paths().socket.exists().then_some(())
    });
    let status = TauClient::new(uds_channel(&install.paths().socket).await)
        .get_status(GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.pid, hub.pid());
    // GetStatus tells the same story as the log: the control API failed, gRPC runs (and the
    // Telegram channel's service, which only reports that it is not configured).
    let states: Vec<(&str, &str)> = status
        .services
        .iter()
        .map(|s| (s.name.as_str(), s.state.as_str()))
        .collect();
    assert_eq!(
        states,
        vec![
            ("control-api", "failed"),
            ("grpc", "started"),
            ("telegram", "started")
        ],
        "{:?}",
        status.services
    );
    assert!(
        !status.services[0].detail.is_empty(),
        "the failure says why"
    );
    let stderr = hub.stderr();
    assert!(
        stderr.contains("control-api") && stderr.contains("skipped"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_turn_waiting_on_an_approval_stops_cleanly_and_records_it_cancelled() {
    use support::api::{new_session, socket_client, start, turn, until_approval};
    use tau_api::proto::v1::{self as pb, session_event::Kind};

    let install = Install::new();
    let mut hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let id = new_session(&mut client, "terminal").await;
    let (mut stream, _) = start(&mut client, turn(&id, "turn on the lamp", "terminal")).await;
    let pending = until_approval(&mut stream).await;

    hub.signal(Signal::SIGTERM);
    // The client still attached sees the approval end as cancelled and the turn end.
    let mut resolution = None;
    let mut stop_reason = None;
    while let Ok(Some(message)) = tokio::time::timeout(common::DEADLINE, stream.message())
        .await
        .unwrap()
    {
        match message.kind {
            Some(pb::start_turn_response::Kind::Event(event)) => match event.kind {
                Some(Kind::ApprovalResolved(resolved)) => resolution = Some(resolved.resolution),
                Some(Kind::TurnEnded(end)) => stop_reason = Some(end.stop_reason),
                _ => {}
            },
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(resolution, Some(pb::ApprovalResolution::Cancelled as i32));
    assert_eq!(stop_reason.as_deref(), Some("cancelled"));
    assert_eq!(hub.wait_exit().code(), Some(0), "{}", hub.stderr());
    assert!(install.state().unwrap().stopped_at.is_some());
    assert!(!install.paths().crash_file.exists());
    drop((stream, client));

    let hub = install.spawn();
    install.wait_ready(hub.pid());
    assert!(install.crash_reports().is_empty());
    assert_eq!(get_status(&install)["last_crash"], serde_json::Value::Null);
    let events = socket_client(&install)
        .await
        .read_events(pb::ReadEventsRequest { session_id: id })
        .await
        .unwrap()
        .into_inner()
        .events;
    let approvals: Vec<&str> = events
        .iter()
        .filter(|e| e.r#type == "approval" && e.json.contains(&pending.approval_id))
        .map(|e| e.json.as_str())
        .collect();
    assert_eq!(
        approvals.len(),
        2,
        "asked, then resolved once: {approvals:?}"
    );
    assert!(approvals[0].contains("\"pending\""), "{}", approvals[0]);
    assert!(approvals[1].contains("\"cancelled\""), "{}", approvals[1]);
    assert!(
        !events.iter().any(|e| e.json.contains("expired_by_restart")),
        "nothing was left pending for the next hub: {events:?}"
    );
    let stderr = hub.stderr();
    assert!(!stderr.contains("expired"), "{stderr}");
}

#[test]
fn an_unknown_table_is_logged_once_to_tau_log() {
    let install =
        Install::with_config("[hub]\nheartbeat_seconds = 1\n[telegram]\ntoken_env = \"X\"\n");
    let mut hub = install.spawn();
    install.wait_ready(hub.pid());
    hub.signal(Signal::SIGTERM);
    assert_eq!(hub.wait_exit().code(), Some(0));
    let log = std::fs::read_to_string(install.data.join("logs").join("tau.log")).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("unknown table [telegram] ignored"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("WARN"), "{log}");
    assert!(lines[0].contains("tau.toml"), "names the file: {log}");
}

/// The hub's own files, checked at every start.
#[path = "host_file_modes/cases.rs"]
mod file_modes;
