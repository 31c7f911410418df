//! Helpers of the node tests (a hub and a node, two real `taud` on loopback): `tau.v1.Nodes`
//! clients, pairing, waits on `ListNodes` with deadlines, one turn's tool call, and what a node's
//! log says it ran.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tau_api::proto::v1::{self as pb, nodes_client::NodesClient, session_event::Kind};
use tonic::transport::Channel;

use super::api::{Client, ended, rest, start, turn};
use super::process::{Install, uds_channel};

/// `tau.v1.Nodes` over `install`'s socket.
pub async fn nodes(install: &Install) -> NodesClient<Channel> {
    NodesClient::new(uds_channel(&install.paths().socket).await)
}

/// A pairing code for node `pi`.
pub async fn code(hub: &mut NodesClient<Channel>) -> String {
    let request = pb::PairNodeRequest { name: "pi".into() };
    hub.pair_node(request).await.unwrap().into_inner().code
}

/// Joins the hub listening on `listen` with `code`.
pub async fn join(
    node: &mut NodesClient<Channel>,
    listen: u16,
    code: &str,
) -> Result<pb::JoinHubResponse, tonic::Status> {
    let request = pb::JoinHubRequest {
        address: format!("127.0.0.1:{listen}"),
        code: code.into(),
    };
    node.join_hub(request)
        .await
        .map(tonic::Response::into_inner)
}

/// Pairs the node of `node_home` as `pi` with the hub of `hub_home` (listening on `listen`) and
/// waits until the hub sees it live.
pub async fn pair(hub_home: &Install, node_home: &Install, listen: u16) -> NodesClient<Channel> {
    let mut hub_nodes = nodes(hub_home).await;
    let code = code(&mut hub_nodes).await;
    join(&mut nodes(node_home).await, listen, &code)
        .await
        .unwrap();
    wait_live(&mut hub_nodes, "pi", true).await;
    hub_nodes
}

/// Polls `ListNodes` until node `name` is (or is not) live, or gives up at the deadline.
pub async fn wait_live(client: &mut NodesClient<Channel>, name: &str, live: bool) -> pb::NodeInfo {
    wait_node(client, &format!("node {name} live={live}"), |n| {
        n.name == name && n.live == live
    })
    .await
}

/// Polls `ListNodes` until a node for which `check` holds is listed, or gives up at the deadline.
pub async fn wait_node(
    client: &mut NodesClient<Channel>,
    what: &str,
    check: impl Fn(&pb::NodeInfo) -> bool,
) -> pb::NodeInfo {
    let end = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let listed = client.list_nodes(pb::ListNodesRequest {}).await.unwrap();
        let listed = listed.into_inner().nodes;
        if let Some(node) = listed.iter().find(|n| check(n)) {
            return node.clone();
        }
        assert!(
            tokio::time::Instant::now() < end,
            "never listed: {what}; last: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The tool `name` a node lends, as `ListNodes` shows it.
pub fn lent<'a>(node: &'a pb::NodeInfo, name: &str) -> Option<&'a pb::LentTool> {
    node.tools.iter().find(|t| t.name == name)
}

/// A turn's tool call and final text.
pub async fn one_call(
    client: &mut Client,
    session: &str,
    text: &str,
) -> (Option<pb::ToolCallFinished>, String) {
    let (mut stream, _) = start(client, turn(session, text, "terminal")).await;
    let kinds = rest(&mut stream).await;
    let call = kinds.iter().find_map(|k| match k {
        Kind::ToolCall(call) => Some(call.clone()),
        _ => None,
    });
    (call, ended(&kinds).text.clone())
}

/// How many calls of `tool` the node of `install` says it ran for the hub.
pub fn node_calls(install: &Install, tool: &str) -> usize {
    let log = std::fs::read_to_string(install.data.join("logs/tau.log")).unwrap_or_default();
    log.lines()
        .filter(|l| l.contains("ran a call for the hub") && l.contains(tool))
        .count()
}

/// Polls `ListNodes` until a node in some `state` is listed.
pub async fn wait_state(client: &mut NodesClient<Channel>, state: &str) -> pb::NodeInfo {
    wait_node(client, &format!("a node {state}"), |n| n.state == state).await
}
