//! `tau chat` against a scripted hub: a `tau.v1.Tau` server in this test process, on the socket
//! where `tau chat` looks for the hub, whose turns the test feeds event by event. The real `tau`
//! binary runs on a pseudo-terminal, so these tests see exactly what a person sees and pin down
//! the timing the real hub's fake model is too fast for: Ctrl-C during a reply, input typed while
//! a reply streams, an approval resolved elsewhere while its prompt is open, a turn stream the hub
//! cuts off for lagging (also just before a decision arrives, which it then refuses).

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use tau_api::proto::v1 as pb;

use support::scripted_hub::*;

#[test]
fn replies_stream_sanitized_with_dim_throttling_and_stop_notices() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("hello");
    turn.text("Hel");
    turn.text("lo\x1b[2J \u{202e}gnp.exe");
    fixture
        .chat
        .see("Hello\\u{1b}[2J \\u{202e}gnp.exe")
        .unwrap();
    turn.event(pb::session_event::Kind::Throttled(pb::Throttled {
        delay_ms: 1500,
    }));
    fixture.chat.see("Throttled; retrying in 2 s…").unwrap();
    turn.text("Hello again");
    turn.end("limit_turns", "Hello again");
    fixture.chat.see("Hello again").unwrap();
    fixture
        .chat
        .see("Stopped: this turn reached its limit of 12 model calls")
        .unwrap();
    fixture.quit();
}

#[test]
fn ctrl_c_during_a_reply_cancels_the_turn() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("write a long story");
    turn.text("Once upon a time");
    fixture.chat.see("Once upon a time").unwrap();
    fixture.chat.send_control('c').unwrap();
    let cancel = fixture.notices.cancels.recv_timeout(WAIT).unwrap();
    assert_eq!(cancel.turn_id, "turn-1");
    assert_eq!(cancel.session_id, session().session_id);
    turn.end("cancelled", "Once upon a time");
    fixture.chat.see("Cancelled.").unwrap();
    // Back at the prompt: the chat goes on.
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    fixture.quit();
}

#[test]
fn input_typed_during_a_reply_does_not_answer_the_next_approval() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("turn on the lamp");
    turn.text("Let me see");
    fixture.chat.see("Let me see").unwrap();
    // Typed while the reply streams, before any prompt exists.
    fixture.chat.send("y\r").unwrap();
    fixture.chat.flush().unwrap();
    turn.approval("approval-1", "terminal");
    fixture.chat.see("Approve? [y/N]").unwrap();
    fixture.chat.send_line("n").unwrap();
    let decision = fixture.notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "approval-1");
    assert_eq!(decision.attachment_id, "attachment-7");
    assert_eq!(decision.decision, pb::ApprovalDecision::Rejected as i32);
    turn.refused();
    fixture
        .chat
        .see("✗ demo_physical_action: not approved")
        .unwrap();
    turn.end("end_turn", "");
    fixture.quit();
}

#[test]
fn ctrl_c_at_an_approval_prompt_rejects() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("turn on the lamp");
    turn.approval("approval-2", "terminal");
    fixture
        .chat
        .see("Arguments: {\"action\": \"turn on the desk lamp\"}")
        .unwrap();
    fixture.chat.see("Approve? [y/N]").unwrap();
    fixture.chat.send_control('c').unwrap();
    let decision = fixture.notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.decision, pb::ApprovalDecision::Rejected as i32);
    turn.refused();
    turn.end("end_turn", "");
    fixture
        .chat
        .see("✗ demo_physical_action: not approved")
        .unwrap();
    fixture.quit();
}

#[test]
fn an_approval_resolved_elsewhere_closes_its_prompt_without_a_decision() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("turn on the lamp");
    turn.approval("approval-3", "terminal");
    fixture.chat.see("Approve? [y/N]").unwrap();
    turn.event(pb::session_event::Kind::ApprovalResolved(
        pb::ApprovalResolved {
            approval_id: "approval-3".into(),
            tool: "demo_physical_action".into(),
            resolution: pb::ApprovalResolution::Timeout as i32,
            ..Default::default()
        },
    ));
    turn.event(pb::session_event::Kind::ToolCall(pb::ToolCallFinished {
        tool: "demo_physical_action".into(),
        tier: pb::Tier::Physical as i32,
        status: pb::ToolCallStatus::Refused as i32,
        approval: "timeout".into(),
        ..Default::default()
    }));
    turn.end("end_turn", "");
    fixture
        .chat
        .see("✗ demo_physical_action: no answer in time; not approved")
        .unwrap();
    // The abandoned prompt does not eat the next line: it reaches the chat.
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    assert!(fixture.notices.decisions.try_recv().is_err());
    fixture.quit();
}

