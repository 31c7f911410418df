//! MCP tools through the hub core, exactly like built-in tools: a tier-0 call runs and its result
//! reaches the model with a `tool_call` event; a tier-2 call asks with the owner's effect sentence
//! and the exact arguments, and runs only when approved; an untiered tool is never offered; a
//! server that becomes ready after a session opened is offered from the next turn; shutting the
//! core down stops every server; an MCP image reaches the model as an image block; servers whose
//! tools would share a name are refused at start, naming both; a name always reaches the same tool,
//! whatever else is listed and whichever server is up.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use support::hub::{drain, ended_text, fixture_with, next_event, next_turn_event, options, setup};
use support::mcp::{fake_spec, wait_gone};
use taud::gate::ToolCallStatus;
use taud::hub::{ApprovalAnswer, EventKind, HubCore, SessionEvent};
use taud::mcp::Phase;
use taud::message::{ImageBlock, ToolResultContent, ToolResultStatus};
use taud::testing::FakeReply;
use taud::tool::Tier;

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

/// The progress events of a turn: (tool, message, progress).
fn progress_events(events: &[Arc<SessionEvent>]) -> Vec<(String, String, Option<f64>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolProgress { tool, progress, .. } => {
                Some((tool.clone(), progress.message.clone(), progress.progress))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_mcp_calls_progress_reaches_subscribers_in_order_rate_limited_and_unstored() {
    let mut opts = options();
    opts.mcp_servers = vec![fake_spec("fake", &[])];
    let f = fixture_with(
        "file",
        vec![
            // A report every 10 ms for 1.2 s: about 120 reports.
            FakeReply::tool_call(
                "mcp__fake__progress",
                json!({"seconds": 1.2, "every": 0.01}),
            ),
            FakeReply::text("done"),
        ],
        opts,
    )
    .await;
    wait_ready(&f.core).await;
    let id = f.new_session().await;
    let mut watcher = f.core.subscribe(&id, None, "api").await.unwrap();
    let mut turn = f.turn(&id, "work", "terminal").await;
    let events = drain(&mut turn).await;
    assert_eq!(ended_text(&events), "done");

    let progress = progress_events(&events);
    assert!(!progress.is_empty(), "{:?}", support::hub::names(&events));
    assert!(
        progress.iter().all(|(tool, message, step)| {
            tool == "mcp__fake__progress"
                && Some(message.as_str()) == step.map(|s| format!("step {s}")).as_deref()
        }),
        "{progress:?}"
    );
    let steps: Vec<f64> = progress.iter().filter_map(|p| p.2).collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    // Rate-limited: about 120 reports in 1.2 s become at most one event per 250 ms.
    let bound = (1200 / taud::agent::PROGRESS_INTERVAL.as_millis()) as usize + 2;
    assert!(
        progress.len() <= bound,
        "{} events: {progress:?}",
        progress.len()
    );
    // Every progress event comes after the call started and before its result.
    let names = support::hub::names(&events);
    let first = names.iter().position(|n| *n == "tool_progress").unwrap();
    let last = names.iter().rposition(|n| *n == "tool_progress").unwrap();
    let started = names.iter().position(|n| *n == "tool_use_started").unwrap();
    let result = names.iter().position(|n| *n == "tool_call").unwrap();
    assert!(started < first && last < result, "{names:?}");

    // A Subscribe stream sees the same events, in the same order.
    let mut subscribed = Vec::new();
    loop {
        let event = next_event(&mut watcher).await;
        let ended = matches!(event.kind, EventKind::TurnEnded(_));
        subscribed.push(event);
        if ended {
            break;
        }
    }
    let turn_seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let seen: Vec<u64> = subscribed
        .iter()
        .map(|e| e.seq)
        .filter(|s| turn_seqs.contains(s))
        .collect();
    assert_eq!(seen, turn_seqs);
    assert_eq!(progress_events(&subscribed), progress);

    // Progress is live only: the session's stored events hold none of it.
    let stored = serde_json::to_string(&f.core.read_events(&id).await.unwrap()).unwrap();
    assert!(stored.contains("tool_call"), "{stored}");
    assert!(!stored.contains("step 1"), "{stored}");
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
    let dir = crate::support::temp::dir();
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
            .await
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

#[tokio::test]
async fn servers_whose_tools_would_share_a_name_are_refused_at_start() {
    // `a` offering `__b` and `a_` offering `_b` were both `mcp__a____b`: the catalog kept
    // whichever was up first, so an approval for one could fire the other.
    let mut opts = options();
    opts.mcp_servers = vec![
        fake_spec("a", &["--tool", "__b"]).tool("__b", Tier::Physical, Some("Opens the safe.")),
        fake_spec("a_", &["--tool", "_b"]).tool("_b", Tier::Physical, Some("Feeds the cat.")),
    ];
    let dir = crate::support::temp::dir();
    let model = Arc::new(taud::testing::FakeModel::scripted(vec![]));
    let err = setup(dir.path(), "file", &model, opts)
        .start()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "MCP server 'a' tool '__b' and MCP server 'a_' tool '_b' would both reach the model as 'mcp__a____b' (names that differ only in '-' versus '_' count as one): rename a server or tier only one of them"
    );
}

/// The MCP tools the hub offers, by name.
fn offered(core: &HubCore) -> Vec<String> {
    let tools = core.tools();
    tools
        .into_iter()
        .filter(|t| t.server.is_some() && t.state == "ready")
        .map(|t| t.name)
        .collect()
}

#[tokio::test]
async fn a_name_reaches_the_same_tool_after_another_tool_appears() {
    // `a.b` was offered as `mcp__s__a_b` while alone, and under a hashed name once `a_b`
    // appeared, which then took `mcp__s__a_b`: a call approved for one fired the other.
    let dir = crate::support::temp::dir();
    let calls = dir.path().join("calls");
    let args = [
        "--tool",
        "a.b",
        "--later",
        "a_b",
        "--calls",
        calls.to_str().unwrap(),
    ];
    let hashed = "mcp__s__a_b_407e8e5c";
    let mut opts = options();
    opts.mcp_servers =
        vec![
            fake_spec("s", &args)
                .tool("a.b", Tier::Read, None)
                .tool("a_b", Tier::Read, None),
        ];
    let replies = vec![
        FakeReply::tool_call(hashed, json!({})),
        FakeReply::tool_call("mcp__s__add_tool", json!({})),
        FakeReply::text("one"),
        FakeReply::tool_call("mcp__s__a_b", json!({})),
        FakeReply::tool_call(hashed, json!({})),
        FakeReply::text("two"),
    ];
    let f = fixture_with("file", replies, opts).await;
    wait_ready(&f.core).await;
    let names = offered(&f.core);
    assert!(names.iter().any(|n| n == hashed), "{names:?}");
    assert!(!names.iter().any(|n| n == "mcp__s__a_b"), "{names:?}");
    let listed = f.core.mcp().status()[0].generation;

    let id = f.new_session().await;
    let mut turn = f.turn(&id, "one", "terminal").await;
    assert_eq!(ended_text(&drain(&mut turn).await), "one");
    let deadline = tokio::time::Instant::now() + support::mcp::DEADLINE;
    while f.core.mcp().status()[0].generation == listed {
        assert!(tokio::time::Instant::now() < deadline, "no new listing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let names = offered(&f.core);
    assert!(names.iter().any(|n| n == hashed), "{names:?}");
    assert!(names.iter().any(|n| n == "mcp__s__a_b"), "{names:?}");
    let mut turn = f.turn(&id, "two", "terminal").await;
    let events = drain(&mut turn).await;
    assert_eq!(ended_text(&events), "two");
    let statuses: Vec<ToolCallStatus> = tool_calls(&events).iter().map(|c| c.1).collect();
    assert_eq!(statuses, vec![ToolCallStatus::Success; 2]);
    let called: Vec<String> = support::mcp::log_lines(&calls)
        .iter()
        .map(|l| l["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(called, vec!["a.b", "add_tool", "a_b", "a.b"]);
    f.core.shutdown().await;
}

#[tokio::test]
async fn a_name_another_server_owns_is_refused_even_while_that_server_is_down() {
    // `a` offering `__b` and `a_` offering `_b` were both `mcp__a____b`: with `a` down, an
    // approval for "opens the safe" fired `a_`'s "feeds the cat". The hub refuses such specs at
    // start (above); a manager given them anyway keeps the name `a`'s, whoever is up.
    let mut a = fake_spec("a", &[]).tool("__b", Tier::Physical, Some("Opens the safe."));
    a.command = "/nonexistent/mcp-server".into();
    // It also lists `read_state` twice: the second listing is refused, the first kept.
    let a_ = fake_spec("a_", &["--tool", "_b", "--tool", "read_state"]).tool(
        "_b",
        Tier::Physical,
        Some("Feeds the cat."),
    );
    let manager = taud::mcp::McpManager::new(vec![a, a_]);
    manager.start();
    support::mcp::wait_for(&manager, 0, "a failed start", |s| s.error.is_some()).await;
    let status = support::mcp::ready(&manager, 1).await;
    let names: Vec<String> = manager
        .tools()
        .iter()
        .map(|t| t.spec().name.clone())
        .collect();
    assert!(!names.iter().any(|n| n == "mcp__a____b"), "{names:?}");
    assert!(
        names.iter().any(|n| n == "mcp__a___read_state"),
        "{names:?}"
    );
    let refused = status.tools.iter().find(|t| t.tool == "_b").unwrap();
    assert_eq!(refused.state, taud::mcp::ToolState::Refused);
    assert_eq!(refused.name, "mcp__a____b");
    assert_eq!(
        refused.warning.as_deref(),
        Some("its name mcp__a____b belongs to MCP server 'a' tool '__b'")
    );
    let twice: Vec<_> = status
        .tools
        .iter()
        .filter(|t| t.tool == "read_state")
        .collect();
    assert_eq!(twice.len(), 2);
    assert_eq!(twice[0].state, taud::mcp::ToolState::Offered);
    assert_eq!(twice[1].state, taud::mcp::ToolState::Refused);
    assert_eq!(
        twice[1].warning.as_deref(),
        Some("the server lists this tool twice; only its first listing is offered")
    );
    let offered_once = names.iter().filter(|n| *n == "mcp__a___read_state").count();
    assert_eq!(offered_once, 1);
    manager.stop(support::mcp::DEADLINE).await;
}
