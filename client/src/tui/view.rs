//! Drawing the whole screen from [`App`]: sessions sidebar, conversation (wrapped, following the
//! end unless scrolled), events pane, composer, status line, and the approval card on top.
//!
//! Invariants: the layout is computed from the frame's own area on every draw (never a stored
//! size); below 60 columns the sidebar and events pane are left out; below 10 rows only the
//! conversation, composer and status are drawn; nothing here waits on anything.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, Paragraph};

use super::app::{App, Who};
use super::card_view;
use super::markdown;
use super::theme::Theme;
use super::wrap;
use crate::chat::render;

/// Draws the screen.
pub fn draw(frame: &mut Frame<'_>, app: &App, theme: Theme, now: Instant) {
    let area = frame.area();
    let [body, composer, status] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(3),
        Constraint::Length(1),
    ])
    .areas(area);
    let wide = area.width >= 60 && area.height >= 10;
    if wide {
        let [sidebar, main] =
            Layout::horizontal([Constraint::Length(22), Constraint::Min(30)]).areas(body);
        let [conversation, events] =
            Layout::vertical([Constraint::Percentage(70), Constraint::Percentage(30)]).areas(main);
        draw_sessions(frame, sidebar, app, theme);
        draw_conversation(frame, conversation, app, theme);
        draw_events(frame, events, app, theme);
    } else {
        draw_conversation(frame, body, app, theme);
    }
    draw_composer(frame, composer, app);
    draw_status(frame, status, app, theme);
    if let Some(card) = &app.card {
        card_view::draw(frame, area, card, &app.messages, app.lang, theme, now);
    }
}

fn draw_sessions(frame: &mut Frame<'_>, area: Rect, app: &App, theme: Theme) {
    let items: Vec<ListItem<'_>> = app
        .sessions
        .iter()
        .map(|session| {
            let current = session.session_id == app.session_id;
            let title = if session.title.trim().is_empty() {
                render::one_line(&session.session_id, 18)
            } else {
                render::one_line(&session.title, 18)
            };
            let marker = if current { "▶ " } else { "  " };
            let style = if current {
                theme.accent()
            } else {
                Default::default()
            };
            ListItem::new(Span::styled(format!("{marker}{title}"), style))
        })
        .collect();
    let block = Block::default()
        .borders(Borders::ALL)
        .title(app.t("tui.sessions", &[]));
    frame.render_widget(List::new(items).block(block), area);
}

/// The conversation's lines wrapped to `width` columns, the streamed reply last; only the last
/// `keep` source entries are wrapped (what can be on screen), so a long session stays cheap.
pub fn conversation_lines(
    app: &App,
    theme: Theme,
    width: usize,
    keep: usize,
) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let skip = app.conversation.len().saturating_sub(keep);
    for entry in app.conversation.iter().skip(skip) {
        let (prefix, style) = match entry.who {
            Who::You => ("> ", theme.accent()),
            Who::Tau => ("", Default::default()),
            Who::Notice => ("", theme.dim()),
            Who::Error => ("", theme.error()),
        };
        if entry.who == Who::Tau {
            lines.extend(markdown::render(&entry.text, width, style));
            continue;
        }
        let text = format!("{prefix}{}", entry.text);
        for line in wrap::wrap(&text, width) {
            lines.push(Line::from(Span::styled(line, style)));
        }
    }
    if let Some(streaming) = &app.streaming {
        lines.extend(markdown::render(streaming, width, Default::default()));
    }
    lines
}

fn draw_conversation(frame: &mut Frame<'_>, area: Rect, app: &App, theme: Theme) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(app.t("tui.conversation", &[]));
    let height = usize::from(area.height.saturating_sub(2));
    let width = usize::from(area.width.saturating_sub(2)).max(1);
    let keep = height + usize::from(app.scroll);
    let lines = conversation_lines(app, theme, width, keep);
    let end = lines.len().saturating_sub(usize::from(app.scroll));
    let start = end.saturating_sub(height);
    let shown = lines[start..end].to_vec();
    frame.render_widget(Paragraph::new(shown).block(block), area);
}

fn draw_events(frame: &mut Frame<'_>, area: Rect, app: &App, theme: Theme) {
    let height = usize::from(area.height.saturating_sub(2));
    let start = app.events.len().saturating_sub(height);
    let items: Vec<ListItem<'_>> = app
        .events
        .iter()
        .skip(start)
        .map(|line| {
            let style = if line.error {
                theme.error()
            } else {
                theme.dim()
            };
            ListItem::new(Span::styled(line.text.clone(), style))
        })
        .collect();
    let block = Block::default()
        .borders(Borders::ALL)
        .title(app.t("tui.events", &[]));
    frame.render_widget(List::new(items).block(block), area);
}

fn draw_composer(frame: &mut Frame<'_>, area: Rect, app: &App) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(app.t("tui.composer", &[]));
    let text = app.composer.text.replace('\n', "⏎");
    let width = usize::from(area.width.saturating_sub(4));
    let shown: String = {
        let chars: Vec<char> = text.chars().collect();
        chars[chars.len().saturating_sub(width)..].iter().collect()
    };
    frame.render_widget(Paragraph::new(format!("> {shown}")).block(block), area);
}

/// The status line: profile, role, context mode, hub state, turn state, pending approvals.
pub fn status_text(app: &App) -> String {
    let state = if app.card.is_some() {
        app.t("tui.state.awaiting_approval", &[])
    } else if let (true, Some(progress)) = (app.status.running, &app.status.progress) {
        format!("{} · {progress}", app.t("tui.state.running", &[]))
    } else if app.status.running {
        app.t("tui.state.running", &[])
    } else {
        app.t("tui.state.idle", &[])
    };
    let pending =
        usize::from(app.card.as_ref().is_some_and(|c| c.verdict.is_none())) + app.waiting.len();
    format!(
        " {} · {} · {} · {} · {} · !{}",
        app.status.profile, app.status.role, app.status.context, app.status.hub, state, pending
    )
}

fn draw_status(frame: &mut Frame<'_>, area: Rect, app: &App, theme: Theme) {
    frame.render_widget(
        Paragraph::new(Span::styled(status_text(app), theme.dim())),
        area,
    );
}
