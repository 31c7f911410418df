//! The page, embedded in the binary (no build step, nothing fetched from another host): one HTML
//! file, one script and one style sheet under `web/page/`.
//!
//! Invariants: the HTML has no inline script or style (the CSP forbids both); every asset is
//! served with its exact content type and `nosniff`; the whole page stays under 150 KB even
//! uncompressed (a test measures it), so compressed it is far below the 150 KB budget.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The page.
pub const INDEX_HTML: &str = include_str!("page/index.html");
/// Its script.
pub const APP_JS: &str = include_str!("page/app.js");
/// Its style sheet.
pub const APP_CSS: &str = include_str!("page/app.css");

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

pub(super) async fn index() -> Response {
    asset(INDEX_HTML, "text/html; charset=utf-8")
}

pub(super) async fn script() -> Response {
    asset(APP_JS, "text/javascript; charset=utf-8")
}

pub(super) async fn style() -> Response {
    asset(APP_CSS, "text/css; charset=utf-8")
}

pub(super) async fn not_found() -> Response {
    super::signin::error(StatusCode::NOT_FOUND, "not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_weighs_under_150_kb_uncompressed() {
        let bytes = INDEX_HTML.len() + APP_JS.len() + APP_CSS.len();
        assert!(bytes < 150 * 1024, "{bytes} bytes");
    }

    #[test]
    fn the_page_has_no_inline_script_or_style_and_names_no_other_host() {
        let lower = INDEX_HTML.to_ascii_lowercase();
        assert!(lower.contains("<script src=\"/app.js\""));
        assert_eq!(
            lower.matches("<script").count(),
            1,
            "one external script only"
        );
        assert!(!lower.contains("<style"));
        assert!(!lower.contains(" style="));
        assert!(!lower.contains(" on"), "no inline event handlers");
        for text in [INDEX_HTML, APP_JS, APP_CSS] {
            assert!(!text.contains("http://") && !text.contains("https://"));
            assert!(!text.contains("localStorage") && !text.contains("sessionStorage"));
        }
    }
}
