//! A node that comes back with a changed tool, end to end (two real `taud` on loopback): the
//! node's MCP server describes a tool differently after the node restarts. The hub flags it in
//! `ListNodes` and offers it no more, and a tier-2 call approved for the tool as it was does not
//! run the changed one (the approval is bound to the claim it was asked for).

use crate::support;

use support::api::*;
use support::nodes::*;
use support::process::{Install, free_port};
use tau_api::proto::v1 as pb;

use super::node_mcp::node_config;

const EFFECT: &str = "Opens the garage door.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_is_flagged_not_offered_and_not_covered_by_an_approval() {
    let listen = free_port();
    let hub_home = Install::with_config(&format!(
        "[hub]\nheartbeat_seconds = 1\n[nodes]\nlisten = \"127.0.0.1:{listen}\"\nheartbeat = 1\ncall_timeout = 10\n[nodes.pi.tools.mcp__fx__gadget]\ntier = 2\neffect = \"{EFFECT}\"\n"
    ));
    let hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let calls = crate::support::temp::dir();
    let calls = calls.path().join("calls.jsonl");
    let calls_arg = calls.display().to_string();
    let node_home = Install::with_config(&node_config(
        &["--tool", "gadget", "--calls", &calls_arg],
        &["gadget"],
        None,
    ));
    let mut node = node_home.spawn();
    node_home.wait_ready(node.pid());
    let mut hub_nodes = pair(&hub_home, &node_home, listen).await;
    let offered = |n: &pb::NodeInfo| {
        n.live && lent(n, "mcp__fx__gadget").is_some_and(|t| !t.offered_as.is_empty())
    };
    wait_node(&mut hub_nodes, "gadget offered", offered).await;

    // A tier-2 call of the tool as first announced is asked on the hub.
    let mut client = socket_client(&hub_home).await;
    let session = new_session(&mut client, "terminal").await;
    let text = r#"use node__pi__mcp__fx__gadget {"text": "open"}"#;
    let (mut stream, accepted) = start(&mut client, turn(&session, text, "terminal")).await;
    let approval = until_approval(&mut stream).await;
    assert_eq!(approval.tool, "node__pi__mcp__fx__gadget");
    assert_eq!(approval.effect, EFFECT);

    // Meanwhile the node restarts, its server now describing the tool otherwise.
    node.signal(nix::sys::signal::Signal::SIGTERM);
    node.wait_exit();
    std::fs::write(
        node_home.home.join("tau.toml"),
        node_config(
            &[
                "--tool",
                "gadget",
                "--calls",
                &calls_arg,
                "--tool-description",
                "Opens every door in the house.",
            ],
            &["gadget"],
            None,
        ),
    )
    .unwrap();
    let node = node_home.spawn();
    node_home.wait_ready(node.pid());
    let flagged = wait_node(&mut hub_nodes, "gadget changed", |n| {
        n.live && lent(n, "mcp__fx__gadget").is_some_and(|t| t.changed)
    })
    .await;
    let gadget = lent(&flagged, "mcp__fx__gadget").unwrap();
    assert!(gadget.tiered && gadget.offered_as.is_empty(), "{gadget:?}");

    // The approval was for the tool as it was: the changed one does not run.
    decide(
        &mut client,
        &approval.approval_id,
        pb::ApprovalDecision::Approved,
        &accepted.attachment_id,
    )
    .await;
    let kinds = rest(&mut stream).await;
    let call = tool_call(&kinds);
    assert_eq!(call.status, pb::ToolCallStatus::Error as i32, "{kinds:?}");
    assert!(
        call.result_summary
            .contains("node pi no longer lends mcp__fx__gadget as it was offered"),
        "{}",
        call.result_summary
    );
    let ran = std::fs::read_to_string(&calls).unwrap_or_default();
    assert!(!ran.contains("gadget"), "the changed tool ran: {ran}");

    // And it is offered no more.
    let (call, _) = one_call(&mut client, &session, text).await;
    assert!(call.is_none(), "a changed tool was offered: {call:?}");

    // Paired again, the owner takes the tool as it now is: offered again, and it runs once
    // approved anew.
    let mut hub_nodes = pair(&hub_home, &node_home, listen).await;
    wait_node(&mut hub_nodes, "gadget offered again", offered).await;
    let (mut stream, accepted) = start(&mut client, turn(&session, text, "terminal")).await;
    let approval = until_approval(&mut stream).await;
    decide(
        &mut client,
        &approval.approval_id,
        pb::ApprovalDecision::Approved,
        &accepted.attachment_id,
    )
    .await;
    let kinds = rest(&mut stream).await;
    let call = tool_call(&kinds);
    assert_eq!(
        call.status,
        pb::ToolCallStatus::Success as i32,
        "{}",
        call.result_summary
    );
    let ran = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(ran.matches("gadget").count(), 1, "{ran}");
    drop((hub, node));
}
