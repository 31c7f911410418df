//! `tau tui` against the scripted hub (see `support/scripted_hub.rs`), on a pseudo-terminal set to
//! 100×30: the Subscribe it keeps on its session, an approval pending in that Subscribe's snapshot
//! (asked while the TUI was away) decided on the card with the snapshot's attachment, the stream
//! lost (and the hub stopped and started again on the same socket) and resubscribed with back-off,
//! and the composer's history kept in the data directory.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::Path;
use std::time::Duration;

use rexpect::session::PtySession;
use tau_api::proto::v1::{self as pb, subscribe_response};
use tonic::Status;

use support::scripted_hub::*;

/// `tau tui --no-start` on a 100×30 terminal in the sandbox of `root`, once its status line is up.
fn spawn_tui(root: &Path) -> PtySession {
    let tau = tau_command(root);
    let mut command = std::process::Command::new("/bin/sh");
    command.env_clear();
    for (key, value) in tau.get_envs() {
        if let Some(value) = value {
            command.env(key, value);
        }
    }
    command
        .current_dir(root)
        .arg("-c")
        .arg("/bin/stty rows 30 cols 100 && exec \"$0\" tui --no-start")
        .arg(env!("CARGO_BIN_EXE_tau"));
    let mut tui = rexpect::session::spawn_command(command, Some(20_000)).unwrap();
    tui.see("home · ").unwrap();
    tui
}

fn snapshot(sender: &SubscribeSender, pending: Vec<pb::PendingApproval>, attachment: &str) {
    sender
        .blocking_send(Ok(pb::SubscribeResponse {
            kind: Some(subscribe_response::Kind::Snapshot(pb::SessionSnapshot {
                pending_approvals: pending,
                last_seq: 5,
                attachment_id: attachment.into(),
                stream_id: STREAM.into(),
                ..Default::default()
            })),
        }))
        .unwrap();
}

fn lamp(id: &str) -> pb::PendingApproval {
    pb::PendingApproval {
        approval_id: id.into(),
        channel: "terminal".into(),
        tool: "demo_physical_action".into(),
        tier: pb::Tier::Physical as i32,
        arguments: "{\"action\": \"turn on the desk lamp\"}".into(),
        effect: "Demo: simulates a physical action; no real device moves.".into(),
        ..Default::default()
    }
}

#[test]
fn an_approval_pending_on_attach_opens_the_card_and_is_decided_with_the_snapshots_attachment() {
    let (root, _runtime, notices) = scripted_hub(Script::default());
    let mut tui = spawn_tui(root.path());
    let (request, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
    assert_eq!(request.session_id, session().session_id);
    assert_eq!(request.channel, "terminal");
    assert_eq!(request.after_seq, None);
    snapshot(&sender, vec![lamp("apr-1"), lamp("apr-2")], "watch-att-3");

    tui.see("(arming").unwrap();
    // `y` at once is swallowed (and restarts the wait).
    tui.send("y").unwrap();
    tui.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(notices.decisions.try_recv().is_err(), "an early y decided");
    // Armed 0.5 s after that key.
    std::thread::sleep(Duration::from_millis(1000));
    tui.send("y").unwrap();
    tui.flush().unwrap();
    let decision = notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "apr-1");
    assert_eq!(decision.attachment_id, "watch-att-3");
    assert_eq!(decision.decision, pb::ApprovalDecision::Approved as i32);

    // The second waited behind it: the verdict folds into the conversation and its card opens
    // unarmed, focus on Reject, so a key typed at once does nothing and Enter (once armed)
    // rejects.
    std::thread::sleep(Duration::from_millis(300));
    tui.send("x").unwrap();
    tui.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(notices.decisions.try_recv().is_err());
    tui.send("\r").unwrap();
    tui.flush().unwrap();
    let decision = notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "apr-2");
    assert_eq!(decision.decision, pb::ApprovalDecision::Rejected as i32);

    tui.send_control('c').unwrap();
    tui.exp_eof().unwrap();
    let history = std::fs::read_to_string(root.path().join("data/tui_history")).unwrap_or_default();
    assert!(
        !history.contains('y'),
        "a key the card took was stored: {history:?}"
    );
}

