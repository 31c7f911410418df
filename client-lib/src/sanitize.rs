//! Text from a model, a tool or the hub made safe to print: every client shows hub text through
//! here (`tau chat`'s printer, the TUI's panes, the presenter's lines).
//!
//! Invariants: newline and tab pass; every other control character (so every escape sequence),
//! bidirectional control and invisible character is written visibly as `\u{..}`; a reply's emoji
//! sequences read as themselves ([`sanitize_prose`]); [`one_line`] never returns a newline.

use tau_api::display::{escape_hidden, escape_hidden_in_prose};

/// A model's reply text made safe to print like [`sanitize`], except that emoji sequences (an
/// emoji with its presentation selector or joiner, `tau_api::display::is_hiding_char_in_prose`)
/// read as themselves; `previous` is the character printed just before `text`.
pub fn sanitize_prose(previous: Option<char>, text: &str) -> String {
    escape_hidden_in_prose(previous, text)
}

/// Untrusted text made safe to print: newline and tab pass, every other control character (C0,
/// DEL, C1; so every escape sequence) and every other character that could hide or reorder text
/// (format and private-use characters, unassigned code points, line/paragraph separators, default
/// ignorables such as variation selectors, tags and fillers: `tau_api::display`, the gate's set)
/// is written visibly as `\u{..}`.
pub fn sanitize(text: &str) -> String {
    escape_hidden(text)
}

/// `text` sanitized, on one line (newlines as `⏎`), cut to `max` characters with `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = sanitize(text.trim())
        .chars()
        .map(|c| if c == '\n' { '⏎' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_escapes_escape_sequences_and_keeps_text() {
        assert_eq!(sanitize("a\tb\nc"), "a\tb\nc");
        assert_eq!(sanitize("x\x1b[2Jy"), "x\\u{1b}[2Jy");
        assert_eq!(sanitize("\r\u{85}\u{7f}"), "\\u{d}\\u{85}\\u{7f}");
        assert_eq!(sanitize("Merhaba, ışık"), "Merhaba, ışık");
    }

    #[test]
    fn sanitize_escapes_the_invisible_characters_of_the_report() {
        assert_eq!(
            sanitize("soft\u{ad}hy\u{115f}\u{1160}\u{180e}\u{2061}\u{2064}\u{206a}\u{206f}"),
            "soft\\u{ad}hy\\u{115f}\\u{1160}\\u{180e}\\u{2061}\\u{2064}\\u{206a}\\u{206f}"
        );
        assert_eq!(
            sanitize("vs\u{fe00}\u{fe0f}\u{fff9}\u{fffb}tag\u{e0000}\u{e0041}\u{e007f}"),
            "vs\\u{fe00}\\u{fe0f}\\u{fff9}\\u{fffb}tag\\u{e0000}\\u{e0041}\\u{e007f}"
        );
        let ordinary = "café ışık İ 漢字 😀 💡\ttab\nline";
        assert_eq!(sanitize(ordinary), ordinary);
    }

    #[test]
    fn a_reply_keeps_its_emoji_sequences_across_deltas_and_chrome_does_not() {
        assert_eq!(sanitize_prose(Some('❤'), "\u{fe0f} ok"), "\u{fe0f} ok");
        assert_eq!(sanitize_prose(None, "👩\u{200d}💻"), "👩\u{200d}💻");
        assert_eq!(sanitize_prose(Some('a'), "\u{fe0f}"), "\\u{fe0f}");
        assert_eq!(sanitize_prose(None, "x\u{e0041}"), "x\\u{e0041}");
        assert_eq!(sanitize("❤\u{fe0f}"), "❤\\u{fe0f}");
    }

    #[test]
    fn sanitize_escapes_bidirectional_and_invisible_characters() {
        assert_eq!(
            sanitize("rm \u{202e}txt.exe\u{2066}"),
            "rm \\u{202e}txt.exe\\u{2066}"
        );
        assert_eq!(
            sanitize("a\u{200b}b\u{feff}c\u{2028}d\u{61c}"),
            "a\\u{200b}b\\u{feff}c\\u{2028}d\\u{61c}"
        );
        assert_eq!(one_line("lamp\u{202e}", 20), "lamp\\u{202e}");
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line(" a\nb ", 10), "a⏎b");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("abcd", 4), "abcd");
    }
}
