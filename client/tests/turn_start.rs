//! How `tau ask` and `tau chat` start a turn, against the scripted hub of `support`: a hub that
//! stalls at each step (opening the session, answering StartTurn, accepting the turn once it
//! answered) is left with one line naming what timed out, within `TAU_HUB_TIMEOUT`.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::{Duration, Instant};

use support::scripted_hub::*;

/// Runs `tau ask [--session ID] hello` with a one-second deadline against a hub scripted to
/// stall, and returns its stderr once it gave up (failing the test if it waits on), with how long
/// it ran.
fn tau_ask_against_a_stalled_hub(
    script: Script,
    session: Option<&str>,
) -> (String, Notices, Duration) {
    let (root, _runtime, notices) = scripted_hub(script);
    let mut args = vec!["ask"];
    if let Some(id) = session {
        args.extend(["--session", id]);
    }
    args.push("hello");
    let started = Instant::now();
    let mut ask = tau_command(root.path())
        .args(args)
        .env("TAU_HUB_TIMEOUT", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = started + WAIT;
    while ask.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = ask.kill();
            panic!("tau ask still waits for the hub after {WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let ran = started.elapsed();
    let output = ask.wait_with_output().unwrap();
    assert!(!output.status.success(), "{output:?}");
    (String::from_utf8(output.stderr).unwrap(), notices, ran)
}

#[test]
fn tau_ask_gives_up_on_a_hub_that_does_not_open_the_session() {
    // Only a session named with --session is opened first; a new one comes with the turn.
    let (stderr, notices, _) = tau_ask_against_a_stalled_hub(
        Script {
            stall_open: true,
            ..Script::default()
        },
        Some(EARLIER),
    );
    assert!(
        stderr.contains("cannot open the session: the hub did not answer within 1 s"),
        "{stderr}"
    );
    assert!(notices.opens.try_recv().is_ok());
    assert!(
        notices.turns.try_recv().is_err(),
        "no turn without a session"
    );
}

#[test]
fn tau_ask_gives_up_on_a_hub_that_does_not_accept_the_turn() {
    let (stderr, notices, _) = tau_ask_against_a_stalled_hub(
        Script {
            stall_start: true,
            ..Script::default()
        },
        None,
    );
    assert!(
        stderr.contains("cannot start the turn: the hub did not answer within 1 s"),
        "{stderr}"
    );
    // One call: the turn creates its session, nothing is opened first.
    assert!(
        notices.opens.try_recv().is_err(),
        "a session was opened first"
    );
    let (turn, _events) = notices.turns.try_recv().expect("the turn was asked for");
    assert!(turn.new_session, "{turn:?}");
    assert!(turn.session_id.is_empty(), "{turn:?}");
}

#[test]
fn tau_ask_gives_up_on_a_hub_that_answers_but_never_accepts_the_turn() {
    // The scripted hub answers StartTurn at once (its headers go out) and sends nothing until
    // the test feeds the turn's sender, which it keeps and never feeds.
    let (stderr, notices, ran) = tau_ask_against_a_stalled_hub(Script::default(), None);
    assert_eq!(
        stderr.trim_end(),
        "tau: cannot start the turn: the hub answered but did not accept the turn within 1 s",
        "one line naming what timed out"
    );
    assert!(ran >= Duration::from_secs(1), "gave up early: {ran:?}");
    let (turn, _events) = notices.turns.try_recv().expect("the turn was asked for");
    assert!(turn.new_session, "{turn:?}");
}

#[test]
fn tau_chat_gives_up_on_a_hub_that_answers_but_never_accepts_the_turn() {
    let mut fixture = Fixture::start_with(Script::default(), &[("TAU_HUB_TIMEOUT", "1")]);
    fixture.chat.send_line("hello").unwrap();
    let (request, _events) = fixture.notices.turns.recv_timeout(WAIT).unwrap();
    assert_eq!(request.text, "hello");
    fixture
        .chat
        .see("the hub answered but did not accept the turn within 1 s")
        .unwrap();
    // The chat is back at its prompt.
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    fixture.quit();
}