#[test]
fn a_lost_stream_shows_in_the_status_line_and_is_resubscribed_with_back_off() {
    let (root, _runtime, notices) = scripted_hub(Script::default());
    let mut tui = spawn_tui(root.path());
    let (_, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
    snapshot(&sender, Vec::new(), "watch-att-1");
    sender
        .blocking_send(Err(Status::unavailable("connection reset")))
        .unwrap();
    tui.see("Reconnecting in 1 s").unwrap();

    // The same session again, resumed after the last seq of the numbering it knew.
    let (request, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
    assert_eq!(request.session_id, session().session_id);
    assert_eq!(request.after_seq, Some(5));
    assert_eq!(request.stream_id, STREAM);
    // Ended again at once: the next waits are longer.
    drop(sender);
    let (_, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
    sender
        .blocking_send(Err(Status::unavailable("still down")))
        .unwrap();
    let (_, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
    snapshot(&sender, vec![lamp("apr-7")], "watch-att-2");
    tui.see("(arming").unwrap();
    // Esc rejects, armed or not.
    tui.send("\x1b").unwrap();
    tui.flush().unwrap();
    let decision = notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "apr-7");
    assert_eq!(
        decision.attachment_id, "watch-att-2",
        "the new stream's attachment"
    );
    assert_eq!(decision.decision, pb::ApprovalDecision::Rejected as i32);

    // A line sent is kept for the next run; `/quit` leaves at once. No key is needed to dismiss
    // the verdict: it folded into the conversation.
    std::thread::sleep(Duration::from_millis(300));
    tui.send("/help\r").unwrap();
    tui.flush().unwrap();
    let file = root.path().join("data/tui_history");
    let deadline = std::time::Instant::now() + WAIT;
    while !std::fs::read_to_string(&file).is_ok_and(|h| h.contains("/help")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the history was not written"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    tui.send("/quit\r").unwrap();
    tui.flush().unwrap();
    tui.exp_eof().unwrap();
    let history = std::fs::read_to_string(&file).unwrap();
    assert_eq!(history, "#tau-history v1\n/help\n/quit\n");
}

#[test]
fn ctrl_c_leaves_at_once_while_the_hub_is_away() {
    let (root, _runtime, notices) = scripted_hub(Script::default());
    let mut tui = spawn_tui(root.path());
    let (_, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
    drop(sender);
    tui.see("Reconnecting in").unwrap();
    tui.send_control('c').unwrap();
    tui.exp_eof().unwrap();
}

#[test]
fn a_hub_stopped_and_started_again_on_the_same_socket_is_resubscribed() {
    let (root, runtime, notices) = scripted_hub(Script::default());
    let mut tui = spawn_tui(root.path());
    let (_, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
    snapshot(&sender, Vec::new(), "watch-att-1");
    std::thread::sleep(Duration::from_millis(300));
    // The hub goes away with its connections.
    drop(sender);
    runtime.shutdown_timeout(Duration::from_secs(5));
    tui.see("Reconnecting in").unwrap();
    std::thread::sleep(Duration::from_millis(1500));

    let (_runtime, notices) = scripted_hub_in(root.path(), Script::default());
    let (request, sender) = notices
        .subscribes
        .recv_timeout(Duration::from_secs(40))
        .unwrap();
    assert_eq!(request.session_id, session().session_id);
    assert_eq!(request.channel, "terminal");
    snapshot(&sender, vec![lamp("apr-5")], "watch-att-8");
    tui.see("(arming").unwrap();
    tui.send("\x1b").unwrap();
    tui.flush().unwrap();
    let decision = notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "apr-5");
    assert_eq!(decision.attachment_id, "watch-att-8");
    std::thread::sleep(Duration::from_millis(300));
    tui.send_control('c').unwrap();
    tui.exp_eof().unwrap();
}

#[test]
fn a_snapshot_older_than_the_turn_just_relayed_is_asked_again_and_opens_no_card() {
    let (root, _runtime, notices) = scripted_hub(Script::default());
    let mut tui = spawn_tui(root.path());
    // The watch's first Subscribe is on its way while a turn runs.
    let (_, stale) = notices.subscribes.recv_timeout(WAIT).unwrap();
    tui.send("lamp\r").unwrap();
    tui.flush().unwrap();
    let (_, events) = notices.turns.recv_timeout(WAIT).unwrap();
    let mut turn = Turn {
        events,
        resumed: None,
        seq: 5,
    };
    turn.send(pb::start_turn_response::Kind::Accepted(pb::TurnAccepted {
        session_id: session().session_id,
        turn_id: "turn-1".into(),
        attachment_id: "attachment-7".into(),
        stream_id: STREAM.into(),
        ..Default::default()
    }));
    turn.approval("apr-1", "terminal");
    std::thread::sleep(Duration::from_millis(300));
    tui.send("\x1b").unwrap();
    tui.flush().unwrap();
    let decision = notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.attachment_id, "attachment-7");
    turn.refused();
    turn.end("end_turn", "Not approved.");

    // Taken before the turn: it still lists apr-1, resolved since.
    snapshot(&stale, vec![lamp("apr-1")], "watch-att-1");
    let (request, fresh) = notices.subscribes.recv_timeout(WAIT).unwrap();
    assert_eq!(request.session_id, session().session_id);
    fresh
        .blocking_send(Ok(pb::SubscribeResponse {
            kind: Some(subscribe_response::Kind::Snapshot(pb::SessionSnapshot {
                last_seq: turn.seq,
                attachment_id: "watch-att-2".into(),
                stream_id: STREAM.into(),
                ..Default::default()
            })),
        }))
        .unwrap();
    // No card took the keys (the turn's verdict folded away): the line reaches the composer
    // whole.
    std::thread::sleep(Duration::from_millis(300));
    tui.send("/help\r").unwrap();
    tui.flush().unwrap();
    let file = root.path().join("data/tui_history");
    let deadline = std::time::Instant::now() + WAIT;
    while !std::fs::read_to_string(&file).is_ok_and(|h| h.contains("/help")) {
        assert!(std::time::Instant::now() < deadline, "a card took the keys");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(notices.decisions.try_recv().is_err());
    tui.send_control('c').unwrap();
    tui.exp_eof().unwrap();
}

#[test]
fn an_approval_whose_turn_stream_was_lost_stays_answerable_through_the_watch() {
    let (root, _runtime, notices) = scripted_hub(Script::default());
    let mut tui = spawn_tui(root.path());
    let (_, watch) = notices.subscribes.recv_timeout(WAIT).unwrap();
    snapshot(&watch, Vec::new(), "watch-att-1");
    std::thread::sleep(Duration::from_millis(300));
    tui.send("lamp\r").unwrap();
    tui.flush().unwrap();
    let (_, events) = notices.turns.recv_timeout(WAIT).unwrap();
    let mut turn = Turn {
        events,
        resumed: None,
        seq: 5,
    };
    turn.send(pb::start_turn_response::Kind::Accepted(pb::TurnAccepted {
        session_id: session().session_id,
        turn_id: "turn-1".into(),
        attachment_id: "attachment-7".into(),
        stream_id: STREAM.into(),
        ..Default::default()
    }));
    turn.approval("apr-1", "terminal");
    tui.see("(arming").unwrap();
    // The turn's stream fails with the card open: the hub still holds the approval for the
    // watch, which decides it.
    turn.events
        .blocking_send(Err(Status::unavailable("connection reset")))
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    tui.send("\x1b").unwrap();
    tui.flush().unwrap();
    let decision = notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "apr-1");
    assert_eq!(decision.attachment_id, "watch-att-1");
    assert_eq!(decision.decision, pb::ApprovalDecision::Rejected as i32);
    std::thread::sleep(Duration::from_millis(300));
    tui.send_control('c').unwrap();
    tui.exp_eof().unwrap();
}

#[test]
fn a_watch_cut_off_for_lagging_resumes_at_once_after_the_last_seq() {
    let (root, _runtime, notices) = scripted_hub(Script::default());
    let mut tui = spawn_tui(root.path());
    let (_, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
    snapshot(&sender, Vec::new(), "watch-att-1");
    let started = std::time::Instant::now();
    let mut status = Status::resource_exhausted("lagged; resume with after_seq = 5");
    status
        .metadata_mut()
        .insert("tau-resume-after-seq", "5".parse().unwrap());
    sender.blocking_send(Err(status)).unwrap();
    let (request, sender) = notices.subscribes.recv_timeout(WAIT).unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(450),
        "resumed without the back-off wait"
    );
    assert_eq!(request.after_seq, Some(5));
    assert_eq!(request.stream_id, STREAM);
    // The buffered events after seq 5 follow the snapshot; an approval among them opens the card.
    snapshot(&sender, Vec::new(), "watch-att-2");
    sender
        .blocking_send(Ok(pb::SubscribeResponse {
            kind: Some(subscribe_response::Kind::Event(pb::SessionEvent {
                seq: 6,
                session_id: session().session_id,
                kind: Some(pb::session_event::Kind::ApprovalRequested(
                    pb::ApprovalRequested {
                        approval: Some(lamp("apr-6")),
                    },
                )),
                ..Default::default()
            })),
        }))
        .unwrap();
    tui.see("(arming").unwrap();
    tui.send("\x1b").unwrap();
    tui.flush().unwrap();
    let decision = notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "apr-6");
    assert_eq!(decision.attachment_id, "watch-att-2");
    std::thread::sleep(Duration::from_millis(300));
    tui.send_control('c').unwrap();
    tui.exp_eof().unwrap();
}
