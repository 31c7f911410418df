//! MCP servers under the hub's supervisor, against the fake server (`fixtures/fake_mcp.py`): only
//! tiered tools are offered, results reach the model capped, a slow, crashing, junk-writing,
//! stderr-flooding or never-answering server stalls nothing, a killed server is restarted, and
//! stopping leaves no process of the group (grandchildren included).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::mcp::*;
use taud::mcp::{McpManager, Phase, RestartLimit, ToolState};
use taud::message::{ImageBlock, ToolResultContent};
use taud::tool::{ProgressReporter, Tier, Tool, ToolContext, ToolError};
use tokio_util::sync::CancellationToken;

fn ctx() -> ToolContext {
    ToolContext {
        tool_use_id: "t".into(),
        session_id: "s".into(),
        channel: "test".into(),
        cancel: CancellationToken::new(),
        progress: Default::default(),
    }
}

fn tool(manager: &McpManager, name: &str) -> Arc<dyn Tool> {
    manager
        .tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("{name} is not offered"))
}

fn text_of(content: &[ToolResultContent]) -> String {
    content.iter().map(ToolResultContent::as_text).collect()
}

#[tokio::test]
async fn only_tiered_tools_are_offered_with_the_owners_tier() {
    let manager = McpManager::new(vec![fake_spec("fake", &[])]);
    manager.start();
    let status = ready(&manager, 0).await;
    let mut offered: Vec<(String, Tier, String)> = manager
        .tools()
        .iter()
        .map(|t| {
            let spec = t.spec();
            (
                spec.name.clone(),
                spec.tier().unwrap(),
                t.distribution().to_owned(),
            )
        })
        .collect();
    offered.sort();
    let names: Vec<&str> = offered.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "mcp__fake__add_tool",
            "mcp__fake__big",
            "mcp__fake__bump",
            "mcp__fake__crash",
            "mcp__fake__fail",
            "mcp__fake__image",
            "mcp__fake__lamp",
            "mcp__fake__notify_changes",
            "mcp__fake__progress",
            "mcp__fake__read_state",
            "mcp__fake__slow",
            "mcp__fake__wipe",
            "mcp__fake__write_note",
        ]
    );
    assert!(offered.iter().all(|(_, _, dist)| dist == "mcp:fake"));
    let lamp = tool(&manager, "mcp__fake__lamp");
    assert_eq!(lamp.spec().tier(), Some(Tier::Physical));
    assert_eq!(lamp.spec().effect(), "Switches the test lamp on or off.");
    // The server says read-only for read_state and destructive for lamp: neither changes a tier.
    assert_eq!(
        tool(&manager, "mcp__fake__read_state").spec().tier(),
        Some(Tier::Read)
    );
    assert_eq!(
        tool(&manager, "mcp__fake__write_note").spec().tier(),
        Some(Tier::DigitalWrite)
    );

    let by_tool = |name: &str| {
        status
            .tools
            .iter()
            .find(|t| t.tool == name)
            .unwrap()
            .clone()
    };
    assert_eq!(by_tool("untiered_tool").state, ToolState::Untiered);
    assert_eq!(by_tool("untiered_tool").tier, None);
    assert_eq!(by_tool("ghost").state, ToolState::Missing);
    // A tool that is not offered is still shown under the name the model would see.
    assert_eq!(by_tool("ghost").name, "mcp__fake__ghost");
    assert_eq!(by_tool("untiered_tool").name, "mcp__fake__untiered_tool");
    assert_eq!(by_tool("lamp").state, ToolState::Offered);
    assert!(by_tool("lamp").warning.is_none());
    assert!(
        by_tool("wipe")
            .warning
            .as_deref()
            .unwrap()
            .contains("destructive"),
        "a destructive tool at tier 0 is flagged"
    );
    assert!(by_tool("read_state").warning.is_none());
    assert!(status.pid.is_some());
    manager.stop(DEADLINE).await;
    assert_eq!(manager.status()[0].state, Phase::Stopped);
    assert!(manager.tools().is_empty());
}

