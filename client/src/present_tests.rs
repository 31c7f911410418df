//! `tau chat` and `tau tui` show the same line for the same event, live or replayed: each event
//! that has a live and a stored form is fed live (chat's `render_event`, the TUI's `App::apply`)
//! and stored (chat's `/resume` history, the TUI's `App::replay`), and the lines compared.

use tau_api::i18n::Messages;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, session_event::Kind};
use tau_client::present::{Limits, Presenter};

use crate::chat::history::{self, HistoryLine};
use crate::chat::render::Printer;
use crate::chat::render::tests::Shared;
use crate::chat::style::Style;
use crate::chat::turn::render_event;
use crate::tui::app::App;

const LIMITS: Limits = Limits {
    max_turns: 12,
    max_total_tokens: None,
};

/// The lines `tau chat` prints for a live event (no colour).
fn chat_live(lang: Lang, kind: &Kind) -> Vec<String> {
    let messages = Messages::builtin();
    let out = Shared::default();
    let mut printer = Printer::new(Box::new(out.clone()), Style::new(false));
    render_event(
        &mut printer,
        &Presenter::new(&messages, lang).with_limits(LIMITS),
        kind,
    );
    out.text().lines().map(str::to_owned).collect()
}

/// The event lines `/resume` shows for a stored event, placed after message 0 (a stop) or at the
/// result of the call `tu-1` (a tool call).
fn chat_replayed(lang: Lang, event: &pb::StoredEvent) -> Vec<String> {
    let messages = Messages::builtin();
    let presenter = Presenter::new(&messages, lang).with_limits(LIMITS);
    let marks = history::event_marks(&presenter, std::slice::from_ref(event));
    let block = |block| pb::ContentBlock { block: Some(block) };
    let stored = [
        pb::StoredMessage {
            index: 0,
            role: pb::MessageRole::Assistant as i32,
            content: vec![block(pb::content_block::Block::ToolUse(pb::ToolUseBlock {
                tool_use_id: "tu-1".into(),
                name: "lamp".into(),
                input_json: "{}".into(),
            }))],
            ..Default::default()
        },
        pb::StoredMessage {
            index: 1,
            role: pb::MessageRole::User as i32,
            content: vec![block(pb::content_block::Block::ToolResult(
                pb::ToolResultBlock {
                    tool_use_id: "tu-1".into(),
                    status: pb::ToolResultStatus::Success as i32,
                    text: "done".into(),
                },
            ))],
            ..Default::default()
        },
    ];
    let lines = history::history_lines(&messages, lang, &stored, &marks);
    let out = Shared::default();
    let mut printer = Printer::new(Box::new(out.clone()), Style::new(false));
    let events: Vec<HistoryLine> = lines
        .into_iter()
        .filter(|line| matches!(line, HistoryLine::Event(_)))
        .collect();
    history::print_history(&mut printer, &events);
    out.text().lines().map(str::to_owned).collect()
}

/// The events-pane lines of the TUI for a live event.
fn tui_live(lang: Lang, kind: &Kind) -> Vec<String> {
    let mut app = App::new(Messages::builtin(), lang);
    app.limits = LIMITS;
    app.apply(&pb::SessionEvent {
        kind: Some(kind.clone()),
        ..Default::default()
    });
    app.events.iter().map(|e| e.text.clone()).collect()
}

/// The events-pane lines of the TUI for a replayed event.
fn tui_replayed(lang: Lang, event: &pb::StoredEvent) -> Vec<String> {
    let mut app = App::new(Messages::builtin(), lang);
    app.limits = LIMITS;
    app.replay(std::slice::from_ref(event), &[]);
    app.events.iter().map(|e| e.text.clone()).collect()
}

fn stored(kind: &str, json: &str) -> pb::StoredEvent {
    pb::StoredEvent {
        r#type: kind.into(),
        json: json.into(),
    }
}

