//! A small Markdown renderer for replies: headings, bullet and numbered lists, fenced code blocks,
//! `**strong**`, `*emphasis*`/`_emphasis_` and `` `code` ``, wrapped to a width.
//!
//! Invariants: the text is shown, never interpreted beyond these marks (HTML and links stay
//! literal, so a reply cannot make the terminal do anything); every character of the text except
//! the marks themselves appears in the output in order; no line is wider than the width.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::wrap::wrap;

/// `text` as styled lines `width` columns wide, on `base`.
pub fn render(text: &str, width: usize, base: Style) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut in_code = false;
    for source in text.split('\n') {
        let trimmed = source.trim_start();
        if trimmed.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        let styled: Vec<(char, Style)> = if in_code {
            let code = base.add_modifier(Modifier::DIM);
            format!("  {source}").chars().map(|c| (c, code)).collect()
        } else if let Some(heading) = heading(trimmed) {
            let strong = base.add_modifier(Modifier::BOLD);
            inline(heading, strong)
        } else if let Some(item) = trimmed
            .strip_prefix("- ")
            .or_else(|| trimmed.strip_prefix("* "))
        {
            let indent = source.len() - trimmed.len();
            let mut out: Vec<(char, Style)> = format!("{}• ", " ".repeat(indent))
                .chars()
                .map(|c| (c, base))
                .collect();
            out.extend(inline(item, base));
            out
        } else {
            inline(source, base)
        };
        lines.extend(wrap_styled(&styled, width));
    }
    lines
}

fn heading(line: &str) -> Option<&str> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if (1..=6).contains(&hashes) {
        line[hashes..].strip_prefix(' ')
    } else {
        None
    }
}

/// The characters of one line with the inline marks applied (and removed).
fn inline(line: &str, base: Style) -> Vec<(char, Style)> {
    let mut out = Vec::new();
    let (mut strong, mut emphasis, mut code) = (false, false, false);
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let closes = |mark: &str| {
            chars[i + mark.chars().count()..]
                .iter()
                .collect::<String>()
                .contains(mark)
        };
        if c == '`' && (code || closes("`")) {
            code = !code;
        } else if !code && c == '*' && chars.get(i + 1) == Some(&'*') && (strong || closes("**")) {
            strong = !strong;
            i += 1;
        } else if !code
            && (c == '*' || c == '_')
            && (emphasis || closes(&c.to_string()))
            && (emphasis || chars.get(i + 1).is_some_and(|n| !n.is_whitespace()))
        {
            emphasis = !emphasis;
        } else {
            let mut style = base;
            if strong {
                style = style.add_modifier(Modifier::BOLD);
            }
            if emphasis {
                style = style.add_modifier(Modifier::ITALIC);
            }
            if code {
                style = style.add_modifier(Modifier::REVERSED);
            }
            out.push((c, style));
        }
        i += 1;
    }
    out
}

/// Wraps styled characters (the breaks of [`wrap`], styles carried along).
fn wrap_styled(styled: &[(char, Style)], width: usize) -> Vec<Line<'static>> {
    let plain: String = styled.iter().map(|(c, _)| c).collect();
    let mut at = 0;
    let mut out = Vec::new();
    for line in wrap(&plain, width) {
        let mut spans: Vec<Span<'static>> = Vec::new();
        for c in line.chars() {
            // Only spaces at a break are dropped by wrap: skip to the character shown.
            while at < styled.len() && styled[at].0 != c {
                at += 1;
            }
            let style = styled.get(at).map_or_else(Style::default, |(_, s)| *s);
            at += 1;
            match spans.last_mut() {
                Some(last) if last.style == style => last.content.to_mut().push(c),
                _ => spans.push(Span::styled(c.to_string(), style)),
            }
        }
        out.push(Line::from(spans));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(lines: &[Line<'_>]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    fn style_of(lines: &[Line<'_>], needle: &str) -> Style {
        lines
            .iter()
            .flat_map(|l| &l.spans)
            .find(|s| s.content.contains(needle))
            .map(|s| s.style)
            .unwrap_or_else(|| panic!("{needle:?} not found"))
    }

    #[test]
    fn marks_become_styles_and_disappear() {
        let lines = render(
            "# Title\nsome **bold** and *soft* and `x=1`\n- one\n- two",
            80,
            Style::default(),
        );
        assert_eq!(
            text(&lines),
            ["Title", "some bold and soft and x=1", "• one", "• two"]
        );
        assert!(
            style_of(&lines, "Title")
                .add_modifier
                .contains(Modifier::BOLD)
        );
        assert!(
            style_of(&lines, "bold")
                .add_modifier
                .contains(Modifier::BOLD)
        );
        assert!(
            style_of(&lines, "soft")
                .add_modifier
                .contains(Modifier::ITALIC)
        );
        assert!(
            style_of(&lines, "x=1")
                .add_modifier
                .contains(Modifier::REVERSED)
        );
    }

    #[test]
    fn code_blocks_are_literal_and_lone_marks_stay() {
        let lines = render(
            "```\nlet **a** = 2 * 3;\n```\n2 * 3 = 6",
            80,
            Style::default(),
        );
        assert_eq!(text(&lines), ["  let **a** = 2 * 3;", "2 * 3 = 6"]);
    }

    #[test]
    fn styled_text_wraps_to_the_width() {
        let lines = render(
            "**a very long bold sentence that wraps**",
            12,
            Style::default(),
        );
        assert!(lines.len() >= 3, "{:?}", text(&lines));
        for line in &lines {
            assert!(line.width() <= 12);
            assert!(
                line.spans
                    .iter()
                    .all(|s| s.style.add_modifier.contains(Modifier::BOLD))
            );
        }
    }
}
