//! Routines end to end: the real `taud` with the offline fake model and the real `tau chat` on a
//! pseudo-terminal. The model proposes a tier-2 routine with `schedule_routine`, the person approves
//! it once in `tau chat`, the hub fires it with no prompt, and `tau routine log`/`list` and the
//! routine session's events show the exempt firing. `tau routine add` of the same action asks its own
//! person on its terminal: `n` stores nothing, `y` stores it; a new schedule without a terminal is
//! refused; `tau routine run` is asked every time and recorded `approved`. A prompt routine's
//! question waits for the owner in `tau approvals`, and `tau approvals decide` answers it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rexpect::session::PtySession;
use serde_json::Value;
use tau_e2e::chat::{ChatSandbox, wait_until};

fn see(chat: &mut PtySession, text: &str) -> anyhow::Result<String> {
    let bytes: String = text.bytes().map(char::from).collect();
    Ok(chat.exp_string(&bytes)?)
}

/// `seconds` from now as RFC 3339 UTC (days to a civil date, Howard Hinnant's algorithm).
fn rfc3339_in(seconds: u64) -> String {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + seconds;
    let (days, rest) = (i64::try_from(t / 86_400).unwrap(), t % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

fn tau_json(env: &ChatSandbox, args: &[&str]) -> anyhow::Result<Value> {
    let output = env.command("tau")?.args(args).output()?;
    anyhow::ensure!(output.status.success(), "tau {args:?}: {output:?}");
    Ok(serde_json::from_slice(&output.stdout)?)
}

#[test]
fn a_tier_two_routine_approved_once_in_chat_fires_without_a_prompt() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let mut chat = env.chat(&[]).unwrap();
    see(&mut chat, "is ready").unwrap();
    let at = rfc3339_in(4);
    chat.send_line(&format!(
        r#"call schedule_routine {{"name": "lamp-off", "at": "{at}", "tool": "demo_physical_action", "arguments": {{"action": "desk lamp off"}}}}"#
    ))
    .unwrap();
    // The registration is asked like any tier-2 call, with the routine's name.
    see(&mut chat, "Approval needed (tier 2)").unwrap();
    see(&mut chat, "Tool: demo_physical_action").unwrap();
    see(&mut chat, "Routine \"lamp-off\"").unwrap();
    see(&mut chat, "Approve? [y/N]").unwrap();
    chat.send_line("y").unwrap();
    see(&mut chat, "Routine lamp-off registered").unwrap();

    // The hub fires it at its time, with nobody asked.
    let mut log = Value::Null;
    wait_until(Duration::from_secs(30), "the routine's firing", || {
        log = tau_json(&env, &["routine", "log", "lamp-off", "--json"]).unwrap_or(Value::Null);
        log["firings"][0]["outcome"] == "succeeded"
    })
    .unwrap();
    let firing = &log["firings"][0];
    assert_eq!(firing["cause"], "scheduled", "{log}");
    assert!(
        firing["detail"].as_str().unwrap().contains("(exempt)"),
        "{log}"
    );
    let list = tau_json(&env, &["routine", "list", "--json"]).unwrap();
    let routine = &list["routines"][0];
    assert_eq!(routine["name"], "lamp-off");
    assert_eq!(routine["approval_channel"], "terminal");
    assert_eq!(routine["next_firing"], "", "a one-off has nothing left");

    let events = env.events("routine-lamp-off").unwrap();
    let call = events
        .iter()
        .find(|e| e.r#type == "tool_call")
        .expect("the firing's tool_call in the routine's session");
    assert!(call.json.contains("\"exempt\""), "{}", call.json);
    assert!(call.json.contains("routine-lamp-off-1"), "{}", call.json);
    assert!(
        !events.iter().any(|e| e.r#type == "approval"),
        "no question at the firing"
    );
    chat.send_control('d').unwrap();
}

/// `tau routine add lamp-off … --tool demo_physical_action` on a pseudo-terminal, answered `answer`.
fn add_on_terminal(env: &ChatSandbox, answer: &str) -> PtySession {
    let mut command = env.command("tau").unwrap();
    command.args([
        "routine",
        "add",
        "lamp-off",
        "--cron",
        "0 23 * * *",
        "--tool",
        "demo_physical_action",
        "--args",
        r#"{"action": "desk lamp off"}"#,
    ]);
    let mut add = rexpect::session::spawn_command(command, Some(30_000)).unwrap();
    // The registration question is shown here, like `tau ask --approve` shows one.
    see(&mut add, "Approval needed (tier 2)").unwrap();
    see(&mut add, "Tool: demo_physical_action").unwrap();
    see(&mut add, r#"Arguments: {"action": "desk lamp off"}"#).unwrap();
    see(&mut add, "Routine \"lamp-off\" (cron 0 23 * * *").unwrap();
    see(&mut add, "Approve? [y/N]").unwrap();
    add.send_line(answer).unwrap();
    add
}

#[test]
fn tau_routine_add_asks_its_own_person_and_the_firing_needs_no_prompt() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();

    // Nobody to ask (no terminal, --json): one line saying how, and nothing stored, at once.
    let output = env
        .command("tau")
        .unwrap()
        .args([
            "routine",
            "add",
            "lamp-off",
            "--cron",
            "0 23 * * *",
            "--tool",
            "demo_physical_action",
            "--json",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs your approval"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");

    // Answered n: not stored.
    let mut add = add_on_terminal(&env, "n");
    see(&mut add, "was not").unwrap();
    add.exp_eof().unwrap();
    let list = tau_json(&env, &["routine", "list", "--json"]).unwrap();
    assert_eq!(list["routines"].as_array().unwrap().len(), 0, "{list}");

    // Answered y: stored with its approval, on this command's channel.
    let mut add = add_on_terminal(&env, "y");
    see(&mut add, "added lamp-off").unwrap();
    add.exp_eof().unwrap();
    let list = tau_json(&env, &["routine", "list", "--json"]).unwrap();
    let routine = &list["routines"][0];
    assert_eq!(routine["name"], "lamp-off", "{list}");
    assert_eq!(routine["approval_channel"], "cli", "{list}");
    assert_ne!(routine["approval_id"], "", "{list}");

    // A new schedule with nobody to ask: refused, the routine as it was.
    let output = env
        .command("tau")
        .unwrap()
        .args([
            "routine",
            "add",
            "lamp-off",
            "--every",
            "1m",
            "--tool",
            "demo_physical_action",
            "--args",
            r#"{"action": "desk lamp off"}"#,
            "--replace",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("needs your approval"), "{stderr}");
    let list = tau_json(&env, &["routine", "list", "--json"]).unwrap();
    assert_eq!(list["routines"][0]["schedule"], "cron 0 23 * * *", "{list}");

    // Run now without a terminal: refused in one line, nothing ran.
    let output = env
        .command("tau")
        .unwrap()
        .args(["routine", "run", "lamp-off", "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("was not run"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    let log = tau_json(&env, &["routine", "log", "lamp-off", "--json"]).unwrap();
    assert_eq!(log["firings"].as_array().unwrap().len(), 0, "{log}");

    // Run now on a terminal: asked, approved, run, recorded approved (never exempt).
    let mut command = env.command("tau").unwrap();
    command.args(["routine", "run", "lamp-off"]);
    let mut run = rexpect::session::spawn_command(command, Some(30_000)).unwrap();
    see(&mut run, "Approval needed (tier 2)").unwrap();
    see(&mut run, r#"Arguments: {"action": "desk lamp off"}"#).unwrap();
    see(&mut run, "Approve? [y/N]").unwrap();
    run.send_line("y").unwrap();
    see(&mut run, "(approved)").unwrap();
    run.exp_eof().unwrap();
    let log = tau_json(&env, &["routine", "log", "lamp-off", "--json"]).unwrap();
    let firing = &log["firings"][0];
    assert_eq!(firing["cause"], "manual", "{log}");
    assert_eq!(firing["outcome"], "succeeded", "{log}");
    assert!(
        firing["detail"].as_str().unwrap().contains("(approved)"),
        "{log}"
    );
    assert!(
        !env.events("routine-lamp-off")
            .unwrap_or_default()
            .iter()
            .any(|e| e.json.contains("\"exempt\"")),
        "a manual run is never exempt"
    );
}

#[test]
fn a_prompt_routines_question_waits_in_tau_approvals_and_is_decided_there() {
    let env = ChatSandbox::new().unwrap();
    let _hub = env.start_hub().unwrap();
    let output = env
        .command("tau")
        .unwrap()
        .args([
            "routine",
            "add",
            "lamp",
            "--cron",
            "0 23 * * *",
            "--prompt",
            "switch off the hall lamp",
            "--json",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the owner's prompt routine is not asked: {output:?}"
    );
    let run = tau_json(&env, &["routine", "run", "lamp", "--json"]).unwrap();
    assert_eq!(run["firing"], 1, "{run}");

    // Nobody is attached: the question waits, listed with where it was asked.
    let mut listed = Value::Null;
    wait_until(Duration::from_secs(30), "the routine's question", || {
        listed = tau_json(&env, &["approvals", "--json"]).unwrap_or(Value::Null);
        listed["approvals"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    })
    .unwrap_or_else(|e| {
        let log = tau_json(&env, &["routine", "log", "lamp", "--json"]);
        panic!("{e}: {log:?}")
    });
    let approval = &listed["approvals"][0];
    assert_eq!(approval["tool"], "demo_physical_action", "{listed}");
    assert_eq!(approval["session_id"], "routine-lamp", "{listed}");
    assert_eq!(approval["channel"], "cli", "{listed}");
    assert_eq!(approval["held"], true, "{listed}");
    assert_ne!(approval["deadline"], "", "{listed}");
    let id = approval["approval_id"].as_str().unwrap().to_owned();
    let text = env
        .command("tau")
        .unwrap()
        .args(["approvals"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&id) && text.contains("session routine-lamp on cli"),
        "{text}"
    );

    // Without a terminal `decide` asks nobody.
    let output = env
        .command("tau")
        .unwrap()
        .args(["approvals", "decide", &id])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("terminal"),
        "{output:?}"
    );

    // On a terminal: the card, then y.
    let mut command = env.command("tau").unwrap();
    command.args(["approvals", "decide", &id]);
    let mut decide = rexpect::session::spawn_command(command, Some(30_000)).unwrap();
    see(&mut decide, "session routine-lamp on cli").unwrap();
    see(&mut decide, "Tool: demo_physical_action").unwrap();
    see(
        &mut decide,
        r#"Arguments: {"action": "switch off the hall lamp"}"#,
    )
    .unwrap();
    see(&mut decide, "Approve? [y/N]").unwrap();
    decide.send_line("y").unwrap();
    see(&mut decide, "decided: approved").unwrap();
    decide.exp_eof().unwrap();
    let mut log = Value::Null;
    wait_until(Duration::from_secs(30), "the firing's end", || {
        log = tau_json(&env, &["routine", "log", "lamp", "--json"]).unwrap_or(Value::Null);
        log["firings"][0]["outcome"] == "succeeded"
    })
    .unwrap();
    let listed = tau_json(&env, &["approvals", "--json"]).unwrap();
    assert_eq!(listed["approvals"].as_array().unwrap().len(), 0, "{listed}");
    let events = env.events("routine-lamp").unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.r#type == "tool_call" && e.json.contains("\"approved\"")),
        "{events:?}"
    );
}
