//! The web client's browser protections, against a real `taud` over a real socket: the Origin
//! check on every state-changing request and on the event stream (another page, another loopback
//! port included), no CORS, the security headers, and the start-up refusal of a non-loopback
//! address without TLS. The Host allowlist (DNS rebinding) and the other advisories are
//! `web_advisories.rs`.

use serde_json::json;

use crate::support::process::Install;
use crate::support::web::{Browser, Sse, WebHub, send};

#[test]
fn every_answer_has_a_strict_policy_and_no_cors() {
    let web = WebHub::start();
    let host = web.host();
    let page = send(web.web_port, "GET", "/", &[("Host", &host)], "");
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert_eq!(page.header("x-frame-options").as_deref(), Some("DENY"));
    assert_eq!(
        page.header("x-content-type-options").as_deref(),
        Some("nosniff")
    );
    assert_eq!(
        page.header("referrer-policy").as_deref(),
        Some("no-referrer")
    );
    assert!(page.body.contains("<script src=\"/app.js\""));
    for (method, path, origin) in [
        ("GET", "/api/boot", "http://evil.example"),
        ("GET", "/api/boot", &web.origin() as &str),
        ("POST", "/api/login", "http://evil.example"),
        ("OPTIONS", "/api/turn", "http://evil.example"),
    ] {
        let answer = send(
            web.web_port,
            method,
            path,
            &[
                ("Host", &host),
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
            ],
            if method == "POST" { "{}" } else { "" },
        );
        assert!(
            !answer.head.to_ascii_lowercase().contains("access-control-"),
            "{method} {path} from {origin}: {}",
            answer.head
        );
        if method == "OPTIONS" {
            assert_eq!(answer.status, 405, "a preflight is never answered");
        }
    }
}

#[test]
fn a_foreign_origin_can_neither_act_nor_read_even_with_the_cookie() {
    let web = WebHub::start();
    let mut browser = Browser::enroll(&web, &web.pair("laptop"));
    browser.login(&web);
    let cookie = browser.cookie.clone().unwrap();
    let session = browser.new_session(&web);
    let host = web.host();
    let turn = json!({"session_id": session, "text": "hello"}).to_string();
    let other_loopback = format!("http://127.0.0.1:{}", web.web_port + 1);
    for origin in [
        "http://evil.example",
        "null",
        other_loopback.as_str(),
        &format!("http://localhost:{}", web.web_port),
    ] {
        let answer = send(
            web.web_port,
            "POST",
            "/api/turn",
            &[("Host", &host), ("Origin", origin), ("Cookie", &cookie)],
            &turn,
        );
        assert_eq!(answer.status, 403, "POST from {origin}: {}", answer.body);
        let stream = Sse::open(
            &web,
            &format!("/api/events?session={session}"),
            Some(&cookie),
            &[("Origin", origin)],
        );
        assert_eq!(stream.status, 403, "the stream from {origin}");
        let read = send(
            web.web_port,
            "GET",
            "/api/sessions",
            &[("Host", &host), ("Origin", origin), ("Cookie", &cookie)],
            "",
        );
        assert_eq!(read.status, 403, "a read from {origin}");
    }
    // A browser marks a request another site made; the stream refuses it even without Origin.
    let stream = Sse::open(
        &web,
        &format!("/api/events?session={session}"),
        Some(&cookie),
        &[("Sec-Fetch-Site", "cross-site")],
    );
    assert_eq!(stream.status, 403);
    // A state change without any Origin is refused too.
    let answer = send(
        web.web_port,
        "POST",
        "/api/turn",
        &[("Host", &host), ("Cookie", &cookie)],
        &turn,
    );
    assert_eq!(answer.status, 403, "{}", answer.body);
    // The page itself may.
    let answer = browser.post(
        &web,
        "/api/turn",
        json!({"session_id": session, "text": "hello"}),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    let stream = browser.stream(&web, &session);
    assert_eq!(stream.status, 200);
}

#[test]
fn a_non_loopback_address_without_tls_is_refused_at_start_in_one_line() {
    let install = Install::with_config("[web]\nlisten = \"0.0.0.0:8443\"\n");
    let (status, stderr) = install.run_to_exit();
    assert_eq!(status.code(), Some(78), "{stderr}");
    let line = stderr.trim();
    assert_eq!(line.lines().count(), 1, "{stderr}");
    assert!(line.contains("web.listen"), "{line}");
    assert!(
        line.contains("web.tls_cert") && line.contains("web.tls_key"),
        "{line}"
    );
}
