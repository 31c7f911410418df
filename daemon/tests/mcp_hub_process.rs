//! MCP servers under the real `taud`: a server killed from outside is restarted while the hub keeps
//! answering, and after the hub stops no server process or grandchild is left; a long call's
//! progress reaches a client over the socket, in order, before the call's result; a tau.toml whose
//! MCP tools would share a name is refused at start (exit 78, one line naming both).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::mcp::{fake_script, gone};
use support::process::{Install, get_json, get_status, wait_for};

fn server(install: &Install) -> serde_json::Value {
    get_status(install)["mcp"]["servers"][0].clone()
}

#[test]
fn a_killed_server_is_restarted_and_stopping_the_hub_leaves_no_process() {
    let tmp = crate::support::temp::dir();
    let pidfile = tmp.path().join("grandchild.pid");
    let config = format!(
        "[hub]\nheartbeat_seconds = 1\n\n[mcp.servers.fake]\ncommand = \"python3\"\nargs = [\"-u\", {script:?}, \"--grandchild\", {pidfile:?}]\nstartup_timeout_seconds = 10\n\n[mcp.servers.fake.tools.read_state]\ntier = 0\n",
        script = fake_script().display().to_string(),
        pidfile = pidfile.display().to_string(),
    );
    let install = Install::with_config(&config);
    let mut hub = install.spawn();
    install.wait_ready(hub.pid());
    let first = wait_for("the server ready", || {
        let s = server(&install);
        (s["state"] == "ready").then(|| s["pid"].as_u64().unwrap() as u32)
    });
    let grandchild1: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let status = get_status(&install);
    let tools: Vec<&str> = status["mcp"]["servers"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "offered")
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, vec!["mcp__fake__read_state"]);

    kill(Pid::from_raw(first as i32), Signal::SIGKILL).unwrap();
    // The hub answers meanwhile.
    assert_eq!(get_json(install.port, "/health")["pid"], hub.pid());
    let second = wait_for("a restart", || {
        let s = server(&install);
        (s["state"] == "ready"
            && s["restarts"].as_u64() >= Some(1)
            && s["pid"].as_u64() != Some(u64::from(first)))
        .then(|| s["pid"].as_u64().unwrap() as u32)
    });
    // The first life's group went with it.
    wait_for("the first grandchild gone", || {
        gone(grandchild1).then_some(())
    });
    let grandchild2: u32 = wait_for("a second grandchild", || {
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        (pid != grandchild1).then_some(pid)
    });
    assert!(!gone(second) && !gone(grandchild2));

    hub.signal(Signal::SIGTERM);
    let exit = hub.wait_exit();
    assert!(exit.success(), "{exit:?}: {}", hub.stderr());
    std::thread::sleep(Duration::from_millis(50));
    for pid in [first, second, grandchild1, grandchild2] {
        assert!(gone(pid), "process {pid} is left after the hub stopped");
    }
}

#[test]
fn tools_that_would_share_a_name_are_a_bad_config() {
    use tau_api::hub_files::exit;
    let cases = [
        (
            "[mcp.servers.home]\ncommand = \"home-mcp\"\n[mcp.servers.home.tools.a-b]\ntier = 0\n[mcp.servers.home.tools.a_b]\ntier = 0\n",
            "MCP server 'home' tool 'a-b' and MCP server 'home' tool 'a_b' would both reach the model as 'mcp__home__a_b'",
        ),
        (
            // `a`'s `__b` and `a_`'s `_b` would both be `mcp__a____b`: `a_` is not a key.
            "[mcp.servers.a]\ncommand = \"x\"\n[mcp.servers.a.tools.__b]\ntier = 0\n[mcp.servers.a_]\ncommand = \"y\"\n[mcp.servers.a_.tools._b]\ntier = 0\n",
            "mcp.servers = [mcp.servers.a_]: expected server keys of",
        ),
    ];
    for (config, want) in cases {
        let install = Install::with_config(config);
        let (status, stderr) = install.run_to_exit();
        assert_eq!(status.code(), Some(i32::from(exit::CONFIG)), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        let file = install.home.join("tau.toml").display().to_string();
        assert!(stderr.starts_with(&format!("taud: {file}: ")), "{stderr}");
        assert!(stderr.contains(want), "{stderr}");
        assert!(!install.paths().lock_file.exists());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_calls_progress_reaches_a_client_over_the_socket_in_order() {
    use tau_api::proto::v1::session_event::Kind;
    let config = format!(
        "[models.roles.brain]\nprovider = \"fake\"\nmodel_id = \"fake\"\n\n[mcp.servers.fake]\ncommand = \"python3\"\nargs = [\"-u\", {script:?}]\nstartup_timeout_seconds = 10\n\n[mcp.servers.fake.tools.progress]\ntier = 0\n",
        script = fake_script().display().to_string(),
    );
    let install = Install::with_config(&config);
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    wait_for("the server ready", || {
        (server(&install)["state"] == "ready").then_some(())
    });
    let mut client = support::api::socket_client(&install).await;
    let session = support::api::new_session(&mut client, "terminal").await;
    // The offline demo model calls a tool the user names, with the JSON object given.
    let text = r#"run mcp__fake__progress {"seconds": 1.5, "every": 0.05}"#;
    let (mut stream, _) =
        support::api::start(&mut client, support::api::turn(&session, text, "terminal")).await;
    let mut kinds = Vec::new();
    while let Some(message) = support::api::next(&mut stream).await {
        kinds.push(support::api::kind(message));
    }
    let steps: Vec<f64> = kinds
        .iter()
        .filter_map(|k| match k {
            Kind::ToolProgress(p) => {
                assert_eq!(p.tool, "mcp__fake__progress");
                assert_eq!(
                    p.message,
                    format!("step {}", p.progress.unwrap_or_default())
                );
                p.progress
            }
            _ => None,
        })
        .collect();
    assert!(steps.len() >= 2, "{kinds:?}");
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    // About 30 reports in 1.5 s, at most one event per 250 ms.
    assert!(steps.len() <= 8, "{steps:?}");
    let last_progress = kinds
        .iter()
        .rposition(|k| matches!(k, Kind::ToolProgress(_)))
        .unwrap();
    let result = kinds
        .iter()
        .position(|k| matches!(k, Kind::ToolCall(_)))
        .unwrap();
    assert!(last_progress < result, "{kinds:?}");
    assert_eq!(support::api::tool_call(&kinds).status, 1, "{kinds:?}");
}