#[test]
fn approvals_of_another_channel_are_not_asked_here() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("turn on the lamp");
    turn.approval("approval-4", "telegram");
    fixture.chat.see("Awaiting approval on telegram.").unwrap();
    turn.end("end_turn", "ok");
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    assert!(fixture.notices.decisions.try_recv().is_err());
    fixture.quit();
}

fn delta(text: &str) -> pb::session_event::Kind {
    pb::session_event::Kind::TextDelta(pb::TextDelta { text: text.into() })
}

#[test]
fn a_turn_stream_cut_off_for_lagging_resumes_and_prints_each_delta_once() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("greet the world");
    turn.text("Hel");
    turn.text("lo, ");
    turn.cut_off(2);
    let resumed = turn.resume(&fixture.notices, "attachment-8");
    assert_eq!(
        resumed,
        pb::SubscribeRequest {
            session_id: session().session_id,
            after_seq: Some(2),
            channel: "terminal".into(),
            stream_id: STREAM.into(),
        }
    );
    // A hub may replay an event the chat already printed.
    turn.event_at(2, delta("lo, "));
    turn.text("world");
    turn.approval("approval-5", "terminal");
    let shown = fixture.chat.see("Approve? [y/N]").unwrap();
    assert!(shown.contains("Hello, world"), "{shown:?}");
    assert_eq!(shown.matches("lo, ").count(), 1, "{shown:?}");
    assert!(!shown.contains("Lost the turn's stream"), "{shown:?}");
    fixture.chat.send_line("y").unwrap();
    let decision = fixture.notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "approval-5");
    assert_eq!(decision.decision, pb::ApprovalDecision::Approved as i32);
    assert_eq!(
        decision.attachment_id, "attachment-8",
        "decided with the attachment of the resumed stream"
    );
    turn.text("Done.");
    turn.end("end_turn", "Hello, worldDone.");
    let shown = fixture.chat.see("Done.").unwrap();
    assert!(!shown.contains("Hello"), "{shown:?}");
    fixture.quit();
}

#[test]
fn an_open_prompt_follows_its_approval_across_a_cut_off() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("turn on the lamp");
    turn.approval("approval-6", "terminal");
    fixture.chat.see("Approve? [y/N]").unwrap();
    turn.cut_off(1);
    let resumed = turn.resume(&fixture.notices, "attachment-9");
    assert_eq!(resumed.after_seq, Some(1));
    // Resolved elsewhere, as the resumed stream tells: the open prompt closes unanswered.
    turn.event(pb::session_event::Kind::ApprovalResolved(
        pb::ApprovalResolved {
            approval_id: "approval-6".into(),
            tool: "demo_physical_action".into(),
            resolution: pb::ApprovalResolution::Timeout as i32,
            ..Default::default()
        },
    ));
    turn.approval("approval-7", "terminal");
    fixture.chat.see("Approve? [y/N]").unwrap();
    fixture.chat.send_line("y").unwrap();
    let decision = fixture.notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(decision.approval_id, "approval-7");
    assert_eq!(decision.attachment_id, "attachment-9");
    turn.end("end_turn", "The lamp is on.");
    let shown = fixture.chat.see("The lamp is on.").unwrap();
    assert!(!shown.contains("Lost the turn's stream"), "{shown:?}");
    // The prompt closed by the resolution sent nothing.
    assert!(fixture.notices.decisions.try_recv().is_err());
    fixture.quit();
}

#[test]
fn a_decision_refused_as_cut_off_is_sent_again_with_the_resumed_attachment() {
    let script = Script {
        cut_off_first_decision: true,
        ..Script::default()
    };
    let mut fixture = Fixture::start_with(script, &[]);
    let mut turn = fixture.turn("turn on the lamp");
    turn.approval("approval-8", "terminal");
    fixture.chat.see("Approve? [y/N]").unwrap();
    fixture.chat.send_line("y").unwrap();
    let first = fixture.notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(first.attachment_id, "attachment-7");
    // The hub had cut the stream off before the decision arrived, and refuses it.
    turn.cut_off(1);
    fixture.notices.refusal.notify_one();
    let resumed = turn.resume(&fixture.notices, "attachment-9");
    assert_eq!(resumed.after_seq, Some(1));
    let second = fixture.notices.decisions.recv_timeout(WAIT).unwrap();
    assert_eq!(second.approval_id, "approval-8");
    assert_eq!(second.decision, pb::ApprovalDecision::Approved as i32);
    assert_eq!(second.attachment_id, "attachment-9");
    let shown = fixture
        .chat
        .see("✓ demo_physical_action: approved")
        .unwrap();
    assert!(
        !shown.contains("cut off"),
        "the refusal is not shown: {shown:?}"
    );
    turn.end("end_turn", "The lamp is on.");
    let shown = fixture.chat.see("The lamp is on.").unwrap();
    assert!(!shown.contains("Lost the turn's stream"), "{shown:?}");
    assert!(fixture.notices.decisions.try_recv().is_err());
    fixture.quit();
}

