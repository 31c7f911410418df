//! What the channel sends as HTML: escaping, splitting at Telegram's 4,096-character limit, and
//! the approval card's body.
//!
//! Invariants: every dynamic text goes through [`escape_html`] (or [`escape_prose_html`] for a
//! model's reply), which first makes its invisible characters visible by the rule every client
//! and the gate share (`tau_api::display`), never a list of its own; no chunk is longer than [`MAX_MESSAGE_CHARS`] and no
//! chunk ends inside an HTML entity; a card's arguments are cut at a character boundary to
//! [`MAX_CARD_ARGUMENT_BYTES`] with the full text's size and sha256 prefix shown.

use sha2::{Digest, Sha256};
use tau_client::sanitize::{sanitize, sanitize_prose};

use crate::texts::Texts;

/// Telegram's limit on a message's text.
pub const MAX_MESSAGE_CHARS: usize = 4096;
/// The most of a tool's arguments shown on a card.
pub const MAX_CARD_ARGUMENT_BYTES: usize = 3000;

/// Untrusted or hub text as HTML for `parse_mode: HTML`: every character that could hide or
/// reorder text written visibly by the clients' one rule (`tau_client::sanitize::sanitize`, the
/// gate's set), then `&`, `<`, `>` and `"` escaped.
pub fn escape_html(text: &str) -> String {
    markup_inert(&sanitize(text))
}

/// A model's reply as HTML: as [`escape_html`], except that emoji sequences read as themselves,
/// as they do in `tau chat` (`tau_client::sanitize::sanitize_prose`).
pub fn escape_prose_html(text: &str) -> String {
    markup_inert(&sanitize_prose(None, text))
}

/// `text` with `&`, `<`, `>` and `"` as entities.
fn markup_inert(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Splits escaped HTML into chunks of at most [`MAX_MESSAGE_CHARS`] characters, preferring a
/// line break, never cutting an entity (`&amp;`) in two.
pub fn split_message(html: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut rest = html;
    while rest.chars().count() > MAX_MESSAGE_CHARS {
        let limit = rest
            .char_indices()
            .nth(MAX_MESSAGE_CHARS)
            .map_or(rest.len(), |(i, _)| i);
        let mut cut = rest[..limit].rfind('\n').map_or(limit, |i| i + 1);
        if cut < limit / 2 {
            cut = limit;
        }
        // Step back out of an entity.
        if let Some(amp) = rest[..cut].rfind('&')
            && !rest[amp..cut].contains(';')
            && amp > 0
        {
            cut = amp;
        }
        chunks.push(rest[..cut].to_owned());
        rest = &rest[cut..];
    }
    if !rest.is_empty() || chunks.is_empty() {
        chunks.push(rest.to_owned());
    }
    chunks
}

/// What a card says about one approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardContent {
    pub tool: String,
    pub arguments: String,
    pub effect: String,
    pub timeout_minutes: u64,
}

/// The card's HTML: title, effect, arguments in `<pre>` (cut with size and digest), expiry.
pub fn card_html(texts: &Texts, card: &CardContent) -> String {
    let tool = escape_html(&card.tool);
    let mut html = format!(
        "<b>{}</b>\n",
        texts.get("telegram.card_title", &[("tool", &tool)])
    );
    if !card.effect.is_empty() {
        html.push_str(&format!("<i>{}</i>\n", escape_html(&card.effect)));
    }
    let (shown, cut) = cut_at_char_boundary(&card.arguments, MAX_CARD_ARGUMENT_BYTES);
    html.push_str(&format!("<pre>{}</pre>\n", escape_html(shown)));
    if cut {
        let digest = hex::encode(Sha256::digest(card.arguments.as_bytes()));
        let bytes = card.arguments.len();
        let prefix = &digest[..16];
        html.push_str(&texts.get(
            "telegram.card_truncated",
            &[("bytes", &bytes), ("digest", &prefix)],
        ));
        html.push('\n');
    }
    html.push_str(&texts.get(
        "telegram.card_expires",
        &[("minutes", &card.timeout_minutes.max(1))],
    ));
    html
}

/// A card's HTML once decided: the outcome line on top, the body kept, the expiry line dropped.
pub fn ended_card_html(body: &str, outcome: &str) -> String {
    let kept = body.rsplit_once('\n').map_or(body, |(head, _)| head);
    format!("<b>{}</b>\n{kept}", escape_html(outcome))
}

fn cut_at_char_boundary(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tau_api::lang::Lang;

    #[test]
    fn escaping_makes_markup_and_hidden_characters_inert() {
        let shown = escape_html("<script>&\u{202E}x\u{1b}[31m");
        assert_eq!(shown, "&lt;script&gt;&amp;\\u{202e}x\\u{1b}[31m");
    }

    /// The characters a hand list missed: tags, a soft hyphen, a variation selector, private
    /// use, a Hangul filler. Each is shown as an escape on a card and in a reply.
    #[test]
    fn invisible_characters_beyond_controls_and_bidi_are_shown() {
        for (c, shown) in [
            ('\u{e0041}', "\\u{e0041}"),
            ('\u{ad}', "\\u{ad}"),
            ('\u{fe0f}', "\\u{fe0f}"),
            ('\u{e000}', "\\u{e000}"),
            ('\u{3164}', "\\u{3164}"),
        ] {
            let text = format!("rm{c} -rf");
            assert_eq!(escape_html(&text), format!("rm{shown} -rf"));
            assert_eq!(escape_prose_html(&text), format!("rm{shown} -rf"));
        }
    }

    /// A reply's emoji keep their presentation selector and joiner, as in `tau chat`; on a card
    /// they are shown escaped.
    #[test]
    fn a_reply_keeps_emoji_sequences_and_a_card_does_not() {
        let heart = "\u{2764}\u{fe0f} <3";
        assert_eq!(escape_prose_html(heart), "\u{2764}\u{fe0f} &lt;3");
        assert_eq!(escape_html(heart), "\u{2764}\\u{fe0f} &lt;3");
    }

    #[test]
    fn long_text_splits_under_the_limit_without_cutting_entities() {
        let text = escape_html(&"a&b ".repeat(2000));
        let chunks = split_message(&text);
        assert!(chunks.len() > 1);
        for chunk in &chunks {
            assert!(chunk.chars().count() <= MAX_MESSAGE_CHARS);
            assert!(!chunk.ends_with("&amp"), "{}", &chunk[chunk.len() - 10..]);
        }
        assert_eq!(chunks.concat(), text);
    }

    #[test]
    fn a_huge_card_is_cut_with_its_digest() {
        let texts = Texts::new(Lang::En).unwrap();
        let card = CardContent {
            tool: "t<b>".into(),
            arguments: "é".repeat(3000),
            effect: "moves".into(),
            timeout_minutes: 10,
        };
        let html = card_html(&texts, &card);
        assert!(html.contains("t&lt;b&gt;"));
        assert!(html.contains("truncated: 6000 bytes, sha256 "));
        assert!(html.chars().count() < MAX_MESSAGE_CHARS);
    }
}
