//! Routines on node tools, with two real `taud` on loopback: a routine naming
//! `node__<node>__<tool>` is registered against the catalog a session would get now (node tools
//! included, also without a registering session), and its firing resolves the tool through the
//! catalog a turn would start with now, so a routine session opened before the node joined still
//! finds the node's tool, and the call runs on the node.

use std::time::Duration;

use crate::support;

use support::api::socket_client;
use support::nodes::{node_calls, pair};
use support::process::{Install, free_port};
use tau_api::proto::v1 as pb;

fn tool_routine(name: &str, tool: &str, replace: bool) -> pb::AddRoutineRequest {
    pb::AddRoutineRequest {
        name: name.into(),
        every: "1d".into(),
        action: Some(pb::add_routine_request::Action::Tool(
            pb::RoutineToolAction {
                tool: tool.into(),
                arguments_json: "{}".into(),
            },
        )),
        replace,
        ..Default::default()
    }
}

/// Runs routine `name` now and waits for that firing's end (or gives up at the deadline).
async fn run_and_wait(client: &mut support::api::Client, name: &str) -> pb::RoutineFiring {
    let firing = client
        .run_routine(pb::RunRoutineRequest {
            name: name.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .firing;
    let end = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let history = client
            .routine_history(pb::RoutineHistoryRequest { name: name.into() })
            .await
            .unwrap()
            .into_inner()
            .firings;
        if let Some(done) = history
            .iter()
            .find(|f| f.number == firing && f.outcome != "running")
        {
            return done.clone();
        }
        assert!(
            tokio::time::Instant::now() < end,
            "firing {firing} of {name} never ended: {history:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_calls_a_node_tool_through_the_catalog_a_turn_would_use() {
    let listen = free_port();
    let hub_home = Install::with_config(&format!(
        "[hub]\nheartbeat_seconds = 1\n[nodes]\nlisten = \"127.0.0.1:{listen}\"\nheartbeat = 1\n\
         call_timeout = 10\n[nodes.pi.tools.current_time]\ntier = 0\n"
    ));
    let hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let node_home = Install::with_config(
        "[hub]\nheartbeat_seconds = 1\nrole = \"node\"\n[nodes]\nheartbeat = 1\n",
    );
    let node = node_home.spawn();
    node_home.wait_ready(node.pid());
    let mut client = socket_client(&hub_home).await;

    // Before the node joins: a node tool is unknown, and routine `clock` fires on the hub's own
    // current_time, which opens its session (`routine-clock`) with the catalog of then.
    let unknown = client
        .add_routine(tool_routine("clock", "node__pi__current_time", false))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::InvalidArgument, "{unknown:?}");
    client
        .add_routine(tool_routine("clock", "current_time", false))
        .await
        .unwrap();
    let local = run_and_wait(&mut client, "clock").await;
    assert_eq!(local.outcome, "succeeded", "{local:?}");

    pair(&hub_home, &node_home, listen).await;

    // Registered without a session, against the catalog a session would get now.
    client
        .add_routine(tool_routine("clock", "node__pi__current_time", true))
        .await
        .unwrap();
    // Fired through the routine session opened before the node joined: the tool is found.
    let lent = run_and_wait(&mut client, "clock").await;
    assert_eq!(lent.outcome, "succeeded", "{lent:?}");
    assert!(
        lent.detail.starts_with("node__pi__current_time"),
        "{lent:?}"
    );
    assert!(lent.detail.contains("ISO 8601"), "{lent:?}");
    // The node's log line may follow the answer by a moment.
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    while node_calls(&node_home, "current_time") == 0 && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        node_calls(&node_home, "current_time"),
        1,
        "it ran on the node"
    );
}