#[test]
fn failed_compaction_and_role_switch_say_why_and_keep_the_session() {
    let mut fixture = Fixture::start();
    fixture.chat.send_line("/model").unwrap();
    fixture
        .chat
        .see("brain → fake, fake-demo (current)")
        .unwrap();
    fixture.chat.send_line("/model fast").unwrap();
    fixture
        .chat
        .see("Unknown model role: fast. Roles: brain, remote.")
        .unwrap();
    fixture.chat.send_line("/compact the lamp").unwrap();
    fixture
        .chat
        .see(
            "Could not compact the session: this hub cannot compact sessions yet. Nothing changed.",
        )
        .unwrap();
    fixture.chat.send_line("/session").unwrap();
    fixture.chat.see("Id: 20261130-010203-abcd").unwrap();
    fixture.chat.send_line("/status").unwrap();
    // Today's spend, as the hub's GetUsage reports it.
    fixture
        .chat
        .see("Spend today: brain 0,12 $ / 1,00 $")
        .unwrap();
    fixture.chat.see("taud 9.9.9").unwrap();
    fixture.quit();
}

#[test]
fn an_unknown_pinned_role_is_refused_before_a_session_opens() {
    let (root, _runtime, _notices) = scripted_hub(Script::default());
    let output = chat_command(root.path())
        .args(["--role", "fast"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        stdout.contains("Unknown model role: fast. Roles: brain, remote."),
        "{stdout}"
    );
    assert!(!stdout.contains("is ready"), "{stdout}");
}

#[test]
fn ctrl_c_abandons_a_slash_command_and_the_chat_goes_on() {
    let mut fixture = Fixture::start_with(
        Script {
            stall: true,
            ..Script::default()
        },
        &[],
    );
    fixture.chat.send_line("/compact").unwrap();
    fixture.chat.see("Summarizing 4 messages…").unwrap();
    fixture.chat.send_control('c').unwrap();
    fixture
        .chat
        .see("Cancelled; stopped waiting for the hub.")
        .unwrap();
    // Back at the prompt.
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    fixture.quit();
}

#[test]
fn a_hub_that_does_not_answer_in_time_is_left_with_one_line() {
    let mut fixture = Fixture::start_with(
        Script {
            stall: true,
            ..Script::default()
        },
        &[("TAU_HUB_TIMEOUT", "1")],
    );
    fixture.chat.send_line("/sessions").unwrap();
    fixture
        .chat
        .see("The hub did not answer within 1 s; stopped waiting.")
        .unwrap();
    fixture.chat.send_line("/help").unwrap();
    fixture.chat.see("Commands:").unwrap();
    fixture.quit();
}

#[test]
fn a_session_of_another_context_mode_is_refused_in_the_ui_language() {
    let mut fixture = Fixture::start_with(Script::default(), &[("TAU_LANG", "tr")]);
    fixture
        .chat
        .send_line(&format!("/resume {MISMATCHED}"))
        .unwrap();
    fixture
        .chat
        .see(&format!(
            "{MISMATCHED} oturumu farklı bir [agent] context ayarıyla kaydedilmiş; ayarı yeniden summarize yapın ya da yeni bir oturum başlatın."
        ))
        .unwrap();
    fixture.chat.see("Geçerli oturum korunuyor.").unwrap();
    fixture.chat.send_line("/session").unwrap();
    fixture.chat.see(&session().session_id).unwrap();
    fixture.chat.send_control('d').unwrap();
    fixture.chat.see("Hoşça kalın.").unwrap();
    fixture.chat.exp_eof().unwrap();
}

#[test]
fn resume_and_session_options_open_the_named_session() {
    use pb::open_session_request::Target;
    let cases = [
        (vec!["--resume", EARLIER], Target::SessionId(EARLIER.into())),
        (vec!["--resume"], Target::MostRecent(true)),
        (
            vec!["--session", EARLIER],
            Target::SessionId(EARLIER.into()),
        ),
    ];
    for (args, target) in cases {
        let mut fixture = Fixture::launch(Script::default(), &[], &args);
        let opened = fixture.notices.opens.recv_timeout(WAIT).unwrap();
        assert_eq!(opened.target, Some(target), "{args:?}");
        assert_eq!(opened.channel, "terminal");
        assert!(
            fixture
                .startup
                .contains(&format!("Resumed session {EARLIER}")),
            "{args:?}: {}",
            fixture.startup
        );
        fixture.chat.see(&format!("session {EARLIER}")).unwrap();
        // Only the one session was opened: no new one behind the resumed one.
        assert!(fixture.notices.opens.try_recv().is_err(), "{args:?}");
        fixture.quit();
    }
}

#[test]
fn a_role_that_cannot_be_built_is_not_switched_to() {
    let mut fixture = Fixture::start();
    fixture.chat.send_line("/model remote").unwrap();
    fixture
        .chat
        .see("Could not switch to role remote: missing credentials: ANTHROPIC_API_KEY. The current model stays.")
        .unwrap();
    fixture.chat.send_line("/status").unwrap();
    fixture.chat.see("messages · role brain").unwrap();
    fixture.chat.see("Model: brain → fake, fake-demo").unwrap();
    fixture.chat.send_line("/model").unwrap();
    fixture
        .chat
        .see("brain → fake, fake-demo (current)")
        .unwrap();
    fixture.quit();
}

#[test]
fn a_discarded_partial_reply_is_marked_and_the_final_reply_is_shown() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("hello");
    turn.text("Half an ans");
    fixture.chat.see("Half an ans").unwrap();
    turn.event(pb::session_event::Kind::OutputDiscarded(
        pb::OutputDiscarded::default(),
    ));
    turn.event(pb::session_event::Kind::Throttled(pb::Throttled {
        delay_ms: 1000,
    }));
    // The retry's reply reaches this stream only with the turn's end.
    turn.end("end_turn", "The whole answer.");
    let shown = fixture.chat.see("The whole answer.").unwrap();
    assert!(
        shown.contains("(The reply above was discarded; the model answers again.)\r\n"),
        "{shown:?}"
    );
    assert!(shown.contains("Throttled; retrying in 1 s"), "{shown:?}");
    assert!(!shown.contains("ansThe"), "{shown:?}");
    fixture.quit();
}

