//! Helpers of the web client tests: a real `taud` with `[web] listen` on a free loopback port
//! (plain, or TLS with a self-signed certificate made at test time), a raw HTTP/1.1 client over TCP
//! or TLS (every header under the test's control, so a foreign Host or Origin can be sent), the
//! owner's pairing calls on the control port, a browser stand-in that enrolls a P-256 key and signs
//! challenges as the page does, and a Server-Sent Events reader (plain TCP) with deadlines.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use rustls::pki_types::ServerName;
use serde_json::{Value, json};

use super::process::{DEADLINE, Hub, Install, free_port, wait_for};

/// A response: status, head (lowercased header lines) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// A header's value (name lowercase).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim().eq_ignore_ascii_case(name)).then(|| value.trim().to_owned())
        })
    }
}

/// Sends one request on a fresh connection and reads the whole answer.
pub fn send(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    exchange(&mut stream, &request(method, path, headers, body))
}

/// The same over TLS: the server must present a certificate for `name` that `tls` trusts.
pub fn send_tls(
    tls: &TlsClient,
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let name = ServerName::try_from(tls.name.clone()).unwrap();
    let connection = rustls::ClientConnection::new(Arc::clone(&tls.config), name).unwrap();
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    exchange(&mut stream, &request(method, path, headers, body))
}

fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        request.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    request
}

/// Writes `request` and reads until the server closes (a TLS peer that closes without
/// `close_notify` ends the answer too).
fn exchange(stream: &mut (impl Read + Write), request: &str) -> Answer {
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    if let Err(e) = stream.read_to_end(&mut raw) {
        assert!(
            e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty(),
            "{e}"
        );
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer: {text:?}"));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Answer {
        status,
        head: head.to_owned(),
        body,
    }
}

/// A TLS client that trusts one self-signed certificate, made at test time for `name`, whose
/// files (`cert.pem`, `key.pem`) the hub is given.
pub struct TlsClient {
    pub config: Arc<rustls::ClientConfig>,
    pub name: String,
    pub files: crate::support::temp::TestDir,
}

impl TlsClient {
    pub fn self_signed(name: &str) -> Self {
        let made = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        let files = crate::support::temp::dir();
        std::fs::write(files.path().join("cert.pem"), made.cert.pem()).unwrap();
        std::fs::write(
            files.path().join("key.pem"),
            made.signing_key.serialize_pem(),
        )
        .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(made.cert.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Self {
            config: Arc::new(config),
            name: name.to_owned(),
            files,
        }
    }

    /// `[web]`'s lines for these files.
    pub fn config_lines(&self) -> String {
        let path = |file: &str| self.files.path().join(file).display().to_string();
        format!(
            "tls_cert = {:?}\ntls_key = {:?}\n",
            path("cert.pem"),
            path("key.pem")
        )
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// A running hub with the web client.
pub struct WebHub {
    pub hub: Hub,
    pub web_port: u16,
    /// Set when the web client serves TLS: the page is then `https://<name>:<port>`.
    pub tls: Option<TlsClient>,
    /// Declared last, so dropped last: what writes into it is gone first.
    pub install: Install,
}

impl WebHub {
    pub fn start() -> Self {
        Self::start_with("")
    }

    /// A hub with `[web] listen` on a free port and `extra` appended to tau.toml.
    pub fn start_with(extra: &str) -> Self {
        Self::start_with_env(extra, &[])
    }

    /// The same, with `env` added to the hub's environment (test knobs).
    pub fn start_with_env(extra: &str, env: &[(&str, &str)]) -> Self {
        Self::start_config(
            |web_port| {
                format!(
                    "[hub]\nheartbeat_seconds = 1\n\n[web]\nlisten = \"127.0.0.1:{web_port}\"\n{extra}"
                )
            },
            env,
        )
    }

    /// A hub whose whole tau.toml `config` makes from the web port, with `env` added.
    pub fn start_config(config: impl FnOnce(u16) -> String, env: &[(&str, &str)]) -> Self {
        let web_port = free_port();
        let mut install = Install::with_config(&config(web_port));
        for (name, value) in env {
            install
                .extra_env
                .push(((*name).to_owned(), (*value).to_owned()));
        }
        let hub = install.spawn();
        install.wait_ready(hub.pid());
        wait_for("the web client", || {
            TcpStream::connect(("127.0.0.1", web_port)).ok()
        });
        Self {
            install,
            hub,
            web_port,
            tls: None,
        }
    }

    /// A hub whose web client serves TLS with a certificate made now for `name`, which is its
    /// `public_origin`'s host.
    pub fn start_tls(name: &str) -> Self {
        let tls = TlsClient::self_signed(name);
        let web_port = free_port();
        let install = Install::with_config(&format!(
            "[hub]\nheartbeat_seconds = 1\n\n[web]\nlisten = \"127.0.0.1:{web_port}\"\n\
             public_origin = \"https://{name}:{web_port}\"\n{}",
            tls.config_lines()
        ));
        let hub = install.spawn();
        install.wait_ready(hub.pid());
        wait_for("the web client", || {
            TcpStream::connect(("127.0.0.1", web_port)).ok()
        });
        Self {
            install,
            hub,
            web_port,
            tls: Some(tls),
        }
    }

    pub fn host(&self) -> String {
        match &self.tls {
            Some(tls) => format!("{}:{}", tls.name, self.web_port),
            None => format!("127.0.0.1:{}", self.web_port),
        }
    }

    pub fn origin(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.host())
    }

    /// One request to the web client's port, over TLS when it serves TLS.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        match &self.tls {
            Some(tls) => send_tls(tls, self.web_port, method, path, headers, body),
            None => send(self.web_port, method, path, headers, body),
        }
    }

