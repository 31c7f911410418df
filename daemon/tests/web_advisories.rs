//! The published advisories of the most used personal-agent gateway's web UI, each as a test that
//! would have caught it here, against a real `taud` over a real socket (the browser's side of the
//! same advisories is in `tests/python/drive_web.py`):
//!
//! - CVE-2026-25253, a token sent to another gateway named in a URL parameter:
//!   [`advisory_token_never_in_url`];
//! - CVE-2026-28472, a handshake that skipped device identity when a token was present:
//!   [`advisory_handshake_requires_device_identity_even_with_cookie_or_token`];
//! - PR #10930, an Origin check keyed on a client-declared id:
//!   [`advisory_origin_check_ignores_client_declared_id`];
//! - PR #16485, loopback trusting loopback: [`advisory_loopback_origin_is_not_trusted`];
//! - PR #58157, DNS rebinding: [`advisory_dns_rebinding_foreign_host_refused`];
//! - CVE-2026-25593, an unauthenticated local client acting:
//!   [`advisory_unauthenticated_local_client_cannot_act`].

use serde_json::json;

use crate::support::web::{Answer, Browser, Sse, WebHub, code_of, new_key, public_hex, send};

fn signed_in(web: &WebHub, name: &str) -> Browser {
    let mut browser = Browser::enroll(web, &web.pair(name));
    browser.login(web);
    browser
}

/// The cookie's value (after `tau_web=`).
fn cookie_value(browser: &Browser) -> String {
    let cookie = browser.cookie.clone().unwrap();
    cookie.split_once('=').unwrap().1.to_owned()
}

#[test]
fn advisory_token_never_in_url() {
    let web = WebHub::start();
    // The pairing link: nothing but the page's own address before the fragment.
    let url = web.pair("laptop");
    let (before, fragment) = url.split_once('#').unwrap();
    assert_eq!(before, format!("{}/", web.origin()), "{url}");
    assert!(
        fragment.starts_with("pair=") && !before.contains('?'),
        "{url}"
    );
    let browser = {
        let mut browser = Browser::enroll(&web, &url);
        browser.login(&web);
        browser
    };
    let (value, hub_token) = (cookie_value(&browser), web.token());
    let session = browser.new_session(&web);

    // No answer the page can read carries the session's cookie value or the hub token.
    for path in [
        "/",
        "/app.js",
        "/api/boot",
        "/api/status",
        "/api/sessions",
        "/api/routines",
        "/api/nodes",
        "/api/pending",
    ] {
        let answer = browser.get(&web, path);
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        for secret in [&value, &hub_token] {
            assert!(
                !answer.body.contains(secret.as_str()),
                "{path} shows a secret"
            );
        }
    }
    let mut stream = browser.stream(&web, &session);
    let snapshot = stream.until("snapshot");
    assert!(!snapshot.data.to_string().contains(&value));

    // A secret in a URL never signs anything in: neither the cookie's value nor the hub token.
    let host = web.host();
    let origin = web.origin();
    for secret in [&value, &hub_token] {
        for path in [
            format!("/api/sessions?token={secret}"),
            format!("/api/sessions?tau_web={secret}"),
            format!("/api/sessions?access_token={secret}"),
            format!("/api/events?session={session}&token={secret}"),
        ] {
            let answer = send(
                web.web_port,
                "GET",
                &path,
                &[("Host", &host), ("Origin", &origin)],
                "",
            );
            assert_eq!(answer.status, 401, "{path}: {}", answer.body);
        }
    }

    // The page takes no address from its URL: it talks to its own origin only, by relative path.
    let script = browser.get(&web, "/app.js").body;
    for read in [
        "location.search",
        "location.href",
        "searchParams",
        "document.referrer",
    ] {
        assert!(!script.contains(read), "app.js reads {read}");
    }
    assert!(script.contains("fetch(path, init)"));
    assert_eq!(script.matches("fetch(").count(), 1, "one fetch, in api()");
    for call in script.split("api('").skip(1) {
        let path = call.split_once(", ").unwrap().1;
        assert!(path.starts_with("'/api/"), "a request to {path:.40}");
    }
    for opened in script.split("new EventSource(").skip(1) {
        assert!(opened.starts_with("'/api/events?"), "{opened:.40}");
    }
}

