//! How tool arguments are shown to a person deciding an approval.
//!
//! Invariants: the output is JSON with object keys sorted (whatever order or map type serde_json was
//! built with), `", "` and `": "` separators, and every character that could hide or reorder text
//! written as `\uXXXX` (a surrogate pair past U+FFFF, so the output stays valid JSON): the set of
//! [`tau_api::display::is_hiding_char`], decided by Unicode category and `Default_Ignorable_Code_Point`
//! (controls, format characters such as bidirectional controls, zero-width characters, invisible
//! operators and tags, private use, unassigned, line/paragraph separators, variation selectors,
//! fillers). So a model cannot hide part of what it asked for.

use serde_json::Value;

/// The arguments as sorted JSON with control and bidirectional characters escaped.
pub fn format_approval_arguments(arguments: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, arguments);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, key);
                out.push_str(": ");
                if let Some(item) = map.get(key) {
                    write_value(out, item);
                }
            }
            out.push('}');
        }
    }
}

/// Whether `c` must be shown as `\uXXXX` (the set every renderer of tau shares).
fn must_escape(c: char) -> bool {
    tau_api::display::is_hiding_char(c)
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if must_escape(c) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_at_every_level() {
        let value = json!({"b": 1, "a": {"z": true, "y": null}, "c": [2, "x"]});
        assert_eq!(
            format_approval_arguments(&value),
            r#"{"a": {"y": null, "z": true}, "b": 1, "c": [2, "x"]}"#
        );
    }

    #[test]
    fn matches_the_prompt_example() {
        assert_eq!(
            format_approval_arguments(&json!({"action": "turn on the desk lamp"})),
            r#"{"action": "turn on the desk lamp"}"#
        );
    }

    #[test]
    fn escapes_control_and_bidirectional_characters() {
        let hidden =
            "on\u{202e}ffo\u{2066}x\u{2069}\u{200e}\u{200f}\u{61c}\n\t\u{1b}[2J\u{7f}\u{85}";
        let shown = format_approval_arguments(&json!({ "action": hidden }));
        assert_eq!(
            shown,
            r#"{"action": "on\u202effo\u2066x\u2069\u200e\u200f\u061c\u000a\u0009\u001b[2J\u007f\u0085"}"#
        );
        for c in shown.chars() {
            assert!(!must_escape(c), "unescaped {c:?}");
        }
    }

    #[test]
    fn escapes_every_listed_bidi_character() {
        let listed = [
            0x61c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068,
            0x2069,
        ];
        for code in listed {
            let c = char::from_u32(code).unwrap();
            let shown = format_approval_arguments(&json!(c.to_string()));
            assert_eq!(shown, format!("\"\\u{code:04x}\""));
        }
    }

    /// The invisible characters a model could hide text with, each escaped, and the arguments still
    /// the same JSON value.
    #[test]
    fn escapes_every_invisible_character_of_the_report() {
        let ranges = [
            (0xad, 0xad),
            (0x115f, 0x1160),
            (0x180e, 0x180e),
            (0x2061, 0x2064),
            (0x206a, 0x206f),
            (0xfe00, 0xfe0f),
            (0xfff9, 0xfffb),
            (0xe0000, 0xe007f),
        ];
        for (start, end) in ranges {
            for code in start..=end {
                let Some(c) = char::from_u32(code) else {
                    continue;
                };
                let value = json!({ "path": format!("a{c}b") });
                let shown = format_approval_arguments(&value);
                assert!(!shown.contains(c), "U+{code:04X} shown as itself: {shown}");
                let mut units = [0u16; 2];
                let escaped: String = c
                    .encode_utf16(&mut units)
                    .iter()
                    .map(|unit| format!("\\u{unit:04x}"))
                    .collect();
                assert_eq!(shown, format!(r#"{{"path": "a{escaped}b"}}"#));
                let back: Value = serde_json::from_str(&shown).unwrap();
                assert_eq!(back, value, "U+{code:04X}");
            }
        }
        let tag = format_approval_arguments(&json!("\u{e0041}"));
        assert_eq!(tag, r#""\udb40\udc41""#);
    }

    #[test]
    fn keeps_accented_turkish_cjk_and_emoji_text() {
        let text = "café déjà vu ışık İstanbul Çağ 漢字かな한국어 😀💡🚀 👍🏽 ∑→…";
        assert_eq!(
            format_approval_arguments(&json!({ "note": text })),
            format!(r#"{{"note": "{text}"}}"#)
        );
    }

    #[test]
    fn escapes_keys_quotes_and_backslashes_and_keeps_other_unicode() {
        let value = json!({"k\u{202e}ey": "say \"hi\" \\ ışık 💡"});
        assert_eq!(
            format_approval_arguments(&value),
            r#"{"k\u202eey": "say \"hi\" \\ ışık 💡"}"#
        );
    }

    #[test]
    fn output_is_valid_json_with_the_same_value() {
        let value = json!({"a": "x\u{2028}y\u{0}", "n": -1.5, "list": [{"b": 2, "a": 1}]});
        let back: Value = serde_json::from_str(&format_approval_arguments(&value)).unwrap();
        assert_eq!(back, value);
    }
}
