//! `tau ask` through the real `tau` and `taud` binaries: no hub (exit 69 with a hint), a reply on
//! stdout, `--json` events, output nobody reads (`| head -1`), a tier-2 call rejected without
//! `--approve`, `--session` continuing a session, and an unknown session.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output, Stdio};

use tau_e2e::chat::ChatSandbox;
use tau_e2e::{RunningHub, Sandbox};

fn free_port() -> u16 {
    tau_e2e::free_port().unwrap()
}

fn start_hub(sandbox: &Sandbox, port: u16) -> RunningHub {
    sandbox.start_hub(port).unwrap()
}

/// `tau ask ARGS` against the hub on `port`, nothing on stdin.
fn ask_command(sandbox: &Sandbox, port: u16, args: &[&str]) -> Command {
    let mut command = sandbox.command("tau").unwrap();
    command
        .env("TAU_HUB_PORT", port.to_string())
        .arg("ask")
        .args(args)
        .stdin(Stdio::null());
    command
}

fn ask(sandbox: &Sandbox, port: u16, args: &[&str]) -> Output {
    ask_command(sandbox, port, args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tau ask ARGS` with its stdout a pipe whose reader has gone (`tau ask … | head -1`).
fn ask_unread(sandbox: &Sandbox, port: u16, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    ask_command(sandbox, port, args)
        .stdout(writer)
        .output()
        .unwrap()
}

#[test]
fn without_a_hub_it_starts_nothing_and_says_how_to() {
    let sandbox = Sandbox::new().unwrap();
    let out = ask(&sandbox, free_port(), &["hello"]);
    assert_eq!(out.status.code(), Some(69), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("tau hub start"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    assert!(
        !sandbox.data_dir().join("hub/taud.sock").exists(),
        "no hub was started"
    );
}

#[test]
fn a_reply_on_stdout_and_events_as_json_lines() {
    let chat = ChatSandbox::new().unwrap();
    let (sandbox, port) = (&chat.sandbox, chat.port);
    let _hub = start_hub(sandbox, port);

    let out = ask(sandbox, port, &["hello", "there"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let reply = text(&out.stdout);
    assert!(reply.contains("You said: \"hello there\""), "{reply}");
    assert_eq!(reply.lines().count(), 1, "only the reply: {reply}");

    let out = ask(sandbox, port, &["--json", "what time is it"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "accepted");
    let session = lines[0]["session_id"].as_str().unwrap().to_owned();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"tool_call"), "{types:?}");
    assert_eq!(*types.last().unwrap(), "turn_ended");
    let call = lines.iter().find(|l| l["type"] == "tool_call").unwrap();
    assert_eq!(
        (call["tool"].as_str(), call["status"].as_str()),
        (Some("current_time"), Some("success"))
    );
    let seqs: Vec<u64> = lines[1..]
        .iter()
        .map(|l| l["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");

    // Nobody reads the output any more: the ask ends quietly, with success.
    for args in [&["--json", "hello"][..], &["hello"]] {
        let out = ask_unread(sandbox, port, args);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }

    // --session continues that session.
    let out = ask(
        sandbox,
        port,
        &["--json", "--session", &session, "hello again"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let first: serde_json::Value =
        serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(first["session_id"], session.as_str());
    // Through the API: the file store may still hold the newest messages in its journal.
    let stored = chat.session(&session).unwrap();
    assert_eq!(
        stored.messages.len(),
        6,
        "4 messages of the tool turn, 2 of the second"
    );
    let summary = stored.session.unwrap();
    assert_eq!(
        (summary.title.as_str(), summary.channel.as_str()),
        ("what time is it", "cli"),
        "the session `tau ask` made is titled from its first text"
    );

    let out = ask(sandbox, port, &["--session", "20990101-000000-beef", "hi"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not found"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_tier_2_call_is_rejected_without_approve() {
    let sandbox = Sandbox::new().unwrap();
    let port = free_port();
    let _hub = start_hub(&sandbox, port);
    let out = ask(&sandbox, port, &["--json", "turn on the lamp"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("✗ demo_physical_action: not approved"),
        "{}",
        text(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let resolved = lines
        .iter()
        .find(|l| l["type"] == "approval_resolved")
        .unwrap();
    assert_eq!(resolved["resolution"], "rejected");
    assert_eq!(resolved["decided_by_channel"], "cli");
    let call = lines.iter().find(|l| l["type"] == "tool_call").unwrap();
    assert_eq!(
        (call["status"].as_str(), call["approval"].as_str()),
        (Some("refused"), Some("rejected"))
    );
}

/// Runs `tau ask --approve …` on a pseudo-terminal and types `answer` once the prompt is shown
/// (input typed before the prompt never answers it). Returns what the terminal showed and whether
/// `tau ask` exited 0.
fn ask_on_a_terminal(sandbox: &Sandbox, port: u16, answer: &str) -> (String, bool) {
    let mut command = sandbox.command("tau").unwrap();
    command
        .env("TAU_HUB_PORT", port.to_string())
        .args(["ask", "--approve", "turn on the lamp"]);
    let mut session = rexpect::session::spawn_command(command, Some(20_000)).unwrap();
    let mut shown = session.exp_string("Approve? [y/N]").unwrap();
    session.send_line(answer).unwrap();
    shown.push_str(&session.exp_eof().unwrap());
    let status = session.process_mut().wait().unwrap();
    let success = matches!(status, rexpect::process::WaitStatus::Exited(_, 0));
    (shown, success)
}

fn stored_tool_calls(chat: &ChatSandbox) -> Vec<serde_json::Value> {
    // Through the API: the file store may still hold the newest events in its journal.
    let sessions = chat
        .with_client(async |client| {
            Ok(client
                .list_sessions(tau_api::proto::v1::ListSessionsRequest::default())
                .await?
                .into_inner()
                .sessions)
        })
        .unwrap();
    let mut calls = Vec::new();
    for session in sessions {
        calls.extend(
            chat.events(&session.session_id)
                .unwrap()
                .into_iter()
                .filter(|e| e.r#type == "tool_call")
                .map(|e| serde_json::from_str::<serde_json::Value>(&e.json).unwrap()),
        );
    }
    calls
}

#[test]
fn approve_asks_on_the_terminal_and_only_yes_approves() {
    for (answer, approval) in [("y", "approved"), ("nope", "rejected")] {
        let chat = ChatSandbox::new().unwrap();
        let _hub = start_hub(&chat.sandbox, chat.port);
        let (shown, success) = ask_on_a_terminal(&chat.sandbox, chat.port, answer);
        assert!(success, "{shown}");
        assert!(shown.contains("Approval needed (tier 2)"), "{shown}");
        assert!(
            shown.contains(r#"Arguments: {"action": "turn on the lamp"}"#),
            "{shown}"
        );
        let calls = stored_tool_calls(&chat);
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(calls[0]["approval"], approval, "{answer}: {shown}");
    }
}
