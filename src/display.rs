//! Which characters of untrusted text (from a model, a tool, a hub message) must never reach a
//! person's screen as themselves, shared by the gate's argument formatter in `taud` and the
//! renderers of the clients.
//!
//! Invariant: one set everywhere: C0 and C1 control characters, DEL, the Unicode bidirectional
//! controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), the line/paragraph
//! separators (U+2028, U+2029) and the invisible zero-width characters (U+200B–U+200D, U+2060,
//! U+FEFF). Any of them can hide or reorder what a person reads.

/// Whether `c` could hide or reorder text, so it must be shown escaped.
pub fn is_hiding_char(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'
        | '\u{2066}'..='\u{2069}'
        | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_bidi_and_invisible_characters_hide_text() {
        for c in [
            '\0', '\t', '\n', '\x1b', '\u{7f}', '\u{85}', '\u{9f}', '\u{61c}', '\u{200b}',
            '\u{200e}', '\u{200f}', '\u{2028}', '\u{2029}', '\u{202a}', '\u{202e}', '\u{2060}',
            '\u{2066}', '\u{2069}', '\u{feff}',
        ] {
            assert!(is_hiding_char(c), "{:x}", u32::from(c));
        }
        for c in [
            'a', ' ', 'ı', 'ş', '→', '…', '\u{a0}', '\u{2010}', '\u{206a}', '😀',
        ] {
            assert!(!is_hiding_char(c), "{:x}", u32::from(c));
        }
    }
}
