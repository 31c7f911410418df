//! A real third-party MCP server through the hub core: `mcp-server-time` from PyPI, found through
//! `TAU_TEST_MCP_TIME` (`.ci/run` installs it into its venv and exports the path). Its tools are
//! listed, and a tier-0 call's result reaches the model. Without the variable the test says so and
//! passes, unless `TAU_REQUIRE_PYTHON_CLIENT=1` (set by `.ci/run`) makes that a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::hub::{drain, ended_text, fixture_with, options};
use taud::hub::EventKind;
use taud::mcp::{McpServerSpec, Phase, ToolState};
use taud::message::ToolResultContent;
use taud::testing::FakeReply;
use taud::tool::Tier;

#[tokio::test]
async fn mcp_server_time_lists_its_tools_and_answers_a_tier_0_call() {
    let Some(command) = std::env::var_os("TAU_TEST_MCP_TIME") else {
        support::skip_unless_required(
            "TAU_REQUIRE_PYTHON_CLIENT",
            "TAU_TEST_MCP_TIME is not set",
            "set TAU_TEST_MCP_TIME to an mcp-server-time executable",
        );
        return;
    };
    let env = tau_api::env::Env::from_process();
    let mut spec = McpServerSpec::new("time", command.to_string_lossy(), &env).tool(
        "get_current_time",
        Tier::Read,
        None,
    );
    spec.args = vec!["--local-timezone".into(), "Europe/Istanbul".into()];
    spec.startup_timeout = Duration::from_secs(20);
    let mut opts = options();
    opts.mcp_servers = vec![spec];
    let f = fixture_with(
        "file",
        vec![
            FakeReply::tool_call(
                "mcp__time__get_current_time",
                json!({"timezone": "Europe/Istanbul"}),
            ),
            FakeReply::text("done"),
        ],
        opts,
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status = f.core.mcp().status().remove(0);
        if status.state == Phase::Ready {
            break status;
        }
        assert!(tokio::time::Instant::now() < deadline, "{status:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let listed: Vec<(&str, ToolState)> = status
        .tools
        .iter()
        .map(|t| (t.tool.as_str(), t.state))
        .collect();
    assert!(
        listed.contains(&("get_current_time", ToolState::Offered)),
        "{listed:?}"
    );
    assert!(
        listed.contains(&("convert_time", ToolState::Untiered)),
        "{listed:?}"
    );

    let id = f.new_session().await;
    let mut turn = f.turn(&id, "what time is it?", "terminal").await;
    let events = drain(&mut turn).await;
    assert_eq!(ended_text(&events), "done");
    assert!(events.iter().any(
        |e| matches!(&e.kind, EventKind::ToolCall(c) if c.tool == "mcp__time__get_current_time")
    ));
    let requests = f.model.requests();
    let result = requests[1]
        .messages
        .iter()
        .flat_map(|m| m.tool_results())
        .next()
        .unwrap()
        .clone();
    let ToolResultContent::Text(text) = &result.content[0] else {
        panic!("{result:?}")
    };
    assert!(text.contains("Europe/Istanbul"), "{text}");
    assert!(text.contains("datetime"), "{text}");
    f.core.shutdown().await;
}
