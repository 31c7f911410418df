//! The tracing spans of a hub turn: with the file log in JSON lines, the turn, its model calls and
//! its tool calls each leave a line carrying `tau.session_id`, `tau.channel`, `tau.profile` and the
//! turn's id (a tool call also its tool's name).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};
use support::hub::*;
use tau_api::logging::{LogFormat, scoped_logging_as};
use taud::testing::FakeReply;

/// The JSON lines of the log file whose own span is `name`.
fn lines_of_span(lines: &[Value], name: &str) -> Vec<Value> {
    lines
        .iter()
        .filter(|line| line["span"]["name"] == name)
        .cloned()
        .collect()
}

#[tokio::test]
async fn turn_model_and_tool_spans_carry_the_session_in_json_lines() {
    let logs = crate::support::temp::dir();
    // A current-thread runtime: every task of the turn logs on this thread's scoped subscriber.
    let logging = scoped_logging_as(Some(logs.path()), false, false, LogFormat::Json).unwrap();
    let f = fixture(
        "file",
        vec![
            FakeReply::tool_call("current_time", json!({})),
            FakeReply::text("noon"),
        ],
    )
    .await;
    let id = f.new_session().await;
    let mut turn = f.turn(&id, "what time is it?", "telegram").await;
    let turn_id = turn.accepted().turn_id.clone();
    drain(&mut turn).await;
    f.core.shutdown().await;
    let path = logging.log_file().unwrap().to_path_buf();
    drop(logging);

    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let check = |span: &Value| {
        assert_eq!(span["tau.session_id"], id.as_str(), "{span}");
        assert_eq!(span["tau.channel"], "telegram", "{span}");
        assert_eq!(span["tau.profile"], "home", "{span}");
        assert_eq!(span["turn_id"], turn_id.as_str(), "{span}");
    };
    let turns = lines_of_span(&lines, "turn");
    assert!(!turns.is_empty(), "{text}");
    turns.iter().for_each(|line| check(&line["span"]));

    let calls = lines_of_span(&lines, "model_call");
    assert_eq!(calls.len(), 2, "one close line per model call: {text}");
    for (n, line) in calls.iter().enumerate() {
        check(&line["span"]);
        assert_eq!(line["span"]["call"], n + 1, "{line}");
        assert_eq!(line["span"]["model"], "fake", "{line}");
        assert_eq!(line["spans"][0]["name"], "turn", "{line}");
    }

    let tools = lines_of_span(&lines, "tool_call");
    assert_eq!(tools.len(), 1, "{text}");
    check(&tools[0]["span"]);
    assert_eq!(tools[0]["span"]["tool"], "current_time", "{tools:?}");
    assert!(!tools[0]["span"]["tool_use_id"].as_str().unwrap().is_empty());
}
