//! Drawing the approval card: title, tool, tier, the escaped arguments (scrollable), the effect,
//! the two buttons (focus shown by style and by `>`), and the arming hint or the verdict.
//!
//! Invariants: all hub text is sanitized (escape sequences shown, not sent); Approve is drawn
//! dimmed and the hint reads "(arming…)" until the card is armed.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use tau_api::i18n::Messages;
use tau_api::lang::Lang;

use super::card::{Button, Card, Verdict};
use super::theme::Theme;
use crate::chat::render;

/// The text of a verdict, in the UI language.
pub fn verdict_text(messages: &Messages, lang: Lang, verdict: Verdict, tool: &str) -> String {
    let key = match verdict {
        Verdict::Sending => "approval.sending",
        Verdict::Approved => "approval.approved",
        Verdict::Rejected => "approval.rejected",
        Verdict::Expired => "approval.expired",
        Verdict::TimedOut => "approval.timed_out",
        Verdict::DecidedElsewhere => "approval.decided_elsewhere",
    };
    messages.t_or_key(key, lang, &[("tool", &tool)])
}

/// Whether the whole card (tool, arguments' header, effect, both buttons, hint) fits in `area`.
pub fn fits(area: Rect) -> bool {
    area.width >= 44 && area.height >= 12
}

/// The card's rectangle inside `area`: centred, at most 72 wide.
pub fn card_area(area: Rect) -> Rect {
    let width = area.width.min(72);
    let height = area.height.min(18);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}

/// Draws `card` over `area`.
pub fn draw(
    frame: &mut Frame<'_>,
    area: Rect,
    card: &Card,
    messages: &Messages,
    lang: Lang,
    theme: Theme,
    now: Instant,
) {
    let t = |key: &str| messages.t_or_key(key, lang, &[]);
    let approval = &card.approval;
    let tier = tau_api::tiers::asked_tier(approval.tier);
    let area = card_area(area);
    frame.render_widget(Clear, area);
    let title = messages.t_or_key("approval.title", lang, &[("tier", &tier)]);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(title, theme.warning()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [head, args, effect, buttons, hint] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(2),
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(inner);
    let tool = format!(
        "{} {}",
        t("approval.tool"),
        render::one_line(&approval.tool, 60)
    );
    frame.render_widget(Paragraph::new(tool), head);
    let mut lines = vec![Line::from(t("approval.arguments"))];
    for line in render::sanitize(&approval.arguments).lines() {
        lines.push(Line::from(format!("│ {line}")));
    }
    let arguments = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .scroll((card.scroll, 0));
    frame.render_widget(arguments, args);
    let effect_text = format!(
        "{} {}",
        t("approval.effect"),
        render::sanitize(&approval.effect)
    );
    frame.render_widget(
        Paragraph::new(effect_text).wrap(Wrap { trim: false }),
        effect,
    );
    let armed = card.armed(now);
    frame.render_widget(
        Paragraph::new(button_line(card, messages, lang, theme, armed)),
        buttons,
    );
    let hint_text = match card.verdict {
        Some(verdict) => verdict_text(
            messages,
            lang,
            verdict,
            &render::one_line(&approval.tool, 60),
        ),
        None if !card.fits => t("approval.enlarge_terminal"),
        None if armed => t("approval.keys"),
        None => t("approval.arming"),
    };
    frame.render_widget(Paragraph::new(Span::styled(hint_text, theme.dim())), hint);
}

fn button_line<'a>(
    card: &Card,
    messages: &Messages,
    lang: Lang,
    theme: Theme,
    armed: bool,
) -> Line<'a> {
    let label = |button: Button, key: &str| {
        let focused = card.focus == button;
        let text = messages.t_or_key(key, lang, &[]);
        let text = if focused {
            format!("> [ {text} ] <")
        } else {
            format!("  [ {text} ]  ")
        };
        let mut style = Style::default();
        if focused {
            style = style.add_modifier(Modifier::REVERSED | Modifier::BOLD);
        }
        if button == Button::Approve && !armed {
            style = theme.dim();
        }
        Span::styled(text, style)
    };
    Line::from(vec![
        label(Button::Reject, "approval.button_reject"),
        Span::raw("  "),
        label(Button::Approve, "approval.button_approve"),
    ])
}
