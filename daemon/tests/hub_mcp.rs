//! MCP tools through the hub core, exactly like built-in tools: a tier-0 call runs and its result
//! reaches the model with a `tool_call` event; a tier-2 call asks with the owner's effect sentence
//! and the exact arguments, and runs only when approved; an untiered tool is never offered; a
//! server that becomes ready after a session opened is offered from the next turn; shutting the
//! core down stops every server; an MCP image reaches the model as an image block.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support {
    pub mod hub;
    pub mod mcp;
}

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::hub::{drain, ended_text, fixture_with, next_turn_event, options};
use support::mcp::{fake_spec, wait_gone};
use taud::gate::ToolCallStatus;
use taud::hub::{ApprovalAnswer, EventKind, HubCore, SessionEvent};
use taud::mcp::Phase;
use taud::message::{ImageBlock, ToolResultContent, ToolResultStatus};
use taud::testing::FakeReply;

async fn wait_ready(core: &HubCore) {
    let deadline = tokio::time::Instant::now() + support::mcp::DEADLINE;
    while core.mcp().status().iter().any(|s| s.state != Phase::Ready) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            core.mcp().status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn tool_calls(events: &[Arc<SessionEvent>]) -> Vec<(String, ToolCallStatus, String)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCall(call) => {
                Some((call.tool.clone(), call.status, call.result_summary.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_tier_0_mcp_call_runs_and_its_result_reaches_the_model() {
    let mut opts = options();
    opts.mcp_servers = vec![fake_spec("fake", &[])];
    let f = fixture_with(
        "file",
        vec![
            FakeReply::tool_call("mcp__fake__read_state", json!({"text": "kitchen"})),
            FakeReply::text("the kitchen is fine"),
        ],
        opts,
    )
    .await;
    wait_ready(&f.core).await;
    let tools = f.core.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"current_time"));
    assert!(names.contains(&"mcp__fake__read_state"));
    let untiered = tools
        .iter()
        .find(|t| t.name == "mcp__fake__untiered_tool")
        .unwrap();
    assert_eq!((untiered.state.as_str(), untiered.tier), ("untiered", None));
    assert_eq!(untiered.server.as_deref(), Some("fake"));

    let id = f.new_session().await;
    let mut turn = f.turn(&id, "how is the kitchen?", "terminal").await;
    let events = drain(&mut turn).await;
    assert_eq!(ended_text(&events), "the kitchen is fine");
    let calls = tool_calls(&events);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].0, "mcp__fake__read_state");
    assert_eq!(calls[0].1, ToolCallStatus::Success);

    let requests = f.model.requests();
    let offered: Vec<String> = requests[0].tools.iter().map(|t| t.name.clone()).collect();
    assert!(offered.contains(&"mcp__fake__lamp".to_owned()));
    assert!(
        !offered.iter().any(|n| n.contains("untiered")),
        "an untiered tool is never offered: {offered:?}"
    );
    let result = requests[1]
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .next()
        .unwrap()
        .clone();
    assert_eq!(result.status, ToolResultStatus::Success);
    assert_eq!(
        result.content,
        vec![ToolResultContent::Text(
            "read_state ok: {\"text\": \"kitchen\"}".into()
        )]
    );
    f.core.shutdown().await;
}

#[tokio::test]
async fn an_mcp_image_reaches_the_model_as_an_image_block() {
    let mut opts = options();
    opts.mcp_servers = vec![fake_spec("fake", &[])];
    let f = fixture_with(
        "file",
        vec![
            FakeReply::tool_call("mcp__fake__image", json!({})),
            FakeReply::text("a tiny picture"),
        ],
        opts,
    )
    .await;
    wait_ready(&f.core).await;
    let id = f.new_session().await;
    let mut turn = f.turn(&id, "show me", "terminal").await;
    let events = drain(&mut turn).await;
    assert_eq!(ended_text(&events), "a tiny picture");
    let calls = tool_calls(&events);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1, ToolCallStatus::Success);
    assert_eq!(calls[0].2, "[image image/png of 8 bytes, not shown]");
    let result = f.model.requests()[1]
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .next()
        .unwrap()
        .clone();
    assert_eq!(
        result.content,
        vec![ToolResultContent::Image(
            ImageBlock::from_base64("image/png", "iVBORw0KGgo=").unwrap()
        )]
    );
    f.core.shutdown().await;
}

