//! Wrapping text to a width in terminal columns: at spaces when it can, inside a word when it must.
//!
//! Invariants: no returned line is wider than `width` (for `width >= 2`; a wide character never
//! fits in one column and gets a line of its own); every character of the input except the line
//! breaks and the spaces a break replaces is kept, in order.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `text` wrapped to `width` columns (an empty line for an empty input line).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut out = Vec::new();
    for source in text.split('\n') {
        let mut line = String::new();
        let mut used = 0;
        for word in source.split_inclusive(' ') {
            let word_width = word.trim_end_matches(' ').width();
            if used > 0 && used + word_width > width {
                out.push(line.trim_end_matches(' ').to_owned());
                line.clear();
                used = 0;
            }
            for c in word.chars() {
                let w = c.width().unwrap_or(0);
                if used + w > width && used > 0 && c != ' ' {
                    out.push(std::mem::take(&mut line));
                    used = 0;
                }
                line.push(c);
                used += w;
            }
        }
        out.push(line.trim_end_matches(' ').to_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_spaces_and_splits_long_words() {
        assert_eq!(wrap("hello big world", 9), ["hello big", "world"]);
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("a\n\nb", 10), ["a", "", "b"]);
    }

    #[test]
    fn no_line_is_wider_than_the_width() {
        let text = "Merhaba dünya, ışıklar yanıyor 日本語のテキスト and some more words here";
        for width in 2..30 {
            for line in wrap(text, width) {
                assert!(line.width() <= width, "{width}: {line:?}");
            }
        }
    }
}
