//! A node's MCP servers lent to the hub, end to end: two real `taud` on loopback, the node running
//! the fake MCP server (`fixtures/fake_mcp.py`) from its own tau.toml. Its tools are lent under the
//! node's own names (`mcp__fx__<tool>`, limited by `[node] lend`) and offered as
//! `node__pi__mcp__fx__<tool>` only where the hub's owner tiered them; a tool the server adds is
//! announced on the same link; a call's progress reaches the hub's client and keeps a short call
//! timeout from expiring, while a call without progress times out; cancelling the turn cancels
//! the tool on the node. A tool that changed across a node restart: `tests/node_changed.rs`.

use std::path::Path;

use crate::support;

use support::api::*;
use support::mcp::{fake_script, wait_log};
use support::nodes::*;
use support::process::{Install, free_port};
use tau_api::proto::v1::{self as pb, session_event::Kind};

/// A hub listening for nodes on `listen`, whose owner tiered `tools` of node `pi` at tier 0,
/// with a `call_timeout` of `timeout` seconds.
pub fn hub_install(listen: u16, timeout: u64, tools: &[&str]) -> Install {
    let mut config = format!(
        "[hub]\nheartbeat_seconds = 1\n[nodes]\nlisten = \"127.0.0.1:{listen}\"\nheartbeat = 1\ncall_timeout = {timeout}\n"
    );
    for tool in tools {
        config.push_str(&format!("[nodes.pi.tools.{tool}]\ntier = 0\n"));
    }
    Install::with_config(&config)
}