#[tokio::test]
async fn a_tier_2_mcp_call_asks_with_effect_and_exact_arguments_every_time() {
    let dir = tempfile::tempdir().unwrap();
    let calls_file = dir.path().join("calls.jsonl");
    let mut opts = options();
    opts.mcp_servers = vec![fake_spec(
        "fake",
        &["--calls", calls_file.to_str().unwrap()],
    )];
    let args = json!({"text": "on, 40%"});
    let f = fixture_with(
        "sqlite",
        vec![
            FakeReply::tool_call("mcp__fake__lamp", args.clone()),
            FakeReply::text("the lamp is on"),
            FakeReply::tool_call("mcp__fake__lamp", args.clone()),
            FakeReply::text("not switched"),
        ],
        opts,
    )
    .await;
    wait_ready(&f.core).await;
    let id = f.new_session().await;

    for (answer, status) in [
        (ApprovalAnswer::Approve, ToolCallStatus::Success),
        (ApprovalAnswer::Reject, ToolCallStatus::Refused),
    ] {
        let mut turn = f.turn(&id, "lamp on", "terminal").await;
        let info = loop {
            let event = next_turn_event(&mut turn).await.unwrap();
            if let EventKind::ApprovalRequested(info) = &event.kind {
                break info.clone();
            }
        };
        assert_eq!(info.request.tool, "mcp__fake__lamp");
        assert_eq!(info.request.tier.number(), 2);
        assert_eq!(info.request.effect, "Switches the test lamp on or off.");
        assert_eq!(
            info.request.formatted_arguments(),
            "{\"text\": \"on, 40%\"}"
        );
        f.core
            .decide(&info.request.approval_id, answer, turn.attachment_id())
            .unwrap();
        let events = drain(&mut turn).await;
        let calls = tool_calls(&events);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].1, status, "{calls:?}");
    }
    // The server saw exactly one call, with exactly the approved arguments.
    let seen = std::fs::read_to_string(&calls_file).unwrap();
    let lines: Vec<serde_json::Value> = seen
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, vec![json!({"name": "lamp", "arguments": args})]);
    f.core.shutdown().await;
}

#[tokio::test]
async fn tools_of_a_server_that_gets_ready_later_apply_from_the_next_turn_and_shutdown_stops_it() {
    let mut opts = options();
    opts.mcp_servers = vec![fake_spec("fake", &[])];
    let f = fixture_with(
        "file",
        vec![FakeReply::text("first"), FakeReply::text("second")],
        opts,
    )
    .await;
    // The session opens (and its agent is built) at once, most likely before the server is up.
    let id = f.new_session().await;
    let mut turn = f.turn(&id, "one", "terminal").await;
    assert_eq!(ended_text(&drain(&mut turn).await), "first");
    wait_ready(&f.core).await;
    let pid = f.core.mcp().status()[0].pid.unwrap();
    let mut turn = f.turn(&id, "two", "terminal").await;
    assert_eq!(ended_text(&drain(&mut turn).await), "second");
    let offered: Vec<String> = f.model.requests()[1]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(
        offered.contains(&"mcp__fake__read_state".to_owned()),
        "{offered:?}"
    );
    f.core.shutdown().await;
    wait_gone(pid).await;
    assert_eq!(f.core.mcp().status()[0].state, Phase::Stopped);
}

#[tokio::test]
async fn components_tools_disabled_removes_mcp_tools() {
    let mut opts = options();
    opts.mcp_servers = vec![fake_spec("fake", &[])];
    opts.disabled_tools = vec!["mcp__fake__lamp".into()];
    let f = fixture_with("file", vec![], opts).await;
    wait_ready(&f.core).await;
    let names: Vec<String> = f.core.tools().into_iter().map(|t| t.name).collect();
    assert!(!names.contains(&"mcp__fake__lamp".to_owned()));
    assert!(names.contains(&"mcp__fake__read_state".to_owned()));
    f.core.shutdown().await;

    let mut opts = options();
    opts.mcp_servers = vec![fake_spec("fake", &[])];
    opts.disabled_tools = vec!["dist:mcp:fake".into()];
    let f = fixture_with("file", vec![], opts).await;
    wait_ready(&f.core).await;
    let ready: Vec<String> = f
        .core
        .tools()
        .into_iter()
        .filter(|t| t.state == "ready")
        .map(|t| t.name)
        .collect();
    assert_eq!(ready, vec!["current_time", "demo_physical_action"]);
    f.core.shutdown().await;
}
