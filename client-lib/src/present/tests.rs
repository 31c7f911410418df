//! The presenter: every event that has a live and a stored form gives the same lines.

use super::*;

fn stored(kind: &str, json: &str) -> pb::StoredEvent {
    pb::StoredEvent {
        r#type: kind.into(),
        json: json.into(),
    }
}

fn texts(lines: &[Line]) -> Vec<&str> {
    lines.iter().map(|l| l.text.as_str()).collect()
}

/// The gate's stored `tool_call` and the live `ToolCallFinished` of one call read the same.
#[test]
fn a_tool_call_reads_the_same_live_and_replayed() {
    let messages = Messages::builtin();
    let presenter = Presenter::new(&messages, Lang::En);
    let live = pb::ToolCallFinished {
        tool: "demo_physical_action".into(),
        tier: pb::Tier::Physical as i32,
        status: pb::ToolCallStatus::Success as i32,
        approval: "approved".into(),
        duration_ms: 7,
        ..Default::default()
    };
    let replayed = read_stored(&stored(
        "tool_call",
        r#"{"type":"tool_call","tool":"demo_physical_action","tier":2,"status":"success","approval":"approved","duration_ms":7,"v":1}"#,
    ));
    let expected = "✓ demo_physical_action · tier 2 · success · approved · 7 ms";
    assert_eq!(texts(&presenter.stored(&replayed)), [expected]);
    assert_eq!(
        presenter.live(&Kind::ToolCall(live)),
        presenter.stored(&replayed)
    );
}

#[test]
fn a_refused_call_says_why_in_the_ui_language_live_and_replayed() {
    let messages = Messages::builtin();
    for lang in [Lang::En, Lang::Tr] {
        let presenter = Presenter::new(&messages, lang);
        let live = presenter.live(&Kind::ToolCall(pb::ToolCallFinished {
            tool: "lamp".into(),
            tier: pb::Tier::Physical as i32,
            status: pb::ToolCallStatus::Refused as i32,
            approval: "rejected".into(),
            result_summary: "not approved".into(),
            ..Default::default()
        }));
        let replayed = presenter.stored(&read_stored(&stored(
            "tool_call",
            r#"{"tool":"lamp","tier":2,"status":"refused","approval":"rejected","result_summary":"not approved","duration_ms":0}"#,
        )));
        assert_eq!(live, replayed, "{lang:?}");
        assert_eq!(live.len(), 2);
        assert_eq!(live[0].text, "✗ lamp · tier 2 · refused · rejected · 0 ms");
        assert_eq!(live[1].kind, LineKind::Refused);
        assert!(live.iter().all(|l| l.error));
    }
    let presenter = Presenter::new(&messages, Lang::En);
    let refused = presenter.stored(&read_stored(&stored(
        "tool_call",
        r#"{"tool":"lamp","tier":2,"status":"refused","approval":"rejected"}"#,
    )));
    assert_eq!(refused[1].text, "✗ lamp: not approved");
}

#[test]
fn an_approval_asks_and_ends_the_same_live_and_replayed() {
    let messages = Messages::builtin();
    let presenter = Presenter::new(&messages, Lang::En);
    let asked = presenter.live(&Kind::ApprovalRequested(pb::ApprovalRequested {
        approval: Some(pb::PendingApproval {
            tool: "lamp".into(),
            tier: pb::Tier::Physical as i32,
            channel: "cli".into(),
            ..Default::default()
        }),
    }));
    let asked_stored = presenter.stored(&read_stored(&stored(
        "approval",
        r#"{"type":"approval","tool":"lamp","status":"pending","tier":2,"channel":"cli"}"#,
    )));
    assert_eq!(texts(&asked), ["? lamp (tier 2) [cli]"], "never tier 3");
    assert_eq!(asked, asked_stored);

    let ended = presenter.live(&Kind::ApprovalResolved(pb::ApprovalResolved {
        tool: "lamp".into(),
        resolution: pb::ApprovalResolution::Rejected as i32,
        ..Default::default()
    }));
    let ended_stored = presenter.stored(&read_stored(&stored(
        "approval",
        r#"{"type":"approval","tool":"lamp","status":"rejected","tier":2}"#,
    )));
    assert_eq!(texts(&ended), ["= lamp: rejected"]);
    assert_eq!(ended, ended_stored);

    let expired = presenter.live(&Kind::ApprovalResolved(pb::ApprovalResolved {
        tool: "lamp".into(),
        resolution: pb::ApprovalResolution::ExpiredByRestart as i32,
        ..Default::default()
    }));
    assert_eq!(expired.len(), 2);
    assert_eq!(expired[1].kind, LineKind::Expired);
    assert_eq!(
        expired,
        presenter.stored(&read_stored(&stored(
            "approval",
            r#"{"tool":"lamp","status":"expired_by_restart"}"#,
        )))
    );
}