    /// The hub token (the owner's, on the control port).
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.install.paths().token_file)
            .unwrap()
            .trim()
            .to_owned()
    }

    /// An owner's call on the control port with the hub token.
    pub fn owner(&self, method: &str, path: &str, body: &str) -> Answer {
        let bearer = format!("Bearer {}", self.token());
        send(
            self.install.port,
            method,
            path,
            &[("Host", "127.0.0.1"), ("Authorization", &bearer)],
            body,
        )
    }

    /// `tau web pair --name NAME`: the link.
    pub fn pair(&self, name: &str) -> String {
        let answer = self.owner("POST", "/web/pair", &json!({"name": name}).to_string());
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.json()["url"].as_str().unwrap().to_owned()
    }

    /// A request to the web client from its own page (its Host and Origin), with `cookie`.
    pub fn page(&self, method: &str, path: &str, cookie: Option<&str>, body: &str) -> Answer {
        let (host, origin) = (self.host(), self.origin());
        let mut headers = vec![("Host", host.as_str()), ("Origin", origin.as_str())];
        if let Some(cookie) = cookie {
            headers.push(("Cookie", cookie));
        }
        self.send(method, path, &headers, body)
    }
}

/// A browser stand-in: its key and, once signed in, its cookie.
pub struct Browser {
    pub key: SigningKey,
    pub device_id: String,
    pub cookie: Option<String>,
}

pub fn new_key() -> SigningKey {
    loop {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).unwrap();
        if let Ok(key) = SigningKey::from_slice(&secret) {
            return key;
        }
    }
}

pub fn public_hex(key: &SigningKey) -> String {
    hex::encode(key.verifying_key().to_encoded_point(false).as_bytes())
}

/// The code in a pairing link's fragment.
pub fn code_of(url: &str) -> String {
    url.split_once("#pair=").unwrap().1.to_owned()
}

impl Browser {
    /// Enrolls with the link's code; panics unless it is accepted.
    pub fn enroll(web: &WebHub, url: &str) -> Self {
        let key = new_key();
        let body = json!({"code": code_of(url), "public_key": public_hex(&key)}).to_string();
        let answer = web.page("POST", "/api/enroll", None, &body);
        assert_eq!(answer.status, 200, "{}", answer.body);
        let device_id = answer.json()["device_id"].as_str().unwrap().to_owned();
        Self {
            key,
            device_id,
            cookie: None,
        }
    }

    /// A fresh challenge for this device.
    pub fn challenge(&self, web: &WebHub) -> Answer {
        let body = json!({"device_id": self.device_id}).to_string();
        web.page("POST", "/api/challenge", None, &body)
    }

    /// Signs in as the page does: challenge, signature over prefix, origin and challenge.
    pub fn login_with(&self, web: &WebHub, key: &SigningKey) -> Answer {
        let challenge = self.challenge(web);
        assert_eq!(challenge.status, 200, "{}", challenge.body);
        let challenge = challenge.json()["challenge"].as_str().unwrap().to_owned();
        let message = format!("tau-web-login\n{}\n{challenge}", web.origin());
        let signature: Signature = key.sign(message.as_bytes());
        let body = json!({
            "device_id": self.device_id,
            "challenge": challenge,
            "signature": hex::encode(signature.to_bytes()),
        })
        .to_string();
        web.page("POST", "/api/login", None, &body)
    }