#[test]
fn advisory_handshake_requires_device_identity_even_with_cookie_or_token() {
    let web = WebHub::start();
    let laptop = signed_in(&web, "laptop");
    let phone = Browser::enroll(&web, &web.pair("phone"));
    let bearer = format!("Bearer {}", web.token());
    let (host, origin) = (web.host(), web.origin());
    let laptop_cookie = laptop.cookie.clone().unwrap();

    // The hub token opens nothing on the web port.
    for path in ["/api/sessions", "/api/status", "/api/routines"] {
        let answer = send(
            web.web_port,
            "GET",
            path,
            &[
                ("Host", &host),
                ("Origin", &origin),
                ("Authorization", &bearer),
            ],
            "",
        );
        assert_eq!(answer.status, 401, "{path}: {}", answer.body);
    }
    let stream = Sse::open(
        &web,
        "/api/events?session=x",
        None,
        &[("Authorization", &bearer)],
    );
    assert_eq!(stream.status, 401);

    // Sign-in without the device's own signature fails whatever else comes with it: the hub
    // token, a live cookie of another device, or the key of another device.
    let challenge = phone.challenge(&web).json()["challenge"]
        .as_str()
        .unwrap()
        .to_owned();
    for (signature, extra) in [
        ("", ("Authorization", bearer.as_str())),
        ("00", ("Cookie", laptop_cookie.as_str())),
        ("", ("Cookie", laptop_cookie.as_str())),
    ] {
        let body =
            json!({"device_id": phone.device_id, "challenge": challenge, "signature": signature});
        let answer = send(
            web.web_port,
            "POST",
            "/api/login",
            &[("Host", &host), ("Origin", &origin), extra],
            &body.to_string(),
        );
        assert_eq!(answer.status, 403, "{extra:?}: {}", answer.body);
        assert!(answer.header("set-cookie").is_none());
    }
    let answer = phone.login_with(&web, &laptop.key);
    assert_eq!(answer.status, 403, "another device's key: {}", answer.body);
    assert!(answer.header("set-cookie").is_none());
    // A pairing code enrolls a key; it never signs in.
    let enrolled = web.page(
        "POST",
        "/api/enroll",
        None,
        &json!({"code": code_of(&web.pair("tablet")), "public_key": public_hex(&new_key())})
            .to_string(),
    );
    assert_eq!(enrolled.status, 200, "{}", enrolled.body);
    assert!(enrolled.header("set-cookie").is_none());
    // A live cookie stops working the moment its device is revoked: identity is checked on every
    // request, not once at the handshake.
    assert_eq!(laptop.get(&web, "/api/sessions").status, 200);
    let revoked = web.owner(
        "POST",
        "/web/revoke",
        &json!({"name": "laptop"}).to_string(),
    );
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert_eq!(laptop.get(&web, "/api/sessions").status, 401);
}

/// A state change and a stream open with a valid cookie, a foreign Origin and `extra` headers.
fn foreign(
    web: &WebHub,
    cookie: &str,
    session: &str,
    origin: &str,
    extra: &[(&str, &str)],
) -> (Answer, u16) {
    let host = web.host();
    let mut headers = vec![("Host", host.as_str()), ("Cookie", cookie)];
    if !origin.is_empty() {
        headers.push(("Origin", origin));
    }
    headers.extend_from_slice(extra);
    let turn = json!({
        "session_id": session, "text": "hello", "client": "tau-web", "client_id": "tau-web",
        "origin": web.origin(),
    });
    let posted = send(
        web.web_port,
        "POST",
        "/api/turn",
        &headers,
        &turn.to_string(),
    );
    let mut stream_headers = extra.to_vec();
    if !origin.is_empty() {
        stream_headers.push(("Origin", origin));
    }
    let stream = Sse::open(
        web,
        &format!("/api/events?session={session}"),
        Some(cookie),
        &stream_headers,
    );
    (posted, stream.status)
}

/// Whether any turn was stored on `session`.
fn no_turn(web: &WebHub, browser: &Browser, session: &str) -> bool {
    let messages = browser
        .get(web, &format!("/api/messages?session={session}"))
        .json();
    messages["messages"].as_array().unwrap().is_empty()
}