#[tokio::test]
async fn results_reach_the_model_capped_and_is_error_is_a_failure() {
    let manager = McpManager::new(vec![fake_spec("fake", &[])]);
    manager.start();
    ready(&manager, 0).await;
    let out = tool(&manager, "mcp__fake__read_state")
        .call(json!({"text": "exact \"args\""}), ctx())
        .await
        .unwrap();
    assert_eq!(
        text_of(&out.content),
        "read_state ok: {\"text\": \"exact \\\"args\\\"\"}"
    );
    let image = tool(&manager, "mcp__fake__image")
        .call(json!({}), ctx())
        .await
        .unwrap();
    assert_eq!(
        image.content,
        vec![ToolResultContent::Image(
            ImageBlock::from_base64("image/png", "iVBORw0KGgo=").unwrap()
        )],
        "an MCP image reaches the model as an image block, not JSON text"
    );
    let failed = tool(&manager, "mcp__fake__fail")
        .call(json!({}), ctx())
        .await
        .unwrap_err();
    assert_eq!(failed, ToolError::Failed("the lamp is unplugged".into()));
    let big = tool(&manager, "mcp__fake__big")
        .call(json!({"bytes": 2_000_000}), ctx())
        .await
        .unwrap();
    let text = text_of(&big.content);
    assert_eq!(text.len(), taud::mcp::MAX_RESULT_BYTES);
    assert!(text.ends_with("larger than 256 KiB]"));
    let refused = tool(&manager, "mcp__fake__read_state")
        .call(json!([1, 2]), ctx())
        .await
        .unwrap_err();
    assert!(matches!(refused, ToolError::InvalidInput(_)), "{refused:?}");
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn a_slow_tool_times_out_as_outcome_unknown_and_stalls_nothing() {
    let mut spec = fake_spec("fake", &[]);
    spec.call_timeout = Duration::from_millis(700);
    let manager = McpManager::new(vec![spec]);
    manager.start();
    ready(&manager, 0).await;
    let slow = tool(&manager, "mcp__fake__slow");
    let started = Instant::now();
    let call = tokio::spawn(async move { slow.call(json!({"seconds": 30}), ctx()).await });
    // Meanwhile another call on the same server answers.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let quick = tool(&manager, "mcp__fake__read_state")
        .call(json!({}), ctx())
        .await;
    assert!(quick.is_ok(), "{quick:?}");
    let err = call.await.unwrap().unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    let ToolError::Failed(text) = err else {
        panic!("{err:?}")
    };
    assert!(text.starts_with("outcome unknown:"), "{text}");
    assert!(text.contains("not retried"), "{text}");
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn progress_keeps_a_call_alive_past_its_idle_timeout_but_not_past_the_cap() {
    let dir = crate::support::temp::dir();
    let log = dir.path().join("log");
    let mut spec = fake_spec("fake", &["--log", log.to_str().unwrap()]);
    spec.call_timeout = Duration::from_millis(600);
    spec.call_max = Duration::from_secs(3);
    let manager = McpManager::new(vec![spec]);
    manager.start();
    ready(&manager, 0).await;
    let progress = tool(&manager, "mcp__fake__progress");
    // Progress every 150 ms for 1.5 s: more than twice the idle timeout, well inside the cap.
    let out = progress
        .call(json!({"seconds": 1.5, "every": 0.15}), ctx())
        .await
        .unwrap();
    assert!(
        text_of(&out.content).starts_with("finished after"),
        "{out:?}"
    );
    // Progress for 30 s: the cap ends it, as outcome unknown, and the server is told.
    let started = Instant::now();
    let err = progress
        .call(json!({"seconds": 30, "every": 0.15}), ctx())
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(2900) && elapsed < Duration::from_secs(8),
        "{elapsed:?}"
    );
    let ToolError::Failed(text) = err else {
        panic!("{err:?}")
    };
    assert!(text.starts_with("outcome unknown:"), "{text}");
    assert!(text.contains("3 s limit"), "{text}");
    assert!(text.contains("not retried"), "{text}");
    wait_log(&log, "the cancel of the capped call", |l| {
        l["reason"] == "maximum total timeout exceeded"
    })
    .await;
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn a_servers_progress_notifications_reach_the_calls_reporter() {
    let manager = McpManager::new(vec![fake_spec("fake", &[])]);
    manager.start();
    ready(&manager, 0).await;
    let progress = tool(&manager, "mcp__fake__progress");
    let (reporter, mut watch) = ProgressReporter::channel();
    let mut context = ctx();
    context.progress = reporter;
    let call = tokio::spawn(async move {
        progress
            .call(json!({"seconds": 1.0, "every": 0.1}), context)
            .await
    });
    let mut seen = Vec::new();
    while let Ok(Some(report)) = tokio::time::timeout(DEADLINE, watch.next()).await {
        seen.push(report);
    }
    let out = call.await.unwrap().unwrap();
    assert!(
        text_of(&out.content).starts_with("finished after"),
        "{out:?}"
    );
    assert!(!seen.is_empty(), "no progress reached the reporter");
    for report in &seen {
        let step = report.progress.unwrap();
        assert_eq!(report.message, format!("step {step}"), "{seen:?}");
    }
    let steps: Vec<f64> = seen.iter().filter_map(|r| r.progress).collect();
    assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn an_interrupted_call_is_cancelled_at_the_server() {
    let dir = crate::support::temp::dir();
    let log = dir.path().join("log");
    let manager = McpManager::new(vec![fake_spec("fake", &["--log", log.to_str().unwrap()])]);
    manager.start();
    ready(&manager, 0).await;
    let progress = tool(&manager, "mcp__fake__progress");
    let context = ctx();
    let cancel = context.cancel.clone();
    let call = tokio::spawn(async move { progress.call(json!({"seconds": 30}), context).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    cancel.cancel();
    assert_eq!(call.await.unwrap().unwrap_err(), ToolError::Cancelled);
    wait_log(&log, "the cancel of the interrupted call", |l| {
        l["reason"] == "request abandoned by the caller"
    })
    .await;
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn a_crash_mid_call_is_outcome_unknown_and_the_server_comes_back() {
    let manager = McpManager::new(vec![fake_spec("fake", &[])]);
    manager.start();
    let first = ready(&manager, 0).await;
    let err = tool(&manager, "mcp__fake__crash")
        .call(json!({}), ctx())
        .await
        .unwrap_err();
    let ToolError::Failed(text) = err else {
        panic!("{err:?}")
    };
    assert!(text.starts_with("outcome unknown:"), "{text}");
    let status = wait_for(&manager, 0, "a restart", |s| {
        s.restarts >= 1 && s.state == Phase::Ready
    })
    .await;
    assert_ne!(status.pid, first.pid);
    assert!(
        tool(&manager, "mcp__fake__read_state")
            .call(json!({}), ctx())
            .await
            .is_ok()
    );
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn a_server_killed_from_outside_is_restarted() {
    let manager = McpManager::new(vec![fake_spec("fake", &[])]);
    manager.start();
    let first = ready(&manager, 0).await;
    let pid = first.pid.unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = wait_for(&manager, 0, "a restart", |s| {
        s.restarts >= 1 && s.state == Phase::Ready && s.pid != Some(pid)
    })
    .await;
    assert!(status.error.is_none());
    assert!(
        tool(&manager, "mcp__fake__read_state")
            .call(json!({}), ctx())
            .await
            .is_ok()
    );
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn a_server_that_keeps_dying_is_given_up_on_and_the_others_keep_running() {
    let mut dying = fake_spec("dying", &["--die-after", "0.5"]);
    dying.restart_limit = RestartLimit {
        restarts: 3,
        window: Duration::from_secs(60),
    };
    let manager = McpManager::new(vec![dying, fake_spec("fine", &[])]);
    manager.start();
    ready(&manager, 1).await;
    let status = wait_for(&manager, 0, "giving up", |s| s.state == Phase::GaveUp).await;
    assert_eq!((status.restarts, status.pid), (3, None));
    let error = status.error.unwrap();
    assert!(
        error.starts_with("gave up after 3 restarts within 60 s"),
        "{error}"
    );
    assert!(error.contains("fake mcp server started"), "{error}");
    assert!(
        manager
            .tools()
            .iter()
            .all(|t| t.distribution() != "mcp:dying")
    );
    let json = taud::mcp::status_json(&manager);
    assert_eq!(json["mcp"]["servers"][0]["state"], "gave_up");
    // It is not started again; the other server is unaffected.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = &manager.status()[0];
    assert_eq!((status.state, status.restarts), (Phase::GaveUp, 3));
    assert_eq!(manager.status()[1].state, Phase::Ready);
    assert!(
        tool(&manager, "mcp__fine__read_state")
            .call(json!({}), ctx())
            .await
            .is_ok()
    );
    manager.stop(DEADLINE).await;
    assert_eq!(manager.status()[0].state, Phase::GaveUp);
}

#[tokio::test]
async fn junk_on_stdout_and_a_stderr_flood_do_not_break_the_session() {
    let manager = McpManager::new(vec![
        fake_spec("junk", &["--junk"]),
        fake_spec("flood", &["--flood"]),
    ]);
    manager.start();
    ready(&manager, 0).await;
    ready(&manager, 1).await;
    for name in ["mcp__junk__read_state", "mcp__flood__read_state"] {
        for _ in 0..5 {
            let out = tool(&manager, name).call(json!({}), ctx()).await;
            assert!(out.is_ok(), "{name}: {out:?}");
        }
    }
    let flood = &manager.status()[1];
    assert!(!flood.stderr_tail.is_empty());
    assert!(flood.stderr_tail.len() <= 40);
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn a_server_that_never_answers_fails_its_start_without_stalling_the_others() {
    let mut hanging = fake_spec("hang", &["--hang-init"]);
    // Long enough for python to start and say so on stderr, even on a busy machine.
    hanging.startup_timeout = Duration::from_secs(2);
    let manager = McpManager::new(vec![hanging, fake_spec("fine", &[])]);
    let started = Instant::now();
    manager.start();
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "start does not wait"
    );
    ready(&manager, 1).await;
    let status = wait_for(&manager, 0, "a failed start", |s| s.restarts >= 1).await;
    let error = status.error.unwrap();
    assert!(error.contains("handshake timed out"), "{error}");
    assert!(
        error.contains("fake mcp server started"),
        "the stderr tail is attached: {error}"
    );
    assert!(
        tool(&manager, "mcp__fine__read_state")
            .call(json!({}), ctx())
            .await
            .is_ok()
    );
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn a_missing_command_is_reported() {
    let mut spec = fake_spec("nope", &[]);
    spec.command = "/nonexistent/mcp-server".into();
    let manager = McpManager::new(vec![spec]);
    manager.start();
    let status = wait_for(&manager, 0, "a failed start", |s| s.error.is_some()).await;
    assert!(status.error.unwrap().contains("command not found"));
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn stopping_kills_the_whole_group_grandchildren_included() {
    let dir = crate::support::temp::dir();
    let pidfile = dir.path().join("grandchild.pid");
    let manager = McpManager::new(vec![fake_spec(
        "fake",
        &["--grandchild", pidfile.to_str().unwrap()],
    )]);
    manager.start();
    let status = ready(&manager, 0).await;
    let server = status.pid.unwrap();
    let grandchild: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!gone(grandchild));
    manager.stop(DEADLINE).await;
    wait_gone(server).await;
    wait_gone(grandchild).await;
}

#[tokio::test]
async fn list_changed_replaces_the_tools() {
    let manager = McpManager::new(vec![fake_spec("fake", &[])]);
    manager.start();
    let before = ready(&manager, 0).await;
    assert!(
        manager
            .tools()
            .iter()
            .all(|t| t.spec().name != "mcp__fake__extra")
    );
    tool(&manager, "mcp__fake__add_tool")
        .call(json!({}), ctx())
        .await
        .unwrap();
    wait_for(&manager, 0, "a new listing", |s| {
        s.generation > before.generation
    })
    .await;
    let extra = tool(&manager, "mcp__fake__extra");
    assert_eq!(extra.spec().tier(), Some(Tier::Read));
    let out = extra.call(json!({}), ctx()).await.unwrap();
    assert_eq!(text_of(&out.content), "extra ok: {}");
    let _: Value = json!(null);
    manager.stop(DEADLINE).await;
}

/// How many `tools/list` the fake server was asked.
fn listings(log: &std::path::Path) -> usize {
    log_lines(log)
        .iter()
        .filter(|l| l.get("list").is_some())
        .count()
}

#[tokio::test]
async fn several_list_changed_at_once_cause_one_listing() {
    let dir = crate::support::temp::dir();
    let log = dir.path().join("log");
    let manager = McpManager::new(vec![fake_spec("fake", &["--log", log.to_str().unwrap()])]);
    manager.start();
    let before = ready(&manager, 0).await;
    assert_eq!(listings(&log), 1);
    tool(&manager, "mcp__fake__notify_changes")
        .call(json!({"times": 5}), ctx())
        .await
        .unwrap();
    wait_for(&manager, 0, "a new listing", |s| {
        s.generation > before.generation
    })
    .await;
    // Long past the debounce window: still one listing for the five notifications.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(listings(&log), 2, "{:?}", log_lines(&log));
    assert_eq!(manager.status()[0].generation, before.generation + 1);
    manager.stop(DEADLINE).await;
}

#[tokio::test]
async fn an_older_listing_answered_late_never_replaces_a_newer_one() {
    let dir = crate::support::temp::dir();
    let log = dir.path().join("log");
    let manager = McpManager::new(vec![fake_spec("fake", &["--log", log.to_str().unwrap()])]);
    manager.start();
    ready(&manager, 0).await;
    let bump = tool(&manager, "mcp__fake__bump");
    let listed = |version: &str| manager.status()[0].tools.iter().any(|t| t.tool == version);
    // v1 arrives, but the listing that would show it answers 4 s late.
    bump.call(json!({"slow_list": 4}), ctx()).await.unwrap();
    wait_log(&log, "the slow listing asked", |l| l["list"] == 2).await;
    // Meanwhile v2 arrives and its listing answers at once: it applies without waiting.
    let asked = Instant::now();
    bump.call(json!({}), ctx()).await.unwrap();
    wait_for(&manager, 0, "v2 listed", |_| listed("v2")).await;
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    let generation = manager.status()[0].generation;
    // The slow listing (v1) answers after it and is dropped.
    wait_log(&log, "the slow listing answered", |l| l["answered"] == 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        listed("v2") && !listed("v1"),
        "{:?}",
        manager.status()[0].tools
    );
    assert_eq!(manager.status()[0].generation, generation);
    manager.stop(DEADLINE).await;
}
