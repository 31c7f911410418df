//! The hub probes: `GET /health` (is a hub there?) and `GET /status` (how did its services come
//! out?) on the loopback control port, each within one deadline for the whole exchange (connect,
//! send, read). Information only: a hub that does not answer is not a failure.
//!
//! Invariants: only 127.0.0.1 is contacted; the whole probe ends by its deadline; at most
//! [`MAX_RESPONSE`] bytes are read; nothing but a 200 response whose JSON body has `"ok": true`
//! counts as a tau hub; `GET /status` carries the hub token from `<TAU_DATA_DIR>/hub/token` (the
//! hub shows its services only to a caller with it, read by [`tau_client::connect::token`]), and
//! the token is never shown.

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use tau_api::components::{HubServiceReport, reports_from_status};

use crate::http_get::{body_of, complete, is_timeout, no_answer, with_deadline};

/// The longest response read.
const MAX_RESPONSE: usize = 64 * 1024;

/// What answered on the control port.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// A tau hub: its pid and uptime when it said.
    Hub {
        /// The hub's process id.
        pid: Option<u64>,
        /// Seconds since it started.
        uptime_s: Option<f64>,
    },
    /// Nothing listens (connection refused).
    NotRunning,
    /// Something else, or nothing in time: why.
    Unexpected(String),
}

/// Probes `http://127.0.0.1:<port>/health`, giving up after `deadline`.
pub fn probe(port: u16, deadline: Duration) -> Probe {
    let body = match get(port, "/health", "", deadline) {
        Ok(body) => body,
        Err(probe) => return probe,
    };
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return Probe::Unexpected("GET /health did not answer JSON".to_string());
    };
    if json.get("ok") != Some(&serde_json::Value::Bool(true)) {
        return Probe::Unexpected("GET /health did not answer {\"ok\": true}".to_string());
    }
    Probe::Hub {
        pid: json.get("pid").and_then(serde_json::Value::as_u64),
        uptime_s: json.get("uptime_s").and_then(serde_json::Value::as_f64),
    }
}

/// What a hub said about its services.
#[derive(Debug, Clone, PartialEq)]
pub enum HubServices {
    /// A hub answered `GET /status` with its `services` list.
    Answered(Vec<HubServiceReport>),
    /// Nothing listens (connection refused).
    NotRunning,
    /// Something else, or nothing in time, or a hub that does not list its services: why.
    Unexpected(String),
}

/// The line `tau components` and `tau doctor` show when no hub answered.
pub const NO_HUB: &str = "hub not running: built-in table only";

/// Asks `http://127.0.0.1:<port>/status` for the hub's services with the token in `token_file`,
/// giving up after `deadline`. Without a readable token the hub is still asked (to tell a hub that
/// is not running from one that will not list its services to us).
pub fn services(port: u16, token_file: &Path, deadline: Duration) -> HubServices {
    let token = tau_client::connect::token::read(token_file);
    let authorization = match &token {
        Ok(token) => format!("Authorization: Bearer {token}\r\n"),
        Err(_) => String::new(),
    };
    let body = match get(port, "/status", &authorization, deadline) {
        Ok(body) => body,
        Err(Probe::NotRunning) => return HubServices::NotRunning,
        Err(Probe::Unexpected(why)) => return HubServices::Unexpected(why),
        Err(Probe::Hub { .. }) => {
            return HubServices::Unexpected("GET /status gave no answer".to_string());
        }
    };
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return HubServices::Unexpected("GET /status did not answer JSON".to_string());
    };
    match (reports_from_status(&json), token) {
        (Some(reports), _) => HubServices::Answered(reports),
        (None, Err(why)) => HubServices::Unexpected(why),
        (None, Ok(_)) => {
            HubServices::Unexpected("GET /status does not list the hub's services".to_string())
        }
    }
}

/// The whole `GET /status` JSON of the hub on `port` (token from `token_file`), giving up after
/// `deadline`; `Err` says why there is none (`None`: nothing listens).
pub fn status_json(
    port: u16,
    token_file: &Path,
    deadline: Duration,
) -> Result<serde_json::Value, Option<String>> {
    let token = tau_client::connect::token::read(token_file).map_err(Some)?;
    let authorization = format!("Authorization: Bearer {token}\r\n");
    match get(port, "/status", &authorization, deadline) {
        Ok(body) => serde_json::from_slice(&body)
            .map_err(|_| Some("GET /status did not answer JSON".to_string())),
        Err(Probe::NotRunning) => Err(None),
        Err(Probe::Unexpected(why)) => Err(Some(why)),
        Err(Probe::Hub { .. }) => Err(Some("GET /status gave no answer".to_string())),
    }
}

