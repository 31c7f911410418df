//! Which characters of untrusted text (from a model, a tool, a hub message) must never reach a
//! person's screen as themselves, shared by the gate's argument formatter in `taud` and the
//! renderers of the clients.
//!
//! Invariant: one set everywhere, decided by Unicode properties from a maintained table (the
//! Unicode Character Database as compiled into `icu_properties`), never by a hand list:
//! - the general categories Cc (control: C0, DEL, C1), Cf (format: soft hyphen, the bidirectional
//!   controls, zero-width characters, invisible operators, tags, interlinear annotation), Co
//!   (private use), Cn (unassigned, the noncharacters included), Zl and Zp (line and paragraph
//!   separators);
//! - every `Default_Ignorable_Code_Point`: variation selectors, the Hangul and halfwidth fillers,
//!   the combining grapheme joiner, the Mongolian free variation selectors, the reserved
//!   ignorable ranges (U+E0000–U+E0FFF among them) and the like.
//!
//! Any of them can hide, reorder or disguise what a person reads. Everything else (letters of
//! every script with their combining marks, digits, punctuation, symbols, emoji, spaces) is shown
//! as itself. [`escape_hidden`] and [`escape_hidden_in_prose`] write them visibly: every client
//! (through `tau_client::sanitize`) and the hub's web page (its event JSON) show text through them.

use icu_properties::props::{DefaultIgnorableCodePoint, Emoji, GeneralCategory};
use icu_properties::{CodePointMapData, CodePointSetData};

/// Whether `c` could hide or reorder text, so it must be shown escaped.
pub fn is_hiding_char(c: char) -> bool {
    // Printable ASCII is most of what is shown; it needs no table.
    if (' '..='~').contains(&c) {
        return false;
    }
    let category = CodePointMapData::<GeneralCategory>::new().get(c);
    matches!(
        category,
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::PrivateUse
            | GeneralCategory::Unassigned
            | GeneralCategory::Surrogate
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    ) || CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
}

/// Whether `c`, coming right after `previous` in a model's reply (prose, not arguments a person
/// approves), must be shown escaped: as [`is_hiding_char`], except that the joiner and the two
/// presentation selectors of emoji sequences (U+200D, U+FE0E, U+FE0F) pass right after an emoji
/// character (or after a presentation selector), so "❤️" and "👩‍💻" read as themselves.
///
/// Why only there: alone or after ordinary text they carry no picture and can smuggle data; in a
/// sequence each can only change how the emoji before it looks.
pub fn is_hiding_char_in_prose(previous: Option<char>, c: char) -> bool {
    if matches!(c, '\u{200d}' | '\u{fe0e}' | '\u{fe0f}')
        && let Some(previous) = previous
        && (previous == '\u{fe0f}'
            || (!previous.is_ascii() && CodePointSetData::new::<Emoji>().contains(previous))
            || (c != '\u{200d}' && previous.is_ascii_digit()))
    {
        return false;
    }
    is_hiding_char(c)
}

/// Untrusted text made safe to show: newline and tab pass, every other character
/// [`is_hiding_char`] names is written visibly as `\u{..}` (lower-case hex).
pub fn escape_hidden(text: &str) -> String {
    escape_where(None, text, |_, c| is_hiding_char(c))
}

/// A model's reply made safe to show like [`escape_hidden`], except that emoji sequences read as
/// themselves ([`is_hiding_char_in_prose`]); `previous` is the character shown just before `text`.
pub fn escape_hidden_in_prose(previous: Option<char>, text: &str) -> String {
    escape_where(previous, text, is_hiding_char_in_prose)
}