/// Each event both fronts show in full: live, its stored record, and the lines all four show.
fn shown_alike() -> Vec<(Kind, pb::StoredEvent, usize)> {
    let call = |status: pb::ToolCallStatus, approval: &str| pb::ToolCallFinished {
        tool_use_id: "tu-1".into(),
        tool: "lamp".into(),
        tier: pb::Tier::Physical as i32,
        status: status as i32,
        approval: approval.into(),
        result_summary: "boom".into(),
        duration_ms: 7,
        ..Default::default()
    };
    vec![
        (
            Kind::ToolCall(call(pb::ToolCallStatus::Success, "approved")),
            stored(
                "tool_call",
                r#"{"v":1,"type":"tool_call","tool":"lamp","tier":2,"status":"success","approval":"approved","result_summary":"boom","duration_ms":7,"tool_use_id":"tu-1"}"#,
            ),
            1,
        ),
        (
            Kind::ToolCall(call(pb::ToolCallStatus::Refused, "rejected")),
            stored(
                "tool_call",
                r#"{"v":1,"type":"tool_call","tool":"lamp","tier":2,"status":"refused","approval":"rejected","result_summary":"boom","duration_ms":7,"tool_use_id":"tu-1"}"#,
            ),
            2,
        ),
        (
            Kind::ToolCall(call(pb::ToolCallStatus::Error, "approved")),
            stored(
                "tool_call",
                r#"{"v":1,"type":"tool_call","tool":"lamp","tier":2,"status":"error","approval":"approved","result_summary":"boom","duration_ms":7,"tool_use_id":"tu-1"}"#,
            ),
            2,
        ),
        (
            Kind::TurnEnded(pb::TurnEnded {
                stop_reason: "limit_turns".into(),
                notice: "The turn stopped after 3 model calls (its limit).".into(),
                model_calls: 3,
                ..Default::default()
            }),
            stored(
                "turn_stopped",
                r#"{"v":1,"type":"turn_stopped","turn_id":"t1","stop_reason":"limit_turns","notice":"The turn stopped after 3 model calls (its limit).","model_calls":3,"before_message":1}"#,
            ),
            1,
        ),
        (
            Kind::TurnEnded(pb::TurnEnded {
                stop_reason: "cancelled".into(),
                ..Default::default()
            }),
            stored(
                "turn_stopped",
                r#"{"v":1,"type":"turn_stopped","turn_id":"t1","stop_reason":"cancelled","model_calls":1,"before_message":1}"#,
            ),
            1,
        ),
    ]
}

#[test]
fn chat_and_tui_show_the_same_lines_for_an_event_live_and_replayed() {
    for lang in [Lang::En, Lang::Tr] {
        for (live, record, count) in shown_alike() {
            let chat = chat_live(lang, &live);
            assert_eq!(chat.len(), count, "{lang:?} {live:?}: {chat:?}");
            assert_eq!(chat, tui_live(lang, &live), "{lang:?} {live:?}");
            assert_eq!(chat, chat_replayed(lang, &record), "{lang:?} {record:?}");
            assert_eq!(chat, tui_replayed(lang, &record), "{lang:?} {record:?}");
        }
    }
}

#[test]
fn a_tier_two_call_reads_tier_2_live_and_replayed() {
    let (live, record, _) = shown_alike().remove(0);
    let expected = ["✓ lamp · tier 2 · success · approved · 7 ms"];
    assert_eq!(chat_live(Lang::En, &live), expected);
    assert_eq!(tui_replayed(Lang::En, &record), expected);
    let (live, _, _) = shown_alike().remove(1);
    assert_eq!(
        chat_live(Lang::En, &live),
        [
            "✗ lamp · tier 2 · refused · rejected · 7 ms",
            "✗ lamp: not approved"
        ]
    );
}

#[test]
fn the_chat_leaves_out_only_the_approval_lines_it_asks_and_answers_itself() {
    let asked = Kind::ApprovalRequested(pb::ApprovalRequested {
        approval: Some(pb::PendingApproval {
            tool: "lamp".into(),
            tier: pb::Tier::Physical as i32,
            channel: "cli".into(),
            ..Default::default()
        }),
    });
    let record = stored(
        "approval",
        r#"{"v":1,"type":"approval","tool":"lamp","tier":2,"status":"pending","channel":"cli"}"#,
    );
    assert_eq!(tui_live(Lang::En, &asked), ["? lamp (tier 2) [cli]"]);
    assert_eq!(tui_live(Lang::En, &asked), tui_replayed(Lang::En, &record));
    assert!(chat_live(Lang::En, &asked).is_empty());
    // An approval an earlier hub left pending: the chat says it in words, as the TUI does.
    let expired = Kind::ApprovalResolved(pb::ApprovalResolved {
        tool: "lamp".into(),
        resolution: pb::ApprovalResolution::ExpiredByRestart as i32,
        ..Default::default()
    });
    let chat = chat_live(Lang::En, &expired);
    let tui = tui_live(Lang::En, &expired);
    assert_eq!(chat.len(), 1, "{chat:?}");
    assert_eq!(tui, ["= lamp: expired_by_restart", chat[0].as_str()]);
}