/// `GET <path>` on the loopback port with `headers` (each line ending in CRLF): the body of a 200
/// answer, or what went wrong as a [`Probe::NotRunning`] or [`Probe::Unexpected`].
fn get(port: u16, path: &str, headers: &str, deadline: Duration) -> Result<Vec<u8>, Probe> {
    let until = Instant::now() + deadline;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = match TcpStream::connect_timeout(&addr, deadline) {
        Ok(stream) => stream,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => return Err(Probe::NotRunning),
        Err(e) if is_timeout(&e) => return Err(Probe::Unexpected(no_answer(deadline))),
        Err(e) => return Err(Probe::Unexpected(format!("cannot connect: {e}"))),
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n{headers}Connection: close\r\n\r\n"
    );
    if let Err(e) =
        with_deadline(&stream, until).and_then(|()| stream.write_all(request.as_bytes()))
    {
        return Err(Probe::Unexpected(if is_timeout(&e) {
            no_answer(deadline)
        } else {
            format!("cannot send the request: {e}")
        }));
    }
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Err(e) = with_deadline(&stream, until) {
            return Err(Probe::Unexpected(if is_timeout(&e) {
                no_answer(deadline)
            } else {
                e.to_string()
            }));
        }
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                response.extend_from_slice(&buf[..n]);
                if response.len() > MAX_RESPONSE {
                    return Err(Probe::Unexpected(format!(
                        "the answer is too long for {path}"
                    )));
                }
                if complete(&response) {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => return Err(Probe::Unexpected(no_answer(deadline))),
            Err(e) => return Err(Probe::Unexpected(format!("reading the answer: {e}"))),
        }
    }
    body_of(&response, path).map_err(Probe::Unexpected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn serve_once(answer: &'static [u8]) -> u16 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            stream.write_all(answer).unwrap();
        });
        port
    }

    #[test]
    fn a_hub_answers() {
        let port = serve_once(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 36\r\n\r\n{\"ok\":true,\"pid\":42,\"uptime_s\":12.5}xx",
        );
        assert_eq!(
            probe(port, Duration::from_secs(5)),
            Probe::Hub {
                pid: Some(42),
                uptime_s: Some(12.5)
            }
        );
    }

    #[test]
    fn chunked_answers_are_read() {
        let port = serve_once(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\n{\"ok\":\r\n5\r\ntrue}\r\n0\r\n\r\n",
        );
        assert_eq!(
            probe(port, Duration::from_secs(5)),
            Probe::Hub {
                pid: None,
                uptime_s: None
            }
        );
    }

    #[test]
    fn something_else_answers() {
        let port = serve_once(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
        assert_eq!(
            probe(port, Duration::from_secs(5)),
            Probe::Unexpected("GET /health answered HTTP 404".to_string())
        );
        let port = serve_once(b"SSH-2.0-OpenSSH\r\n");
        assert!(matches!(
            probe(port, Duration::from_secs(5)),
            Probe::Unexpected(_)
        ));
    }

    #[test]
    fn silence_ends_at_the_deadline() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        // Accepted by the kernel, never answered.
        let started = Instant::now();
        let got = probe(port, Duration::from_millis(200));
        assert_eq!(
            got,
            Probe::Unexpected("no answer within 200 ms".to_string())
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(listener);
    }

    /// A token file holding `tok3n`.
    fn token_file() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "tok3n\n").unwrap();
        (dir, file)
    }

    /// Answers like the hub: the services only to a request carrying `Bearer tok3n`.
    fn serve_status_to_the_token() -> u16 {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let n = stream.read(&mut buf).unwrap();
            let request = String::from_utf8_lossy(&buf[..n]).to_string();
            let body = if request.contains("\r\nAuthorization: Bearer tok3n\r\n") {
                r#"{"services":[{"name":"grpc","state":"failed","error":"no socket"}],"pid":1}"#
            } else {
                r#"{"ok":true,"pid":1,"uptime_s":3}"#
            };
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(answer.as_bytes()).unwrap();
        });
        port
    }

    #[test]
    fn status_lists_the_services_to_the_token() {
        let (_dir, token) = token_file();
        assert_eq!(
            services(serve_status_to_the_token(), &token, Duration::from_secs(5)),
            HubServices::Answered(vec![HubServiceReport::failed("grpc", "no socket")])
        );
        let port = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 15\r\n\r\n{\"role\":\"hub\"}");
        assert_eq!(
            services(port, &token, Duration::from_secs(5)),
            HubServices::Unexpected("GET /status does not list the hub's services".to_string())
        );
    }

    #[test]
    fn without_a_token_file_the_hub_says_too_little() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("token");
        match services(
            serve_status_to_the_token(),
            &missing,
            Duration::from_secs(5),
        ) {
            HubServices::Unexpected(why) => {
                assert!(why.starts_with("cannot read the hub token"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nothing_listens() {
        let port = {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            listener.local_addr().unwrap().port()
        };
        assert_eq!(probe(port, Duration::from_secs(1)), Probe::NotRunning);
        let (_dir, token) = token_file();
        assert_eq!(
            services(port, &token, Duration::from_secs(1)),
            HubServices::NotRunning
        );
    }
}