#[test]
fn the_hubs_profile_wins_and_is_announced_once() {
    // The scripted hub runs profile home; this installation asks for travel.
    let mut fixture = Fixture::start_with(Script::default(), &[("TAU_PROFILE", "travel")]);
    let notice = "The hub runs profile home; this session uses it.";
    assert_eq!(
        fixture.startup.matches(notice).count(),
        1,
        "{}",
        fixture.startup
    );
    assert!(!fixture.startup.contains("travel"), "{}", fixture.startup);
    fixture.chat.send_line("/status").unwrap();
    let status = fixture.chat.see("taud 9.9.9").unwrap();
    assert!(status.contains("Profile: home"), "{status}");
    assert!(!status.contains(notice), "said again: {status}");
    fixture.quit();
}

#[test]
fn tool_progress_shows_on_one_dim_line_replaced_by_the_next_and_cleared_at_the_end() {
    let mut fixture = Fixture::start();
    let mut turn = fixture.turn("fetch the report");
    turn.event(pb::session_event::Kind::ToolUseStarted(
        pb::ToolUseStarted {
            tool_use_id: "t1".into(),
            name: "fetch".into(),
        },
    ));
    fixture.chat.see("Running fetch…").unwrap();
    let progress = |done: f64, message: &str| {
        pb::session_event::Kind::ToolProgress(pb::ToolProgress {
            tool_use_id: "t1".into(),
            tool: "fetch".into(),
            message: message.into(),
            progress: Some(done),
            total: Some(3.0),
        })
    };
    turn.event(progress(1.0, "downloading\x1b[2J"));
    let first = "⋯ fetch: downloading\\u{1b}[2J (1/3)";
    fixture.chat.see(first).unwrap();
    // The next report overwrites the line (no colour here: blanks, not escape sequences).
    turn.event(progress(2.0, "downloading"));
    let blank = format!("\r{}\r", " ".repeat(first.chars().count()));
    let before = fixture
        .chat
        .see(&format!("{blank}⋯ fetch: downloading (2/3)"))
        .unwrap();
    assert!(!before.contains('\n'), "{before:?}");
    // The call's end clears it and shows the call's line (the one `tau tui` shows); the reply
    // starts at the start of the next line.
    turn.event(pb::session_event::Kind::ToolCall(pb::ToolCallFinished {
        tool_use_id: "t1".into(),
        tool: "fetch".into(),
        tier: pb::Tier::Read as i32,
        status: pb::ToolCallStatus::Success as i32,
        approval: "not_required".into(),
        ..Default::default()
    }));
    turn.text("Fetched.");
    let blank = format!(
        "\r{}\r",
        " ".repeat("⋯ fetch: downloading (2/3)".chars().count())
    );
    fixture
        .chat
        .see(&format!(
            "{blank}✓ fetch · tier 0 · success · not_required · 0 ms\r\nFetched."
        ))
        .unwrap();
    turn.end("end_turn", "Fetched.");
    fixture.quit();
}
