//! Rendering tests on ratatui's `TestBackend`: the approval card in both languages, armed and
//! unarmed, with every outcome; and each pane.

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Modifier;
use tau_api::i18n::Messages;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, session_event::Kind};

use super::app::{App, Who};
use super::card::{ARMING, Button, Verdict};
use super::theme::Theme;
use super::view;

const THEME: Theme = Theme { color: false };

fn app(lang: Lang) -> App {
    let mut app = App::new(Messages::builtin(), lang);
    app.status.profile = "home".into();
    app.status.role = "default".into();
    app.status.context = "full".into();
    app.status.hub = "live".into();
    app
}

fn approval() -> pb::PendingApproval {
    pb::PendingApproval {
        approval_id: "apr-1".into(),
        tool: "demo_physical_action".into(),
        tier: pb::Tier::Physical as i32,
        arguments: "{\"action\":\"on\",\"device\":\"lamp\x1b[2J\"}".into(),
        effect: "Turns the lamp on.".into(),
        channel: "terminal".into(),
        ..Default::default()
    }
}

fn render(app: &App, width: u16, height: u16, now: Instant) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| view::draw(frame, app, THEME, now))
        .unwrap();
    terminal.backend().buffer().clone()
}

fn text(buffer: &Buffer) -> String {
    let area = buffer.area;
    let mut out = String::new();
    for y in 0..area.height {
        for x in 0..area.width {
            out.push_str(buffer[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// The style of the first cell of `needle` on screen.
fn modifiers_at(buffer: &Buffer, needle: &str) -> Modifier {
    let area = buffer.area;
    for y in 0..area.height {
        let row: String = (0..area.width)
            .map(|x| buffer[(x, y)].symbol().to_owned())
            .collect();
        if let Some(byte) = row.find(needle) {
            let x = u16::try_from(row[..byte].chars().count()).unwrap();
            return buffer[(x, y)].modifier;
        }
    }
    panic!("{needle:?} not on screen:\n{}", text(buffer));
}

fn card_app(lang: Lang, t0: Instant) -> App {
    let mut app = app(lang);
    app.open_card(approval());
    app.card.as_mut().unwrap().drawn(t0);
    app
}

#[test]
fn the_card_unarmed_reads_arming_with_focus_on_reject_in_both_languages() {
    for (lang, arming, reject, approve) in [
        (Lang::En, "(arming…)", "Reject", "Approve once"),
        (Lang::Tr, "(hazırlanıyor…)", "Reddet", "Bir kez onayla"),
    ] {
        let t0 = Instant::now();
        let app = card_app(lang, t0);
        let screen = render(&app, 80, 24, t0);
        let shown = text(&screen);
        assert!(shown.contains(arming), "{lang:?}:\n{shown}");
        assert!(shown.contains(&format!("> [ {reject} ] <")), "{shown}");
        assert!(shown.contains(&format!("  [ {approve} ]")), "{shown}");
        assert!(shown.contains("demo_physical_action"), "{shown}");
        assert!(
            shown.contains("\\u{1b}[2J"),
            "escape shown, not sent:\n{shown}"
        );
        assert!(modifiers_at(&screen, &format!("[ {reject} ]")).contains(Modifier::REVERSED));
        assert!(modifiers_at(&screen, &format!("[ {approve} ]")).contains(Modifier::DIM));
    }
}

#[test]
fn the_card_armed_shows_the_keys_and_moves_focus() {
    for (lang, keys, approve) in [
        (Lang::En, "Tab switch", "Approve once"),
        (Lang::Tr, "Tab geçiş", "Bir kez onayla"),
    ] {
        let t0 = Instant::now();
        let mut app = card_app(lang, t0);
        let later = t0 + ARMING + Duration::from_millis(1);
        let shown = text(&render(&app, 80, 24, later));
        assert!(
            !shown.contains("(arming…)") && !shown.contains("hazırlanıyor"),
            "{shown}"
        );
        let hint = Messages::builtin().t_or_key("approval.keys", lang, &[]);
        assert!(hint.contains(keys), "{hint}");
        assert!(shown.contains(&hint), "{lang:?}:\n{shown}");
        app.card.as_mut().unwrap().focus = Button::Approve;
        let screen = render(&app, 80, 24, later);
        assert!(text(&screen).contains(&format!("> [ {approve} ] <")));
        assert!(!modifiers_at(&screen, &format!("[ {approve} ]")).contains(Modifier::DIM));
    }
}

#[test]
fn the_card_shows_every_outcome_in_both_languages() {
    let messages = Messages::builtin();
    for lang in [Lang::En, Lang::Tr] {
        for verdict in [
            Verdict::Sending,
            Verdict::Approved,
            Verdict::Rejected,
            Verdict::Expired,
            Verdict::TimedOut,
            Verdict::DecidedElsewhere,
        ] {
            let t0 = Instant::now();
            let mut app = card_app(lang, t0);
            app.verdict(verdict);
            let expected =
                super::card_view::verdict_text(&messages, lang, verdict, "demo_physical_action");
            assert!(!expected.starts_with("approval."), "{expected}");
            let shown = text(&render(&app, 100, 30, t0 + Duration::from_secs(5)));
            assert!(shown.contains(&expected), "{lang:?} {verdict:?}:\n{shown}");
            if verdict == Verdict::Sending {
                assert!(app.card.is_some(), "the card waits for the hub's answer");
                continue;
            }
            assert!(app.card.is_none(), "a decided card folds away");
            assert_eq!(
                app.events.back().map(|e| e.text.as_str()),
                Some(expected.as_str())
            );
            let folded = app.conversation.back().map(|e| e.text.clone());
            assert_eq!(folded, Some(format!("{expected} · tier 2")), "{lang:?}");
        }
    }
}

#[test]
fn the_card_fits_at_80x24_and_degrades_below() {
    let t0 = Instant::now();
    let app = card_app(Lang::En, t0);
    for (w, h) in [(80, 24), (40, 12), (20, 6)] {
        let shown = text(&render(&app, w, h, t0));
        assert!(shown.contains("Reject") || w < 30, "{w}x{h}:\n{shown}");
    }
}

fn event(kind: Kind) -> pb::SessionEvent {
    pb::SessionEvent {
        kind: Some(kind),
        ..Default::default()
    }
}

#[test]
fn the_conversation_streams_and_wraps_on_resize() {
    let mut app = app(Lang::En);
    app.turn_started("hello");
    let long = "word ".repeat(40);
    app.apply(&event(Kind::TextDelta(pb::TextDelta {
        text: long.clone(),
    })));
    let now = Instant::now();
    let wide = text(&render(&app, 120, 24, now));
    assert!(wide.contains("> hello"), "{wide}");
    assert!(wide.contains("word word"), "{wide}");
    let narrow = text(&render(&app, 50, 24, now));
    let rows_with_words = narrow.lines().filter(|l| l.contains("word")).count();
    assert!(rows_with_words >= 4, "wrapped at the new width:\n{narrow}");
    app.apply(&event(Kind::TurnEnded(pb::TurnEnded {
        text: long,
        ..Default::default()
    })));
    assert!(app.streaming.is_none());
    assert_eq!(app.conversation.back().map(|e| e.who), Some(Who::Tau));
}

#[test]
fn the_events_pane_shows_tool_calls_with_tier_status_approval_and_duration() {
    let mut app = app(Lang::En);
    app.apply(&event(Kind::ToolCall(pb::ToolCallFinished {
        tool: "demo_physical_action".into(),
        tier: pb::Tier::Physical as i32,
        status: pb::ToolCallStatus::Success as i32,
        approval: "approved".into(),
        duration_ms: 12,
        ..Default::default()
    })));
    app.apply(&event(Kind::Throttled(pb::Throttled { delay_ms: 1500 })));
    let shown = text(&render(&app, 120, 30, Instant::now()));
    assert!(
        shown.contains("✓ demo_physical_action · tier 2 · success · approved · 12 ms"),
        "{shown}"
    );
    assert!(shown.contains("Events"), "{shown}");
}

#[test]
fn the_sidebar_marks_the_current_session_and_the_status_line_reads_the_state() {
    let mut app = app(Lang::Tr);
    app.sessions = vec![
        pb::SessionInfo {
            session_id: "s-1".into(),
            title: "lamba".into(),
            ..Default::default()
        },
        pb::SessionInfo {
            session_id: "s-2".into(),
            title: "takvim".into(),
            ..Default::default()
        },
    ];
    app.session_id = "s-2".into();
    let shown = text(&render(&app, 100, 24, Instant::now()));
    assert!(shown.contains("Oturumlar"), "{shown}");
    assert!(shown.contains("▶ takvim"), "{shown}");
    assert!(shown.contains("  lamba"), "{shown}");
    assert!(
        shown.contains("home · default · full · live · boşta · !0"),
        "{shown}"
    );
    app.open_card(approval());
    assert!(view::status_text(&app).contains("onay bekliyor · !1"));
}

#[test]
fn a_two_thousand_message_session_draws_only_what_fits() {
    let mut app = app(Lang::En);
    for i in 0..2000 {
        app.say(
            Who::Tau,
            &format!("message {i} {}", "lorem ipsum ".repeat(8)),
        );
    }
    let shown = text(&render(&app, 80, 24, Instant::now()));
    assert!(shown.contains("message 1999"), "{shown}");
    assert!(!shown.contains("message 1990 "), "{shown}");
}

#[test]
fn alt_arrows_choose_the_neighbouring_session() {
    use crossterm::event::KeyCode;
    let mut app = app(Lang::En);
    app.sessions = ["a", "b", "c"]
        .iter()
        .map(|id| pb::SessionInfo {
            session_id: (*id).into(),
            ..Default::default()
        })
        .collect();
    app.session_id = "b".into();
    assert_eq!(app.neighbour(KeyCode::Up).as_deref(), Some("a"));
    assert_eq!(app.neighbour(KeyCode::Down).as_deref(), Some("c"));
    app.session_id = "c".into();
    assert_eq!(app.neighbour(KeyCode::Down), None);
    assert_eq!(app.neighbour(KeyCode::Enter), None);
}

#[test]
fn a_card_too_big_for_the_screen_asks_to_enlarge_it() {
    let t0 = Instant::now();
    let mut app = card_app(Lang::En, t0);
    assert!(super::card_view::fits(ratatui::layout::Rect::new(
        0, 0, 80, 24
    )));
    assert!(!super::card_view::fits(ratatui::layout::Rect::new(
        0, 0, 40, 24
    )));
    app.card.as_mut().unwrap().fits = false;
    let shown = text(&render(&app, 60, 24, t0 + Duration::from_secs(5)));
    assert!(shown.contains("Enlarge the"), "{shown}");
}

#[test]
fn tool_progress_shows_in_the_status_line_until_the_call_ends() {
    let mut app = app(Lang::En);
    app.turn_started("fetch it");
    app.apply(&event(Kind::ToolProgress(pb::ToolProgress {
        tool: "fetch".into(),
        message: "downloading".into(),
        progress: Some(1.0),
        total: Some(4.0),
        ..Default::default()
    })));
    assert!(
        view::status_text(&app).contains("running · ⋯ fetch: downloading (1/4)"),
        "{}",
        view::status_text(&app)
    );
    app.apply(&event(Kind::ToolCall(pb::ToolCallFinished {
        tool: "fetch".into(),
        status: pb::ToolCallStatus::Success as i32,
        ..Default::default()
    })));
    assert!(!view::status_text(&app).contains("fetch"));
}
