//! From an MCP `CallToolResult` (as JSON) to what the model reads: text, image and resource blocks,
//! capped in size; `isError` as a failed call.
//!
//! Invariants: the blocks handed to the model never exceed [`MAX_RESULT_BYTES`] in total (text is
//! cut with a marker, a block that does not fit is replaced by a one-line placeholder); an image
//! becomes an image block only when it is valid base64 of a format Converse accepts (the format
//! read from its first bytes, so a wrong `mimeType` cannot make a provider refuse the whole
//! history), otherwise a one-line note naming its type and size; nothing in a result can change a
//! tier or start another call.

use serde_json::{Value, json};

use crate::message::{ImageBlock, ImageFormat, ImageSource, ToolResultContent};
use crate::tool::{ToolError, ToolOutput};

/// Most bytes of one result the model sees.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;

/// The marker after text that was cut.
pub const TRUNCATED: &str = "\n[… truncated by tau: the result was larger than 256 KiB]";

/// The model-facing output of a `CallToolResult`: `Ok` with its blocks, or `Failed` when the server
/// set `isError`.
pub fn to_output(result: &Value) -> Result<ToolOutput, ToolError> {
    let mut budget = MAX_RESULT_BYTES;
    let mut content = Vec::new();
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for block in blocks {
        if budget == 0 {
            break;
        }
        content.push(convert(block, &mut budget));
    }
    if content.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        content.push(text_block(structured.to_string(), &mut budget));
    }
    if result.get("isError") == Some(&Value::Bool(true)) {
        let text: Vec<String> = content.iter().map(ToolResultContent::as_text).collect();
        let text = if text.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            text.join("\n")
        };
        return Err(ToolError::Failed(text));
    }
    if content.is_empty() {
        content.push(ToolResultContent::Text(String::new()));
    }
    Ok(ToolOutput { content })
}

fn convert(block: &Value, budget: &mut usize) -> ToolResultContent {
    let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
    match text("type") {
        "text" => text_block(text("text").to_owned(), budget),
        "image" => image_block(text("mimeType"), text("data"), budget),
        "audio" => text_block(
            format!(
                "[audio {} of {} bytes (base64), not shown]",
                text("mimeType"),
                text("data").len()
            ),
            budget,
        ),
        "resource_link" => text_block(format!("link: {} ({})", text("uri"), text("name")), budget),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or(Value::Null);
            let field = |key: &str| resource.get(key).and_then(Value::as_str);
            let uri = field("uri").unwrap_or_default();
            match (field("text"), field("blob")) {
                (Some(body), _) => text_block(format!("resource {uri}:\n{body}"), budget),
                (None, Some(blob)) => binary_block(
                    "resource",
                    field("mimeType").unwrap_or("application/octet-stream"),
                    blob,
                    budget,
                ),
                (None, None) => text_block(format!("resource {uri} (empty)"), budget),
            }
        }
        other => text_block(format!("[a {other:?} block, not shown]"), budget),
    }
}

fn text_block(mut text: String, budget: &mut usize) -> ToolResultContent {
    if text.len() > *budget {
        let mut cut = budget.saturating_sub(TRUNCATED.len());
        while cut > 0 && !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(TRUNCATED);
        *budget = 0;
    } else {
        *budget -= text.len();
    }
    ToolResultContent::Text(text)
}

fn binary_block(kind: &str, mime: &str, data: &str, budget: &mut usize) -> ToolResultContent {
    if data.len() + 64 <= *budget {
        *budget -= data.len() + 64;
        ToolResultContent::Json(json!({"type": kind, "mimeType": mime, "data": data}))
    } else {
        text_block(
            format!(
                "[{kind} {mime} of {} bytes (base64), too large to show]",
                data.len()
            ),
            budget,
        )
    }
}

/// An image the model can see, or a note when it is too large, not base64 or of another format.
fn image_block(mime: &str, data: &str, budget: &mut usize) -> ToolResultContent {
    let size = data.len() / 4 * 3;
    if data.len() + 64 > *budget {
        return text_block(
            format!("[image {mime} of about {size} bytes, too large to show]"),
            budget,
        );
    }
    let format = sniff_format(data).or_else(|| ImageFormat::from_mime(mime));
    match format {
        Some(format) if is_base64(data) => {
            *budget -= data.len() + 64;
            ToolResultContent::Image(ImageBlock {
                format,
                source: ImageSource {
                    bytes: data.to_owned(),
                },
            })
        }
        Some(_) => text_block(
            format!(
                "[image {mime} of {} characters that are not base64, not shown]",
                data.len()
            ),
            budget,
        ),
        None => text_block(
            format!(
                "[image {mime} of about {size} bytes, not shown: only PNG, JPEG, GIF and WebP are sent to models]"
            ),
            budget,
        ),
    }
}

