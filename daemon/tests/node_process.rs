//! A `taud` running as a node (TAU_ROLE=node), as a process: it serves `tau` on its local socket
//! (status and `tau.v1.Nodes`) but no health or reflection, builds no session service, and runs on
//! a current-thread runtime (its threads: the main one and at most one for blocking work). A `taud`
//! built without the `hub` feature runs as a node and refuses to start as a hub.

use crate::support;

use std::path::PathBuf;
use support::api::socket_client;
use support::process::{Install, uds_channel};
use tau_api::proto::v1::{self as pb, nodes_client::NodesClient};
use tonic::Code;

fn node_install() -> Install {
    Install::with_config("[hub]\nheartbeat_seconds = 1\nrole = \"node\"\n")
}

/// The threads of process `pid` (Linux: `/proc/PID/status`).
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_serves_tau_and_nodes_on_its_socket_without_health_or_a_session_service() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;

    let install = node_install();
    let node = install.spawn();
    install.wait_ready(node.pid());

    let mut client = socket_client(&install).await;
    let status = client
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.pid, node.pid());
    // No agent: the session service is not there, and says so.
    let refused = client
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");

    let channel = uds_channel(&install.paths().socket).await;
    let listed = NodesClient::new(channel.clone())
        .list_nodes(pb::ListNodesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.role, "node");
    let health = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: "tau.v1.Tau".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(health.code(), Code::Unimplemented, "{health:?}");

    let threads = threads(node.pid());
    assert!(
        threads <= 2,
        "a node runs on one runtime thread (and one for blocking work): {threads}"
    );
}

/// The `taud` built without the `hub` feature: `TAU_TEST_NODE_ONLY_TAUD`, which `.ci/run` builds
/// and sets (with `TAU_REQUIRE_NODE_ONLY_TAUD=1`, so that its absence fails there); `None` skips.
fn node_only_taud() -> Option<PathBuf> {
    let Some(path) = std::env::var_os("TAU_TEST_NODE_ONLY_TAUD") else {
        support::skip_unless_required(
            "TAU_REQUIRE_NODE_ONLY_TAUD",
            "TAU_TEST_NODE_ONLY_TAUD is not set",
            "set TAU_TEST_NODE_ONLY_TAUD to a taud built with --no-default-features",
        );
        return None;
    };
    Some(PathBuf::from(path))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_only_taud_refuses_to_be_a_hub_in_one_line_and_runs_as_a_node() {
    let Some(taud) = node_only_taud() else {
        return;
    };
    let hub = Install::new();
    let (status, stderr) = hub.run_to_exit_of(&taud);
    assert_eq!(status.code(), Some(78), "{stderr}");
    let said: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains(taud::services::HUB_LEFT_OUT))
        .collect();
    assert_eq!(said.len(), 1, "one line says why: {stderr}");
    assert!(
        !hub.paths().socket.exists(),
        "a refused hub leaves no socket behind"
    );

    let install = node_install();
    let node = install.spawn_of(&taud);
    install.wait_ready(node.pid());
    let listed = NodesClient::new(uds_channel(&install.paths().socket).await)
        .list_nodes(pb::ListNodesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.role, "node");
}