    pub fn login(&mut self, web: &WebHub) {
        let answer = self.login_with(web, &self.key.clone());
        assert_eq!(answer.status, 200, "{}", answer.body);
        let cookie = answer.header("set-cookie").unwrap();
        self.cookie = Some(cookie.split(';').next().unwrap().to_owned());
    }

    pub fn get(&self, web: &WebHub, path: &str) -> Answer {
        web.page("GET", path, self.cookie.as_deref(), "")
    }

    pub fn post(&self, web: &WebHub, path: &str, body: Value) -> Answer {
        web.page("POST", path, self.cookie.as_deref(), &body.to_string())
    }

    /// Opens a new session: its id.
    pub fn new_session(&self, web: &WebHub) -> String {
        let answer = self.post(web, "/api/open", json!({"target": "new"}));
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.json()["session"]["session_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Opens the session's event stream.
    pub fn stream(&self, web: &WebHub, session_id: &str) -> Sse {
        Sse::open(
            web,
            &format!("/api/events?session={session_id}"),
            self.cookie.as_deref(),
            &[],
        )
    }
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub event: String,
    pub id: Option<String>,
    pub data: Value,
}

/// A live event stream.
pub struct Sse {
    stream: TcpStream,
    buffer: String,
    pub status: u16,
    pub head: String,
    ended: bool,
}

impl Sse {
    pub fn open(web: &WebHub, path: &str, cookie: Option<&str>, extra: &[(&str, &str)]) -> Self {
        let mut request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n",
            web.host()
        );
        if let Some(cookie) = cookie {
            request.push_str(&format!("Cookie: {cookie}\r\n"));
        }
        for (name, value) in extra {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        let mut stream = TcpStream::connect(("127.0.0.1", web.web_port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut sse = Self {
            stream,
            buffer: String::new(),
            status: 0,
            head: String::new(),
            ended: false,
        };
        let end = Instant::now() + DEADLINE;
        while !sse.buffer.contains("\r\n\r\n") {
            assert!(Instant::now() < end, "no answer head");
            if !sse.fill() {
                break;
            }
        }
        let (head, rest) = sse
            .buffer
            .split_once("\r\n\r\n")
            .unwrap_or((&sse.buffer, ""));
        sse.status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        sse.head = head.to_owned();
        sse.buffer = rest.to_owned();
        sse
    }

    /// Reads more bytes; false at the end of the stream.
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        match self.stream.read(&mut chunk) {
            Ok(0) => {
                self.ended = true;
                false
            }
            Ok(n) => {
                self.buffer.push_str(&String::from_utf8_lossy(&chunk[..n]));
                true
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                true
            }
            Err(_) => {
                self.ended = true;
                false
            }
        }
    }

    /// The next event within the deadline; `None` when the stream ended.
    pub fn next(&mut self) -> Option<SseEvent> {
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(event) = self.take_event() {
                return Some(event);
            }
            // The chunked body's last chunk: the server ended the stream (the connection may
            // stay open for the next request).
            if self.buffer.trim_start_matches("\r\n").starts_with("0\r\n") {
                self.ended = true;
            }
            if self.ended {
                return None;
            }
            assert!(
                Instant::now() < end,
                "no event in time; buffer: {:?}",
                self.buffer
            );
            self.fill();
        }
    }

    /// The next event of type `kind` (a `session` event's `type`, or the SSE event name).
    pub fn until(&mut self, kind: &str) -> SseEvent {
        loop {
            let event = self
                .next()
                .unwrap_or_else(|| panic!("the stream ended before {kind}"));
            if event.event == kind || event.data["type"] == kind {
                return event;
            }
        }
    }

    /// Whether the stream ends (within the deadline), reading past any events.
    pub fn ends(&mut self) -> bool {
        while self.next().is_some() {}
        true
    }

    fn take_event(&mut self) -> Option<SseEvent> {
        // Chunked framing: drop the size lines, keep the payload.
        loop {
            let at = self.buffer.find("\n\n")?;
            let block: String = self.buffer[..at].to_owned();
            self.buffer = self.buffer[at + 2..].to_owned();
            let mut event = String::new();
            let mut id = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_owned();
                } else if let Some(v) = line.strip_prefix("id: ") {
                    id = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data.push_str(v);
                }
            }
            if !event.is_empty() {
                let data = serde_json::from_str(&data).unwrap_or(Value::Null);
                return Some(SseEvent { event, id, data });
            }
        }
    }
}