/// Whether `data` is padded or unpadded standard base64.
fn is_base64(data: &str) -> bool {
    let body = data.trim_end_matches('=');
    !data.is_empty()
        && data.len() - body.len() <= 2
        && data.len() % 4 != 1
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// The image format named by the first bytes of base64 `data` (PNG, JPEG, GIF or WebP magic).
fn sniff_format(data: &str) -> Option<ImageFormat> {
    let mut head = Vec::with_capacity(12);
    let mut bits: u32 = 0;
    let mut count = 0;
    for b in data.bytes().take(16) {
        let value = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => break,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            head.push(((bits >> count) & 0xff) as u8);
        }
    }
    match head.as_slice() {
        [0x89, b'P', b'N', b'G', ..] => Some(ImageFormat::Png),
        [0xff, 0xd8, 0xff, ..] => Some(ImageFormat::Jpeg),
        [b'G', b'I', b'F', b'8', ..] => Some(ImageFormat::Gif),
        [
            b'R',
            b'I',
            b'F',
            b'F',
            _,
            _,
            _,
            _,
            b'W',
            b'E',
            b'B',
            b'P',
            ..,
        ] => Some(ImageFormat::Webp),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_image_and_resources_reach_the_model() {
        let out = to_output(&json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
            {"type": "resource_link", "uri": "file:///b", "name": "b"},
        ]}))
        .unwrap();
        assert_eq!(
            out.content,
            vec![
                ToolResultContent::Text("hello".into()),
                ToolResultContent::Image(
                    ImageBlock::from_base64("image/png", "iVBORw0KGgo=").unwrap()
                ),
                ToolResultContent::Text("resource file:///a:\nbody".into()),
                ToolResultContent::Text("link: file:///b (b)".into()),
            ]
        );
    }

    #[test]
    fn images_are_checked_before_they_reach_the_model() {
        let out = to_output(&json!({"content": [
            {"type": "image", "mimeType": "image/jpeg", "data": "iVBORw0KGgo="},
            {"type": "image", "mimeType": "image/bmp", "data": "Qk0AAAA="},
            {"type": "image", "mimeType": "image/png", "data": "not base64!"},
        ]}))
        .unwrap();
        assert_eq!(
            out.content,
            vec![
                ToolResultContent::Image(
                    ImageBlock::from_base64("image/png", "iVBORw0KGgo=").unwrap()
                ),
                ToolResultContent::Text(
                    "[image image/bmp of about 6 bytes, not shown: only PNG, JPEG, GIF and WebP are sent to models]".into()
                ),
                ToolResultContent::Text(
                    "[image image/png of 11 characters that are not base64, not shown]".into()
                ),
            ]
        );
    }

    #[test]
    fn is_error_is_a_failed_call() {
        let err = to_output(
            &json!({"content": [{"type": "text", "text": "no such lamp"}], "isError": true}),
        )
        .unwrap_err();
        assert_eq!(err, ToolError::Failed("no such lamp".into()));
    }

    #[test]
    fn big_results_are_capped() {
        let big = "x".repeat(MAX_RESULT_BYTES * 3);
        let out = to_output(&json!({"content": [
            {"type": "text", "text": big},
            {"type": "text", "text": "never"},
        ]}))
        .unwrap();
        assert_eq!(out.content.len(), 1);
        let ToolResultContent::Text(text) = &out.content[0] else {
            panic!("text expected")
        };
        assert_eq!(text.len(), MAX_RESULT_BYTES);
        assert!(text.ends_with(TRUNCATED));
        let image = to_output(&json!({"content": [
            {"type": "image", "mimeType": "image/png", "data": "A".repeat(MAX_RESULT_BYTES)},
        ]}))
        .unwrap();
        assert_eq!(
            image.content,
            vec![ToolResultContent::Text(format!(
                "[image image/png of about {} bytes, too large to show]",
                MAX_RESULT_BYTES / 4 * 3
            ))]
        );
    }

    #[test]
    fn structured_content_stands_in_for_missing_blocks() {
        let out = to_output(&json!({"content": [], "structuredContent": {"t": 1}})).unwrap();
        assert_eq!(
            out.content,
            vec![ToolResultContent::Text("{\"t\":1}".into())]
        );
    }
}