/// A node running the fake MCP server as `fx` with `args`, tiering `tools` at tier 0 in its own
/// tau.toml; `lend`, when given, is its `[node] lend`.
pub fn node_config(args: &[&str], tools: &[&str], lend: Option<&[&str]>) -> String {
    let mut all = vec!["-u".to_owned(), fake_script().display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let mut config = format!(
        "[hub]\nheartbeat_seconds = 1\nrole = \"node\"\n[nodes]\nheartbeat = 1\n[mcp.servers.fx]\ncommand = \"python3\"\nargs = {all:?}\nstartup_timeout_seconds = 10\ncall_timeout_seconds = 60\n"
    );
    for tool in tools {
        config.push_str(&format!("[mcp.servers.fx.tools.{tool}]\ntier = 0\n"));
    }
    if let Some(lend) = lend {
        config.push_str(&format!("[node]\nlend = {lend:?}\n"));
    }
    config
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_lends_its_mcp_tools_as_it_names_them_and_announces_new_ones() {
    let listen = free_port();
    let hub_home = hub_install(
        listen,
        10,
        &[
            "mcp__fx__read_state",
            "mcp__fx__add_tool",
            "mcp__fx__extra",
            "mcp__fx__write_note",
        ],
    );
    let hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let calls = crate::support::temp::dir();
    let calls = calls.path().join("calls.jsonl");
    let lend = [
        "current_time",
        "mcp__fx__read_state",
        "mcp__fx__add_tool",
        "mcp__fx__extra",
    ];
    let node_home = Install::with_config(&node_config(
        &["--calls", &path(&calls)],
        &["read_state", "add_tool", "extra", "write_note"],
        Some(&lend),
    ));
    let node = node_home.spawn();
    node_home.wait_ready(node.pid());
    let mut hub_nodes = pair(&hub_home, &node_home, listen).await;

    // The server's tools arrive once it is ready, named as the node names them; only what the
    // node lends (write_note is tiered on both sides but not lent) and, of those, only what the
    // hub's owner tiered is offered.
    let listed = wait_node(&mut hub_nodes, "read_state lent", |n| {
        lent(n, "mcp__fx__read_state").is_some()
    })
    .await;
    let read = lent(&listed, "mcp__fx__read_state").unwrap();
    assert_eq!(read.offered_as, "node__pi__mcp__fx__read_state");
    assert!(lent(&listed, "mcp__fx__write_note").is_none(), "{listed:?}");
    assert!(lent(&listed, "mcp__fx__extra").is_none(), "not listed yet");
    let time = lent(&listed, "current_time").unwrap();
    assert!(!time.tiered && time.offered_as.is_empty(), "{time:?}");
    let names: Vec<&str> = listed.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["current_time", "mcp__fx__add_tool", "mcp__fx__read_state"]
    );

    let mut client = socket_client(&hub_home).await;
    let session = new_session(&mut client, "terminal").await;
    let (call, _) = one_call(
        &mut client,
        &session,
        r#"use node__pi__mcp__fx__read_state {"text": "hi"}"#,
    )
    .await;
    let call = call.expect("a call of the node's MCP tool");
    assert_eq!(
        call.status,
        pb::ToolCallStatus::Success as i32,
        "{}",
        call.result_summary
    );
    assert!(
        call.result_summary
            .contains(r#"read_state ok: {"text": "hi"}"#),
        "{}",
        call.result_summary
    );
    let ran = std::fs::read_to_string(&calls).unwrap();
    assert!(ran.contains(r#""name": "read_state""#), "{ran}");

    // The server adds a tool: the node announces it on the same link and the hub offers it.
    let (call, _) = one_call(&mut client, &session, "use node__pi__mcp__fx__add_tool {}").await;
    assert_eq!(call.unwrap().status, pb::ToolCallStatus::Success as i32);
    let listed = wait_node(&mut hub_nodes, "extra lent", |n| {
        lent(n, "mcp__fx__extra").is_some_and(|t| !t.offered_as.is_empty())
    })
    .await;
    assert!(listed.live);
    let (call, _) = one_call(&mut client, &session, "use node__pi__mcp__fx__extra {}").await;
    let call = call.expect("a call of the tool added later");
    assert_eq!(
        call.status,
        pb::ToolCallStatus::Success as i32,
        "{}",
        call.result_summary
    );
    assert!(call.result_summary.contains("extra ok"));
    drop((hub, node));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_keeps_a_node_call_alive_and_a_cancelled_turn_cancels_it_on_the_node() {
    let listen = free_port();
    let hub_home = hub_install(listen, 1, &["mcp__fx__progress", "mcp__fx__slow"]);
    let hub = hub_home.spawn();
    hub_home.wait_ready(hub.pid());
    let log = crate::support::temp::dir();
    let log = log.path().join("server.jsonl");
    let node_home = Install::with_config(&node_config(
        &["--log", &path(&log)],
        &["progress", "slow"],
        None,
    ));
    let node = node_home.spawn();
    node_home.wait_ready(node.pid());
    let mut hub_nodes = pair(&hub_home, &node_home, listen).await;
    wait_node(&mut hub_nodes, "progress and slow offered", |n| {
        ["mcp__fx__progress", "mcp__fx__slow"]
            .iter()
            .all(|t| lent(n, t).is_some_and(|t| !t.offered_as.is_empty()))
    })
    .await;
    let mut client = socket_client(&hub_home).await;
    let session = new_session(&mut client, "terminal").await;

    // Three seconds of work under a one-second call timeout: progress keeps it going, and each
    // report reaches the turn as the tool's progress.
    let text = r#"use node__pi__mcp__fx__progress {"seconds": 3, "every": 0.2}"#;
    let (mut stream, _) = start(&mut client, turn(&session, text, "terminal")).await;
    let kinds = rest(&mut stream).await;
    let steps: Vec<&pb::ToolProgress> = kinds
        .iter()
        .filter_map(|k| match k {
            Kind::ToolProgress(p) => Some(p),
            _ => None,
        })
        .collect();
    assert!(steps.len() >= 2, "{kinds:?}");
    for step in &steps {
        assert_eq!(step.tool, "node__pi__mcp__fx__progress");
        assert_eq!(
            step.message,
            format!("step {}", step.progress.unwrap_or_default())
        );
    }
    let call = tool_call(&kinds);
    assert_eq!(
        call.status,
        pb::ToolCallStatus::Success as i32,
        "{}",
        call.result_summary
    );
    assert!(call.result_summary.contains("finished after"));

    // Three seconds without a word: the hub gives up after one, outcome unknown.
    let (call, _) = one_call(
        &mut client,
        &session,
        r#"use node__pi__mcp__fx__slow {"seconds": 3}"#,
    )
    .await;
    let call = call.expect("the call was made");
    assert_eq!(call.status, pb::ToolCallStatus::Error as i32);
    assert!(
        call.result_summary
            .contains("outcome unknown: node pi did not answer within 1 s"),
        "{}",
        call.result_summary
    );

    // A cancelled turn: the tool on the node is told (the server logs its cancellation).
    let text = r#"use node__pi__mcp__fx__progress {"seconds": 60, "every": 0.2}"#;
    let (mut stream, accepted) = start(&mut client, turn(&session, text, "terminal")).await;
    loop {
        let message = next(&mut stream).await.expect("progress before the end");
        if matches!(kind(message), Kind::ToolProgress(_)) {
            break;
        }
    }
    client
        .cancel_turn(pb::CancelTurnRequest {
            session_id: session.clone(),
            turn_id: accepted.turn_id.clone(),
        })
        .await
        .unwrap();
    let kinds = rest(&mut stream).await;
    assert_eq!(
        tool_call(&kinds).status,
        pb::ToolCallStatus::Cancelled as i32,
        "{kinds:?}"
    );
    wait_log(&log, "the node's tool cancelled", |l| {
        l.get("cancelled").is_some()
    })
    .await;
    drop((hub, node));
}
