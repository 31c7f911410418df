//! Enrolment and sign-in of the web client, against a real `taud`: the one-time link (code in the
//! fragment, works once), the owner's routes (token only), the signed challenge as the only way to
//! a cookie (a code, a reused challenge or another key never gets one), revocation (sessions and
//! open streams end at once), and a session's end (its cookie's expiry, shortened for the test
//! with `TAU_WEB_SESSION_SECONDS`, or a sign-out) ending the streams opened with it.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::web::{Browser, WebHub, code_of, new_key, public_hex};

#[test]
fn the_pairing_link_carries_its_code_in_the_fragment_and_works_once() {
    let web = WebHub::start();
    let url = web.pair("phone");
    let (before, code) = url.split_once('#').unwrap();
    assert_eq!(before, format!("{}/", web.origin()), "{url}");
    assert!(
        !before.contains('?'),
        "nothing secret in the part a server sees: {url}"
    );
    assert!(code.starts_with("pair=") && code.len() > 30, "{url}");

    let browser = Browser::enroll(&web, &url);
    assert!(!browser.device_id.is_empty());
    // The same link again: refused, whatever key comes with it.
    let again = json!({"code": code_of(&url), "public_key": public_hex(&new_key())});
    let answer = web.page("POST", "/api/enroll", None, &again.to_string());
    assert_eq!(answer.status, 403, "{}", answer.body);
    // A code never issued: refused.
    let forged = json!({"code": "00".repeat(16), "public_key": public_hex(&new_key())});
    let answer = web.page("POST", "/api/enroll", None, &forged.to_string());
    assert_eq!(answer.status, 403, "{}", answer.body);
    // The name is taken now.
    let taken = web.owner("POST", "/web/pair", &json!({"name": "phone"}).to_string());
    assert_eq!(taken.status, 409, "{}", taken.body);
}

#[test]
fn the_owner_routes_need_the_hub_token() {
    let web = WebHub::start();
    for (method, path) in [
        ("POST", "/web/pair"),
        ("GET", "/web/devices"),
        ("POST", "/web/revoke"),
    ] {
        let answer = crate::support::web::send(
            web.install.port,
            method,
            path,
            &[("Host", "127.0.0.1"), ("Authorization", "Bearer wrong")],
            "{}",
        );
        assert_eq!(answer.status, 401, "{method} {path}: {}", answer.body);
    }
    // And the web port does not serve them at all.
    let answer = web.page("POST", "/web/pair", None, "{}");
    assert_eq!(answer.status, 404);
}

#[test]
fn only_a_signed_fresh_challenge_makes_a_session() {
    let web = WebHub::start();
    let url = web.pair("laptop");
    let mut browser = Browser::enroll(&web, &url);
    // Enrolment itself gives no cookie: a code is never a way in.
    let check = web.page(
        "POST",
        "/api/enroll",
        None,
        &json!({"code": code_of(&web.pair("second")), "public_key": public_hex(&new_key())})
            .to_string(),
    );
    assert_eq!(check.status, 200);
    assert!(check.header("set-cookie").is_none());
    // Nothing signed in yet.
    assert_eq!(browser.get(&web, "/api/sessions").status, 401);
    // Another key's signature: refused.
    let answer = browser.login_with(&web, &new_key());
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert!(answer.header("set-cookie").is_none());
    // A challenge is for its device only, and works once.
    let challenge = browser.challenge(&web).json()["challenge"]
        .as_str()
        .unwrap()
        .to_owned();
    let message = format!("tau-web-login\n{}\n{challenge}", web.origin());
    let signature: p256::ecdsa::Signature =
        p256::ecdsa::signature::Signer::sign(&browser.key, message.as_bytes());
    let login = json!({
        "device_id": browser.device_id,
        "challenge": challenge,
        "signature": hex::encode(signature.to_bytes()),
    });
    let first = web.page("POST", "/api/login", None, &login.to_string());
    assert_eq!(first.status, 200, "{}", first.body);
    let replay = web.page("POST", "/api/login", None, &login.to_string());
    assert_eq!(replay.status, 403, "a challenge works once");
    // The cookie: HttpOnly, SameSite=Strict, its value never in the body.
    let cookie = first.header("set-cookie").unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(
        cookie.contains("Path=/") && !cookie.contains("Secure"),
        "{cookie}"
    );
    let value = cookie.split(';').next().unwrap().split_once('=').unwrap().1;
    assert!(!first.body.contains(value));
    browser.login(&web);
    assert_eq!(browser.get(&web, "/api/sessions").status, 200);
    // A made-up cookie: refused.
    let forged = web.page("GET", "/api/sessions", Some("tau_web=00"), "");
    assert_eq!(forged.status, 401);
    // A device id nobody enrolled gets no challenge.
    let unknown = web.page(
        "POST",
        "/api/challenge",
        None,
        &json!({"device_id": "ff"}).to_string(),
    );
    assert_eq!(unknown.status, 403);
}