/// `text` with every character `hides(previous, c)` names, but newline and tab, written `\u{..}`.
fn escape_where(
    mut previous: Option<char>,
    text: &str,
    hides: impl Fn(Option<char>, char) -> bool,
) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\n' || c == '\t' || !hides(previous, c) {
            out.push(c);
        } else {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        }
        previous = Some(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(c: char) -> String {
        format!("U+{:04X}", u32::from(c))
    }

    fn chars(ranges: &[(u32, u32)]) -> Vec<char> {
        ranges
            .iter()
            .flat_map(|&(start, end)| (start..=end).filter_map(char::from_u32))
            .collect()
    }

    #[test]
    fn controls_bidi_and_invisible_characters_hide_text() {
        for c in [
            '\0', '\t', '\n', '\x1b', '\u{7f}', '\u{85}', '\u{9f}', '\u{61c}', '\u{200b}',
            '\u{200e}', '\u{200f}', '\u{2028}', '\u{2029}', '\u{202a}', '\u{202e}', '\u{2060}',
            '\u{2066}', '\u{2069}', '\u{feff}',
        ] {
            assert!(is_hiding_char(c), "{}", code(c));
        }
    }

    /// Every character the reliability report found shown as itself in an approval prompt.
    #[test]
    fn the_invisible_characters_of_the_report_hide_text() {
        let reported = chars(&[
            (0xad, 0xad),
            (0x115f, 0x1160),
            (0x180e, 0x180e),
            (0x2061, 0x2064),
            (0x206a, 0x206f),
            (0xfe00, 0xfe0f),
            (0xfff9, 0xfffb),
            (0xe0000, 0xe007f),
        ]);
        assert_eq!(reported.len(), 1 + 2 + 1 + 4 + 6 + 16 + 3 + 128);
        for c in reported {
            assert!(is_hiding_char(c), "{}", code(c));
        }
    }

    #[test]
    fn private_use_unassigned_fillers_and_other_variation_selectors_hide_text() {
        for c in [
            '\u{e000}',
            '\u{f8ff}',
            '\u{f0000}',
            '\u{10fffd}',
            '\u{fffe}',
            '\u{ffff}',
            '\u{50000}',
            '\u{3164}',
            '\u{ffa0}',
            '\u{34f}',
            '\u{17b4}',
            '\u{180b}',
            '\u{e0100}',
            '\u{e01ef}',
            '\u{1d173}',
            '\u{600}',
        ] {
            assert!(is_hiding_char(c), "{}", code(c));
        }
    }

    #[test]
    fn ordinary_text_of_every_script_is_shown_as_itself() {
        let text = "a Z 0 ~ é ü ñ ç ø å ı İ ş Ş ğ Ğ ö Ö → … — « » € ¥ 漢字 かな 한국어 \
                    עברית العربية हिन्दी ไทย Ελληνικά кириллица 😀 💡 🚀 👍🏽 ✓ ∑ \u{a0} \u{301}";
        for c in text.chars() {
            assert!(!is_hiding_char(c), "{}", code(c));
        }
    }

    #[test]
    fn emoji_sequences_read_as_themselves_in_prose_and_nowhere_else() {
        let prose = |text: &str| {
            let mut previous = None;
            let mut hidden = Vec::new();
            for c in text.chars() {
                if is_hiding_char_in_prose(previous, c) {
                    hidden.push(code(c));
                }
                previous = Some(c);
            }
            hidden
        };
        for ordinary in ["❤️", "👩‍💻", "❤️‍🔥", "1️⃣", "☺︎", "👍🏽"]
        {
            assert!(
                prose(ordinary).is_empty(),
                "{ordinary}: {:?}",
                prose(ordinary)
            );
        }
        // After ordinary text, alone, or repeated to carry data, they are escaped.
        assert_eq!(prose("a\u{fe0f}"), ["U+FE0F"]);
        assert_eq!(prose("a\u{200d}b"), ["U+200D"]);
        assert_eq!(prose("\u{fe0f}"), ["U+FE0F"]);
        assert_eq!(prose("1\u{200d}"), ["U+200D"]);
        assert_eq!(
            prose("❤\u{fe00}"),
            ["U+FE00"],
            "other variation selectors stay escaped"
        );
        assert_eq!(prose("❤\u{e0041}"), ["U+E0041"], "tags stay escaped");
        // The strict set (approval arguments, chrome) escapes them everywhere.
        assert!(is_hiding_char('\u{fe0f}') && is_hiding_char('\u{200d}'));
    }
}
