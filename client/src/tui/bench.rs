//! Frame-time benchmark of the TUI's drawing (ignored by default; run with
//! `cargo test --release -p tau-cli --bin tau tui::bench -- --ignored --nocapture`): a 2,000-message
//! session and a long streamed reply, drawn on ratatui's `TestBackend` at 120×40, p50/p99 per
//! frame, and the process's RSS after.

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tau_api::i18n::Messages;
use tau_api::lang::Lang;
use tau_api::proto::v1::{self as pb, session_event::Kind};

use super::app::{App, Who};
use super::theme::Theme;
use super::view;

/// Per-frame draw times of `frames` draws, each after `step` changes the app.
fn frames(app: &mut App, frames: usize, mut step: impl FnMut(&mut App, usize)) -> Vec<Duration> {
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let theme = Theme { color: true };
    let mut times = Vec::with_capacity(frames);
    for i in 0..frames {
        step(app, i);
        let started = Instant::now();
        terminal
            .draw(|frame| view::draw(frame, app, theme, Instant::now()))
            .unwrap();
        times.push(started.elapsed());
    }
    times.sort();
    times
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn rss_kib() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .unwrap_or("VmRSS: ?")
        .to_owned()
}

#[test]
#[ignore = "a benchmark: run it in release with --ignored --nocapture"]
fn frame_times_of_a_long_session_and_a_long_streamed_reply() {
    let mut app = App::new(Messages::builtin(), Lang::En);
    for i in 0..2000 {
        let who = if i % 2 == 0 { Who::You } else { Who::Tau };
        let text = format!(
            "message {i}: {}",
            "a few words of a reply, ".repeat(1 + i % 12)
        );
        app.say(who, &text);
    }
    for i in 0..500 {
        app.note(
            &format!("✓ tool_{i} · tier 1 · success · not_required · 3 ms"),
            false,
        );
    }
    let session = frames(&mut app, 300, |app, i| {
        app.scroll = u16::try_from(i % 50).unwrap()
    });
    app.scroll = 0;
    app.turn_started("write a long story");
    let streamed = frames(&mut app, 4000, |app, i| {
        let text = if i % 20 == 19 {
            "\n".to_owned()
        } else {
            format!("word{i} ")
        };
        app.apply(&pb::SessionEvent {
            kind: Some(Kind::TextDelta(pb::TextDelta { text })),
            ..Default::default()
        });
    });
    for (name, times) in [
        ("2000-message session", &session),
        ("streamed reply (4000 deltas)", &streamed),
    ] {
        outln!(
            "{name}: p50 {:?} p99 {:?} max {:?}",
            percentile(times, 50),
            percentile(times, 99),
            times[times.len() - 1]
        );
    }
    outln!("{}", rss_kib());
    // The target (16 ms a frame) is for release builds; a debug build only prints.
    if !cfg!(debug_assertions) {
        assert!(percentile(&session, 99) < Duration::from_millis(16));
    }
}
