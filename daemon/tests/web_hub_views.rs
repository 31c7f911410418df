//! What the web client shows of the hub beside its sessions, against real `taud` processes: the
//! routines with their last firings (`/api/routines`, the same as `ListRoutines` and
//! `RoutineHistory` answer over gRPC) and the paired nodes with their liveness (`/api/nodes`, a
//! second `taud` as a node, live while it beats, away once killed); both only for a signed-in
//! device.

use serde_json::Value;
use tau_api::proto::v1::{self as pb, nodes_client::NodesClient};

use crate::support::api::socket_client;
use crate::support::process::{Install, free_port, uds_channel, wait_for};
use crate::support::web::{Browser, WebHub};

fn signed_in(web: &WebHub, name: &str) -> Browser {
    let mut browser = Browser::enroll(web, &web.pair(name));
    browser.login(web);
    browser
}

fn tool_routine(name: &str, every: &str) -> pb::AddRoutineRequest {
    pb::AddRoutineRequest {
        name: name.into(),
        every: every.into(),
        action: Some(pb::add_routine_request::Action::Tool(
            pb::RoutineToolAction {
                tool: "current_time".into(),
                arguments_json: "{}".into(),
            },
        )),
        ..Default::default()
    }
}

fn routine<'a>(listed: &'a Value, name: &str) -> &'a Value {
    listed["routines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("{name} in {listed}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routines_are_listed_with_their_last_firings_as_the_api_reads_them() {
    let web = WebHub::start();
    let browser = signed_in(&web, "laptop");
    let listed = browser.get(&web, "/api/routines");
    assert_eq!(listed.status, 200, "{}", listed.body);
    assert_eq!(listed.json()["enabled"], true, "{}", listed.body);
    assert_eq!(listed.json()["routines"], serde_json::json!([]));

    let mut client = socket_client(&web.install).await;
    client
        .add_routine(tool_routine("clock", "1h"))
        .await
        .unwrap();
    client
        .add_routine(tool_routine("quiet", "1d"))
        .await
        .unwrap();
    for _ in 0..2 {
        let request = pb::RunRoutineRequest {
            name: "clock".into(),
            ..Default::default()
        };
        client.run_routine(request).await.unwrap();
    }
    let history = |client: &mut crate::support::api::Client| {
        let mut client = client.clone();
        async move {
            let request = pb::RoutineHistoryRequest {
                name: "clock".into(),
            };
            client
                .routine_history(request)
                .await
                .unwrap()
                .into_inner()
                .firings
        }
    };
    // Both firings ended (a tier-0 tool runs at once).
    let firings = loop {
        let firings = history(&mut client).await;
        if firings.len() == 2 && firings.iter().all(|f| f.outcome != "running") {
            break firings;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };

    let listed = browser.get(&web, "/api/routines").json();
    let clock = routine(&listed, "clock");
    assert_eq!(clock["schedule"], "every 1h", "{clock}");
    assert!(clock["next_firing"].is_string(), "{clock}");
    assert_eq!(clock["paused"], false);
    let last = clock["last_firings"].as_array().unwrap();
    assert_eq!(last.len(), 2, "{clock}");
    // Newest first, each as RoutineHistory has it.
    for (shown, fired) in last.iter().zip(firings.iter().rev()) {
        assert_eq!(shown["number"], fired.number);
        assert_eq!(shown["outcome"], fired.outcome.as_str());
        assert_eq!(shown["outcome"], "succeeded");
        assert_eq!(shown["cause"], "manual");
        assert_eq!(shown["started_at"], fired.started_at.as_str());
    }
    assert!(last[0]["number"].as_u64() > last[1]["number"].as_u64());
    let quiet = routine(&listed, "quiet");
    assert_eq!(quiet["last_firings"], serde_json::json!([]), "never fired");

    // Paused, as PauseRoutine left it.
    client
        .pause_routine(pb::PauseRoutineRequest {
            name: "quiet".into(),
        })
        .await
        .unwrap();
    let listed = browser.get(&web, "/api/routines").json();
    assert_eq!(routine(&listed, "quiet")["paused"], true);

    // Only for a signed-in device.
    assert_eq!(web.page("GET", "/api/routines", None, "").status, 401);
    // A hub with no nodes lists none.
    let nodes = browser.get(&web, "/api/nodes");
    assert_eq!(nodes.status, 200, "{}", nodes.body);
    assert_eq!(nodes.json()["nodes"], serde_json::json!([]));
}

fn node_listed(browser: &Browser, web: &WebHub, live: bool) -> Value {
    wait_for(&format!("node pi live={live} in /api/nodes"), || {
        let nodes = browser.get(web, "/api/nodes").json();
        let pi = nodes["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["name"] == "pi")?
            .clone();
        (pi["live"] == live).then_some(pi)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_nodes_are_listed_and_a_silent_one_is_shown_away() {
    let listen = free_port();
    let web = WebHub::start_config(
        |web_port| {
            format!(
                "[hub]\nheartbeat_seconds = 1\n[nodes]\nlisten = \"127.0.0.1:{listen}\"\n\
                 heartbeat = 1\ncall_timeout = 10\n[nodes.pi.tools.current_time]\ntier = 0\n\
                 [web]\nlisten = \"127.0.0.1:{web_port}\"\n"
            )
        },
        &[],
    );
    let browser = signed_in(&web, "laptop");
    let node_home = Install::with_config(
        "[hub]\nheartbeat_seconds = 1\nrole = \"node\"\n[nodes]\nheartbeat = 1\n",
    );
    let mut node = node_home.spawn();
    node_home.wait_ready(node.pid());

    let mut hub_nodes = NodesClient::new(uds_channel(&web.install.paths().socket).await);
    let mut node_nodes = NodesClient::new(uds_channel(&node_home.paths().socket).await);
    let code = hub_nodes
        .pair_node(pb::PairNodeRequest { name: "pi".into() })
        .await
        .unwrap()
        .into_inner()
        .code;
    node_nodes
        .join_hub(pb::JoinHubRequest {
            address: format!("127.0.0.1:{listen}"),
            code,
        })
        .await
        .unwrap();

    let pi = tokio::task::block_in_place(|| node_listed(&browser, &web, true));
    assert!(pi["last_seen"].is_string(), "{pi}");
    assert_eq!(pi["state"], "paired");
    let tools: Vec<&str> = pi["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"node__pi__current_time"), "{pi}");
    assert!(
        pi.get("fingerprint").is_none() && pi.get("address").is_none(),
        "{pi}"
    );

    // Liveness comes from heartbeats: a killed node is shown away.
    node.signal(nix::sys::signal::Signal::SIGKILL);
    node.wait_exit();
    let pi = tokio::task::block_in_place(|| node_listed(&browser, &web, false));
    assert_eq!(pi["name"], "pi");
    assert_eq!(web.page("GET", "/api/nodes", None, "").status, 401);
}