#[test]
fn devices_are_listed_without_keys_and_revoking_ends_sessions_and_streams_at_once() {
    let web = WebHub::start();
    let mut phone = Browser::enroll(&web, &web.pair("phone"));
    phone.login(&web);
    let mut laptop = Browser::enroll(&web, &web.pair("laptop"));
    laptop.login(&web);

    let devices = web.owner("GET", "/web/devices", "").json();
    let names: Vec<&str> = devices["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["phone", "laptop"]);
    assert!(devices["devices"][0]["last_seen_at"].is_string());
    assert!(devices["devices"][0]["enrolled_at"].is_string());
    assert!(!devices.to_string().contains(&public_hex(&phone.key)[2..20]));

    let session = phone.new_session(&web);
    let mut stream = phone.stream(&web, &session);
    assert_eq!(stream.status, 200);
    let snapshot = stream.until("snapshot");
    assert_eq!(snapshot.data["session"]["session_id"], session.as_str());

    let revoked = web.owner("POST", "/web/revoke", &json!({"name": "phone"}).to_string());
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert_eq!(revoked.json()["streams_ended"], 1);
    stream.until("revoked");
    assert!(stream.next().is_none(), "the stream ends at once");
    assert_eq!(phone.get(&web, "/api/sessions").status, 401);
    assert_eq!(phone.challenge(&web).status, 403);
    // The other device is untouched.
    assert_eq!(laptop.get(&web, "/api/sessions").status, 200);
    let again = web.owner("POST", "/web/revoke", &json!({"name": "phone"}).to_string());
    assert_eq!(again.status, 404);
    // The file keeps the revocation across a restart of the hub.
    let file = std::fs::read_to_string(web.install.paths().dir.join("web-devices.json")).unwrap();
    assert!(
        file.contains("\"version\": 1") && !file.contains("\"phone\""),
        "{file}"
    );
}

#[test]
fn a_stream_ends_when_its_session_cookie_expires_or_is_signed_out() {
    const LIFETIME: u64 = 3;
    let web = WebHub::start_with_env("", &[("TAU_WEB_SESSION_SECONDS", &LIFETIME.to_string())]);
    let mut browser = Browser::enroll(&web, &web.pair("laptop"));
    let before_login = Instant::now();
    let login = browser.login_with(&web, &browser.key.clone());
    assert_eq!(login.status, 200, "{}", login.body);
    let cookie = login.header("set-cookie").unwrap();
    assert!(cookie.contains(&format!("Max-Age={LIFETIME}")), "{cookie}");
    browser.cookie = Some(cookie.split(';').next().unwrap().to_owned());
    let session = browser.new_session(&web);
    let mut stream = browser.stream(&web, &session);
    assert_eq!(stream.status, 200);
    stream.until("snapshot");
    // Nothing else comes until the cookie's expiry; then a last `expired` and the end.
    let last = stream.next().expect("an event before the end");
    assert_eq!(last.event, "expired", "{last:?}");
    assert!(
        before_login.elapsed() >= Duration::from_secs(LIFETIME),
        "the stream ended before its cookie expired ({:?})",
        before_login.elapsed()
    );
    assert!(stream.next().is_none(), "the stream ends");
    assert_eq!(browser.get(&web, "/api/sessions").status, 401);
    let refused = browser.stream(&web, &session);
    assert_eq!(refused.status, 401, "an expired cookie opens no stream");

    // The device is still enrolled: a fresh signature signs it in again; signing out ends the
    // stream opened with that session at once.
    let before_login = Instant::now();
    browser.login(&web);
    let mut stream = browser.stream(&web, &session);
    stream.until("snapshot");
    let out = browser.post(&web, "/api/logout", json!({}));
    assert_eq!(out.status, 200, "{}", out.body);
    assert_eq!(stream.until("expired").event, "expired");
    assert!(
        before_login.elapsed() < Duration::from_secs(LIFETIME),
        "at the sign-out, not at the cookie's expiry ({:?})",
        before_login.elapsed()
    );
    assert!(stream.next().is_none(), "the stream ends");
    assert!(before_login.elapsed() < Duration::from_secs(LIFETIME));
}