#[test]
fn advisory_origin_check_ignores_client_declared_id() {
    let web = WebHub::start();
    let browser = signed_in(&web, "laptop");
    let cookie = browser.cookie.clone().unwrap();
    let session = browser.new_session(&web);
    let (own_host, own_origin) = (web.host(), web.origin());
    let referer = format!("{own_origin}/");
    let forwarded = format!("host={own_host};proto=http");
    // Everything a client could declare about itself, all naming this page.
    let declared: Vec<(&str, &str)> = vec![
        ("X-Client-Id", "tau-web"),
        ("X-Tau-Client", "web"),
        ("X-Requested-With", "XMLHttpRequest"),
        ("X-Forwarded-Host", &own_host),
        ("X-Forwarded-Proto", "http"),
        ("X-Forwarded-For", "127.0.0.1"),
        ("Forwarded", &forwarded),
        ("Referer", &referer),
        ("User-Agent", "tau-web"),
        ("Sec-Fetch-Site", "same-origin"),
    ];
    for origin in ["http://evil.example", "null", "chrome-extension://tau-web"] {
        let (posted, stream) = foreign(&web, &cookie, &session, origin, &declared);
        assert_eq!(posted.status, 403, "POST from {origin}: {}", posted.body);
        assert_eq!(stream, 403, "the stream from {origin}");
    }
    // No Origin at all: the declared ones do not stand in for it on a state change.
    let (posted, _) = foreign(&web, &cookie, &session, "", &declared);
    assert_eq!(posted.status, 403, "{}", posted.body);
    assert!(
        no_turn(&web, &browser, &session),
        "a refused request started a turn"
    );
    // Only the Origin a browser sets for this page counts.
    let answer = browser.post(
        &web,
        "/api/turn",
        json!({"session_id": session, "text": "hello"}),
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
}

#[test]
fn advisory_loopback_origin_is_not_trusted() {
    let web = WebHub::start();
    let browser = signed_in(&web, "laptop");
    let cookie = browser.cookie.clone().unwrap();
    let session = browser.new_session(&web);
    let port = web.web_port;
    for origin in [
        format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        "http://127.0.0.1".to_owned(),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
        format!("https://127.0.0.1:{port}"),
    ] {
        let (posted, stream) = foreign(&web, &cookie, &session, &origin, &[]);
        assert_eq!(posted.status, 403, "POST from {origin}: {}", posted.body);
        assert_eq!(stream, 403, "the stream from {origin}");
    }
    assert!(no_turn(&web, &browser, &session));
}

#[test]
fn advisory_dns_rebinding_foreign_host_refused() {
    let web = WebHub::start();
    let port = web.web_port;
    let browser = signed_in(&web, "laptop");
    let cookie = browser.cookie.clone().unwrap();
    let session = browser.new_session(&web);
    let events = format!("/api/events?session={session}");
    // A name that resolves to the hub is still another site: every path refused, with or
    // without the cookie, with the Origin such a page would send, or none.
    for host in [
        "evil.example".to_owned(),
        format!("evil.example:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
        format!("10.1.2.3:{port}"),
    ] {
        let rebound_origin = format!("http://{host}");
        for path in [
            "/",
            "/app.js",
            "/api/boot",
            "/api/sessions",
            &events,
            "/nowhere",
        ] {
            for headers in [
                vec![("Host", host.as_str())],
                vec![("Host", host.as_str()), ("Cookie", cookie.as_str())],
                vec![
                    ("Host", host.as_str()),
                    ("Origin", rebound_origin.as_str()),
                    ("Cookie", cookie.as_str()),
                ],
                vec![("Host", host.as_str()), ("X-Forwarded-Host", "127.0.0.1")],
            ] {
                let answer = send(port, "GET", path, &headers, "");
                assert_eq!(
                    answer.status, 403,
                    "{path} with {headers:?}: {}",
                    answer.body
                );
                assert!(answer.header("content-security-policy").is_some());
            }
        }
        for path in ["/api/turn", "/api/challenge", "/api/enroll", "/api/login"] {
            let answer = send(
                port,
                "POST",
                path,
                &[
                    ("Host", &host),
                    ("Origin", &rebound_origin),
                    ("Cookie", &cookie),
                ],
                &json!({"session_id": session, "text": "hello"}).to_string(),
            );
            assert_eq!(
                answer.status, 403,
                "POST {path} with Host {host}: {}",
                answer.body
            );
        }
    }
    let answer = send(port, "GET", "/", &[], "");
    assert_eq!(answer.status, 403, "no Host");
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "[::1]".to_owned(),
    ] {
        assert_eq!(
            send(port, "GET", "/", &[("Host", &host)], "").status,
            200,
            "Host {host}"
        );
    }
    assert!(no_turn(&web, &browser, &session));
}

#[test]
fn advisory_unauthenticated_local_client_cannot_act() {
    let web = WebHub::start();
    let owner = signed_in(&web, "laptop");
    let session = owner.new_session(&web);
    // From loopback, with this page's own Host and Origin, but not signed in: nothing answers
    // beyond the sign-in steps.
    for (method, path, body) in [
        ("GET", "/api/sessions", json!(null)),
        ("GET", "/api/status", json!(null)),
        ("GET", "/api/routines", json!(null)),
        ("GET", "/api/nodes", json!(null)),
        ("GET", "/api/pending", json!(null)),
        (
            "GET",
            &format!("/api/messages?session={session}") as &str,
            json!(null),
        ),
        ("POST", "/api/open", json!({"target": "new"})),
        (
            "POST",
            "/api/turn",
            json!({"session_id": session, "text": "hello"}),
        ),
        ("POST", "/api/cancel", json!({"session_id": session})),
        (
            "POST",
            "/api/decide",
            json!({"approval_id": "a", "decision": "approved", "stream_key": "k"}),
        ),
    ] {
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let answer = web.page(method, path, None, &body);
        assert_eq!(answer.status, 401, "{method} {path}: {}", answer.body);
    }
    let stream = Sse::open(&web, &format!("/api/events?session={session}"), None, &[]);
    assert_eq!(stream.status, 401);
    // The owner's routes and any configuration are not on the web port at all.
    for path in ["/web/pair", "/web/revoke", "/api/config", "/config"] {
        assert_eq!(web.page("POST", path, None, "{}").status, 404, "{path}");
    }
    assert!(no_turn(&web, &owner, &session));
}
