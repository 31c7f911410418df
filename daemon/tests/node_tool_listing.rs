//! `ListTools` on a hub with a node, over the hub's real gRPC socket (two real `taud` on loopback):
//! each lent tool as `node__<node>__<tool>` with its node, the owner's tier and effect from the
//! hub's tau.toml; an untiered claim listed as not offered; the tools of a node that is not live
//! marked `offline`, also after the hub restarts without it (known then from the pairing store);
//! `[components.tools] disabled` hides them as it hides any tool.

use std::time::Duration;

use crate::support;

use support::api::socket_client;
use support::process::{Install, free_port, uds_channel};
use tau_api::proto::v1::{self as pb, nodes_client::NodesClient};
use tonic::transport::Channel;

const EFFECT: &str = "Moves the demo actuator on the node.";

fn hub_install(listen: u16, extra: &str) -> Install {
    Install::with_config(&format!(
        "[hub]\nheartbeat_seconds = 1\n[nodes]\nlisten = \"127.0.0.1:{listen}\"\nheartbeat = 1\n\
         [nodes.pi.tools.demo_physical_action]\ntier = 2\neffect = \"{EFFECT}\"\n{extra}"
    ))
}

async fn nodes(install: &Install) -> NodesClient<Channel> {
    NodesClient::new(uds_channel(&install.paths().socket).await)
}

/// Pairs the node of `node_home` with the hub of `hub_home` listening on `listen`.
async fn pair(hub_home: &Install, node_home: &Install, listen: u16) {
    let mut hub = nodes(hub_home).await;
    let code = hub
        .pair_node(pb::PairNodeRequest { name: "pi".into() })
        .await
        .unwrap()
        .into_inner()
        .code;
    nodes(node_home)
        .await
        .join_hub(pb::JoinHubRequest {
            address: format!("127.0.0.1:{listen}"),
            code,
        })
        .await
        .unwrap();
}

async fn list_tools(install: &Install) -> Vec<pb::ToolInfo> {
    let mut client = socket_client(install).await;
    client
        .list_tools(pb::ListToolsRequest {})
        .await
        .unwrap()
        .into_inner()
        .tools
}

/// Polls `ListTools` until `name` is listed in `state`, or gives up at the deadline.
async fn wait_tool(install: &Install, name: &str, state: &str) -> pb::ToolInfo {
    let end = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let tools = list_tools(install).await;
        if let Some(tool) = tools.iter().find(|t| t.name == name && t.state == state) {
            return tool.clone();
        }
        assert!(
            tokio::time::Instant::now() < end,
            "{name} never listed as {state}: {tools:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_tools_shows_node_tools_with_tiers_untiered_claims_and_offline_nodes() {
    let listen = free_port();
    let hub_home = hub_install(listen, "");
    let mut hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let node_home = Install::with_config(
        "[hub]\nheartbeat_seconds = 1\nrole = \"node\"\n[nodes]\nheartbeat = 1\n",
    );
    let mut node = node_home.spawn();
    node_home.wait_ready(node.pid());
    // Before any node: only this machine's tools, none naming a node.
    assert!(
        list_tools(&hub_home)
            .await
            .iter()
            .all(|t| t.node.is_empty())
    );
    pair(&hub_home, &node_home, listen).await;

    // Live: the tiered claim is offered with the owner's tier and effect; the untiered one is
    // listed as not offered, with the node's description.
    let action = wait_tool(&hub_home, "node__pi__demo_physical_action", "ready").await;
    assert_eq!(
        (action.tier, action.node.as_str(), action.effect.as_str()),
        (pb::Tier::Physical as i32, "pi", EFFECT)
    );
    assert!(action.server.is_empty());
    let tools = list_tools(&hub_home).await;
    let time = tools
        .iter()
        .find(|t| t.name == "node__pi__current_time")
        .unwrap();
    assert_eq!(
        (time.state.as_str(), time.tier, time.node.as_str()),
        ("untiered", pb::Tier::Unspecified as i32, "pi")
    );
    assert!(!time.description.is_empty(), "{time:?}");
    // This machine's own tools are still there, naming no node.
    let local = tools.iter().find(|t| t.name == "current_time").unwrap();
    assert_eq!((local.state.as_str(), local.node.as_str()), ("ready", ""));

    // The node goes away: its tools stay listed, marked offline (a call fails at once).
    node.signal(nix::sys::signal::Signal::SIGKILL);
    node.wait_exit();
    let away = wait_tool(&hub_home, "node__pi__demo_physical_action", "offline").await;
    assert_eq!(away.tier, pb::Tier::Physical as i32);
    assert_eq!(away.effect, EFFECT);

    // The hub restarts while the node is away: the tools first seen are known from the pairing
    // store, still tiered by the owner, still offline or untiered.
    hub.signal(nix::sys::signal::Signal::SIGTERM);
    hub.wait_exit();
    let hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let tools = list_tools(&hub_home).await;
    let state = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .map(|t| (t.state.clone(), t.tier, t.node.clone()))
    };
    assert_eq!(
        state("node__pi__demo_physical_action"),
        Some(("offline".into(), pb::Tier::Physical as i32, "pi".into()))
    );
    assert_eq!(
        state("node__pi__current_time"),
        Some(("untiered".into(), pb::Tier::Unspecified as i32, "pi".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_node_tools_are_not_listed() {
    let listen = free_port();
    let hub_home = hub_install(
        listen,
        "[components.tools]\ndisabled = [\"dist:node:pi\"]\n",
    );
    let hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let node_home = Install::with_config(
        "[hub]\nheartbeat_seconds = 1\nrole = \"node\"\n[nodes]\nheartbeat = 1\n",
    );
    let node = node_home.spawn();
    node_home.wait_ready(node.pid());
    pair(&hub_home, &node_home, listen).await;
    let mut hub_nodes = nodes(&hub_home).await;
    let end = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let listed = hub_nodes
            .list_nodes(pb::ListNodesRequest {})
            .await
            .unwrap()
            .into_inner();
        if listed.nodes.iter().any(|n| n.live && !n.tools.is_empty()) {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "pi never came up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tools = list_tools(&hub_home).await;
    assert!(
        tools.iter().all(|t| t.node.is_empty()),
        "a disabled node's tools were listed: {tools:#?}"
    );
    assert!(tools.iter().any(|t| t.name == "current_time"));
}
