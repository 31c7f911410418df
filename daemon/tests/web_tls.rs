//! The web client over TLS, against a real `taud` whose `[web]` names a certificate and key made at
//! test time (a self-signed certificate for `tau.test`, its `public_origin`'s host): the page, the
//! pairing link, sign-in and the API over TLS, a `Secure` cookie, the Host allowlist, a plain-HTTP
//! request that gets no answer and does not stop the listener, and a certificate file that is not
//! one: the web client is skipped (as any hub service that cannot start) and `/status` says why.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;

use crate::support::process::{Install, free_port, get_status, wait_for};
use crate::support::web::{Browser, WebHub};

const NAME: &str = "tau.test";

#[test]
fn the_page_pairing_and_sign_in_work_over_tls_with_a_secure_cookie() {
    let web = WebHub::start_tls(NAME);
    let origin = format!("https://{NAME}:{}", web.web_port);
    assert_eq!(web.origin(), origin);

    let page = web.page("GET", "/", None, "");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.header("content-security-policy").is_some());
    assert!(page.body.contains("app.js"), "{}", page.body);

    let link = web.pair("laptop");
    assert!(
        link.starts_with(&format!("{origin}/#pair=")),
        "the link names the public origin: {link}"
    );
    let mut browser = Browser::enroll(&web, &link);
    let login = browser.login_with(&web, &browser.key.clone());
    assert_eq!(login.status, 200, "{}", login.body);
    let cookie = login.header("set-cookie").unwrap();
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    browser.login(&web);
    let boot = browser.get(&web, "/api/boot");
    assert_eq!(boot.status, 200, "{}", boot.body);
    assert_eq!(boot.json()["device"], "laptop");
    let opened = browser.post(&web, "/api/open", json!({"target": "new"}));
    assert_eq!(opened.status, 200, "{}", opened.body);
}

#[test]
fn over_tls_a_foreign_host_is_refused_and_plain_http_gets_no_answer() {
    let web = WebHub::start_tls(NAME);
    for host in ["evil.example", "127.0.0.1.evil.example"] {
        let answer = web.send("GET", "/api/boot", &[("Host", host)], "");
        assert_eq!(answer.status, 403, "Host {host}: {}", answer.body);
    }
    let own = web.host();
    assert_eq!(web.send("GET", "/", &[("Host", &own)], "").status, 200);

    // Plain HTTP on the TLS port: the handshake fails, nothing HTTP comes back.
    let mut plain = TcpStream::connect(("127.0.0.1", web.web_port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    plain
        .write_all(format!("GET / HTTP/1.1\r\nHost: {own}\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut raw = Vec::new();
    let _ = plain.read_to_end(&mut raw);
    assert!(
        !String::from_utf8_lossy(&raw).contains("HTTP/1.1"),
        "plain HTTP got an answer: {:?}",
        String::from_utf8_lossy(&raw)
    );
    // The failed handshake did not end the accept loop.
    assert_eq!(web.send("GET", "/", &[("Host", &own)], "").status, 200);
}

#[test]
fn a_certificate_file_that_is_not_one_leaves_the_web_client_off_and_says_why() {
    let files = tempfile::tempdir().unwrap();
    let (cert, key) = (files.path().join("cert.pem"), files.path().join("key.pem"));
    std::fs::write(&cert, "not a certificate\n").unwrap();
    std::fs::write(&key, "not a key\n").unwrap();
    let web_port = free_port();
    let install = Install::with_config(&format!(
        "[web]\nlisten = \"127.0.0.1:{web_port}\"\ntls_cert = {:?}\ntls_key = {:?}\n",
        cert.display().to_string(),
        key.display().to_string()
    ));
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    // Like any hub service that cannot start, it is skipped and /status says why, naming the key.
    let web = wait_for("the web client's report in /status", || {
        get_status(&install)["services"]
            .as_array()?
            .iter()
            .find(|s| s["name"] == "web")
            .cloned()
    });
    assert_eq!(web["state"], "failed", "{web}");
    let error = web["error"].as_str().unwrap();
    assert!(error.contains("web.tls_cert"), "{error}");
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(
        TcpStream::connect(("127.0.0.1", web_port)).is_err(),
        "nothing listens on the web port"
    );
}