#[test]
fn a_stop_reads_the_same_live_and_replayed() {
    let messages = Messages::builtin();
    let presenter = Presenter::new(&messages, Lang::En);
    let live = presenter.live(&Kind::TurnEnded(pb::TurnEnded {
        stop_reason: "limit_turns".into(),
        notice: "The turn stopped after 2 model calls (its limit).".into(),
        model_calls: 2,
        ..Default::default()
    }));
    let replayed = presenter.stored(&read_stored(&stored(
        "turn_stopped",
        r#"{"type":"turn_stopped","stop_reason":"limit_turns","notice":"The turn stopped after 2 model calls (its limit).","model_calls":2,"v":1}"#,
    )));
    assert_eq!(
        texts(&live),
        ["■ Stopped: this turn reached its limit of 2 model calls ([agent] max_turns)."]
    );
    assert_eq!(live, replayed);
    let failed = presenter.stored(&read_stored(&stored(
        "turn_stopped",
        r#"{"stop_reason":"error","notice":"boom"}"#,
    )));
    assert!(failed[0].error);
    assert!(
        presenter
            .live(&Kind::TurnEnded(pb::TurnEnded {
                stop_reason: "end_turn".into(),
                ..Default::default()
            }))
            .is_empty(),
        "a normal end has no line"
    );
    // Without its own count, a stop names the configured limit.
    let configured = presenter.with_limits(Limits {
        max_turns: 12,
        max_total_tokens: None,
    });
    let line = configured.live(&Kind::TurnEnded(pb::TurnEnded {
        stop_reason: "limit_turns".into(),
        ..Default::default()
    }));
    assert!(line[0].text.contains("12 model calls"), "{line:?}");
}

#[test]
fn an_agent_error_reads_the_same_live_and_replayed() {
    let messages = Messages::builtin();
    let presenter = Presenter::new(&messages, Lang::En);
    let live = presenter.live(&Kind::Error(pb::AgentError {
        message: "boom\u{1b}[2J".into(),
        ..Default::default()
    }));
    let replayed = presenter.stored(&read_stored(&stored(
        "error",
        r#"{"type":"error","where":"agent","message":"boom\u001b[2J"}"#,
    )));
    assert_eq!(texts(&live), ["Error: boom\\u{1b}[2J"]);
    assert_eq!(live, replayed);
    // An error about a call is said by the call's own line.
    let about_a_call = presenter.stored(&read_stored(&stored(
        "error",
        r#"{"message":"approver failed","tool":"lamp"}"#,
    )));
    assert!(about_a_call.is_empty());
}

#[test]
fn what_is_missing_or_broken_shows_as_a_question_mark() {
    let messages = Messages::builtin();
    let presenter = Presenter::new(&messages, Lang::En);
    let broken = presenter.stored(&read_stored(&stored("tool_call", "not json")));
    assert_eq!(texts(&broken), ["✗ ? · tier ? · ? · ? · ? ms"]);
    assert!(broken[0].error);
    assert_eq!(
        read_stored(&stored("tool_call", r#"{"tier":"two"}"#)),
        Stored::ToolCall(ToolCallFacts::default()),
        "a field of the wrong type loses the record's facts, never the replay"
    );
    assert_eq!(
        read_stored(&stored("routine_fired", "{}")),
        Stored::Other("routine_fired".into())
    );
    let repaired = presenter.stored(&read_stored(&stored(
        "turn_repaired",
        r#"{"notice":"boom"}"#,
    )));
    assert_eq!(
        texts(&repaired),
        ["↺ Repaired the unfinished history: boom"]
    );
}
