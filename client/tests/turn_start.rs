//! How `tau ask` and `tau chat` start a turn, against the scripted hub of `support`: a hub that
//! stalls at each step (opening the session, answering StartTurn, accepting the turn once it
//! answered) is left with one line naming what timed out, within `TAU_HUB_TIMEOUT`; `tau ask`
//! starts a new session's turn in one call and asks GetStatus only when that is refused, falling
//! back to OpenSession first only with a hub that does not list `start_turn.new_session` (or,
//! listing no features at all, refuses it as a hub older than the field does).

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tau_api::proto::v1::{self as pb, open_session_request::Target, start_turn_response};

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

/// What one `tau ask hello` against the scripted hub came to.
struct Asked {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    notices: Notices,
    /// The StartTurn requests the hub took (a refused one is not among them).
    turns: Vec<pb::StartTurnRequest>,
}

/// Runs `tau ask hello` against the hub scripted by `script`, which answers every turn it takes
/// with "Hi." at once.
fn ask_hub(script: Script) -> Asked {
    let (root, _runtime, notices) = scripted_hub(script);
    let mut ask = tau_command(root.path())
        .args(["ask", "hello"])
        .env("TAU_HUB_TIMEOUT", "5")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut turns = Vec::new();
    let until = Instant::now() + WAIT;
    let output = loop {
        if let Ok((request, events)) = notices.turns.recv_timeout(Duration::from_millis(50)) {
            let mut turn = Turn {
                events,
                resumed: None,
                seq: 0,
            };
            turn.send(start_turn_response::Kind::Accepted(pb::TurnAccepted {
                session_id: session().session_id,
                turn_id: "turn-1".into(),
                ..Default::default()
            }));
            turn.end("end_turn", "Hi.");
            turns.push(request);
            break ask.wait_with_output().unwrap();
        }
        if Instant::now() > until {
            panic!("tau ask started no turn within {WAIT:?}");
        }
        if ask.try_wait().unwrap().is_some() {
            break ask.wait_with_output().unwrap();
        }
    };
    Asked {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
        notices,
        turns,
    }
}

#[test]
fn a_new_sessions_turn_is_one_call_and_asks_nothing_else() {
    let asked = ask_hub(Script::default());
    assert_eq!(asked.code, Some(0), "{}", asked.stderr);
    assert_eq!(asked.stdout, "Hi.\n");
    assert!(asked.turns[0].new_session, "{:?}", asked.turns);
    assert!(
        asked.notices.opens.try_recv().is_err(),
        "opened a session first"
    );
    assert_eq!(
        asked.notices.statuses.load(Ordering::SeqCst),
        0,
        "asked GetStatus"
    );
}

#[test]
fn a_hub_older_than_new_session_gets_a_session_opened_first() {
    let asked = ask_hub(Script {
        refuse_new_session: Some("session_id is empty"),
        ..Script::default()
    });
    assert_eq!(asked.code, Some(0), "{}", asked.stderr);
    assert_eq!(asked.stdout, "Hi.\n");
    let opened = asked
        .notices
        .opens
        .try_recv()
        .expect("a session opened first");
    assert_eq!(opened.target, Some(Target::NewSession(true)));
    assert_eq!(asked.turns.len(), 1);
    assert_eq!(asked.turns[0].session_id, session().session_id);
    assert!(!asked.turns[0].new_session);
    assert_eq!(asked.notices.statuses.load(Ordering::SeqCst), 1);
}

#[test]
fn a_hub_that_lists_features_is_believed_over_its_refusals_text() {
    // Not listed: whatever the refusal says, the hub does not know the field.
    let asked = ask_hub(Script {
        refuse_new_session: Some("session_id must name a session"),
        features: &["start_turn.something_else"],
        ..Script::default()
    });
    assert_eq!(asked.code, Some(0), "{}", asked.stderr);
    assert!(
        asked.notices.opens.try_recv().is_ok(),
        "a session opened first"
    );
    assert!(!asked.turns[0].new_session);

    // Listed: the refusal stands, even in an older hub's words; nothing is opened.
    let asked = ask_hub(Script {
        refuse_new_session: Some("session_id is empty"),
        features: &[tau_api::hub_features::START_TURN_NEW_SESSION],
        ..Script::default()
    });
    assert_eq!(asked.code, Some(1), "{}", asked.stdout);
    assert_eq!(
        asked.stderr.trim_end(),
        "tau: cannot start the turn: session_id is empty"
    );
    assert!(asked.notices.opens.try_recv().is_err(), "opened a session");
    assert!(asked.turns.is_empty(), "{:?}", asked.turns);
}

#[test]
fn a_hub_that_lists_no_features_is_judged_by_its_refusal() {
    // A hub with new_session but older than the feature list refuses a bad request in its own
    // words: the refusal stands.
    let asked = ask_hub(Script {
        refuse_new_session: Some("text is empty or only whitespace"),
        ..Script::default()
    });
    assert_eq!(asked.code, Some(1), "{}", asked.stdout);
    assert_eq!(
        asked.stderr.trim_end(),
        "tau: cannot start the turn: text is empty or only whitespace"
    );
    assert!(asked.notices.opens.try_recv().is_err(), "opened a session");
    assert_eq!(asked.notices.statuses.load(Ordering::SeqCst), 1);
}
