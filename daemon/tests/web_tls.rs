//! The web client over TLS, against a real `taud` whose `[web]` names a certificate and key made at
//! test time (a self-signed certificate for `tau.test`, its `public_origin`'s host): the page, the
//! pairing link, sign-in and the API over TLS, a `Secure` cookie, the Host allowlist, a plain-HTTP
//! request that gets no answer and does not stop the listener, and a certificate or key that is
//! missing, not PEM or not a pair: `taud` refuses to start (exit 78) with one line naming the key
//! and the file, beyond loopback and on it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;

use crate::support::process::{Install, free_port, wait_for};
use crate::support::web::{Browser, TlsClient, WebHub, send_tls};

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

/// `taud`'s refusal (exit 78) with `[web]` listening on `listen` and these two files; its one line.
fn refused_with(listen: &str, cert: &std::path::Path, key: &std::path::Path) -> String {
    let install = Install::with_config(&format!(
        "[web]\nlisten = {listen:?}\ntls_cert = {:?}\ntls_key = {:?}\n",
        cert.display().to_string(),
        key.display().to_string()
    ));
    let (status, stderr) = install.run_to_exit();
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(install.state().is_none(), "the hub never ran: {stderr}");
    let line = stderr.trim().to_owned();
    assert_eq!(line.lines().count(), 1, "{stderr}");
    line
}

#[test]
fn a_bad_certificate_or_key_refuses_start_in_one_line_naming_the_key_and_file() {
    let good = TlsClient::self_signed(NAME);
    let (good_cert, good_key) = (
        good.files.path().join("cert.pem"),
        good.files.path().join("key.pem"),
    );
    let files = crate::support::temp::dir();
    let (bad_cert, bad_key) = (
        files.path().join("bad-cert.pem"),
        files.path().join("bad-key.pem"),
    );
    std::fs::write(&bad_cert, "not a certificate\n").unwrap();
    std::fs::write(&bad_key, "not a key\n").unwrap();
    let missing = files.path().join("missing.pem");
    let other = TlsClient::self_signed("other.test");
    let other_key = other.files.path().join("key.pem");
    let anywhere = format!("0.0.0.0:{}", free_port());
    for (listen, cert, key, names) in [
        (
            &anywhere,
            &missing,
            &good_key,
            vec![("web.tls_cert", &missing)],
        ),
        (
            &anywhere,
            &bad_cert,
            &good_key,
            vec![("web.tls_cert", &bad_cert)],
        ),
        (
            &anywhere,
            &good_cert,
            &missing,
            vec![("web.tls_key", &missing)],
        ),
        (
            &anywhere,
            &good_cert,
            &bad_key,
            vec![("web.tls_key", &bad_key)],
        ),
        (
            &anywhere,
            &good_cert,
            &other_key,
            vec![("web.tls_cert", &good_cert), ("web.tls_key", &other_key)],
        ),
        // On loopback too: a configured certificate that does not load is a configuration error.
        (
            &format!("127.0.0.1:{}", free_port()),
            &bad_cert,
            &bad_key,
            vec![("web.tls_cert", &bad_cert)],
        ),
    ] {
        let line = refused_with(listen, cert, key);
        for (name, file) in names {
            assert!(line.contains(name), "{name} in {line}");
            assert!(
                line.contains(&file.display().to_string()),
                "{} in {line}",
                file.display()
            );
        }
    }
    // The same files, good: the hub starts and serves the page over TLS.
    let web_port = free_port();
    let install = Install::with_config(&format!(
        "[web]\nlisten = \"127.0.0.1:{web_port}\"\n{}",
        good.config_lines()
    ));
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    wait_for("the web client", || {
        TcpStream::connect(("127.0.0.1", web_port)).ok()
    });
    let host = format!("127.0.0.1:{web_port}");
    let page = send_tls(&good, web_port, "GET", "/", &[("Host", &host)], "");
    assert_eq!(page.status, 200, "{}", page.body);
}
