//! The few pieces of a blocking HTTP/1.1 GET that `tau` sends to local servers (the hub's control
//! port, a local model server): deadlines on the socket, when a response is complete, and the body
//! of a 200 answer (plain or chunked).
//!
//! Invariants: nothing here connects or reads by itself; every wait is bounded by the deadline
//! the caller set with [`with_deadline`].

use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Why a deadline ended an exchange, for messages.
pub fn no_answer(deadline: Duration) -> String {
    format!("no answer within {} ms", deadline.as_millis())
}

/// Whether a socket error is a socket timeout firing.
pub fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock)
}

/// Sets the socket's read and write timeouts to what is left before `until`.
pub fn with_deadline(stream: &TcpStream, until: Instant) -> std::io::Result<()> {
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(ErrorKind::TimedOut.into());
    }
    stream.set_read_timeout(Some(left))?;
    stream.set_write_timeout(Some(left))
}

/// The head and body of a response, split at the blank line.
fn split(response: &[u8]) -> Option<(&str, &[u8])> {
    let at = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&response[..at]).ok()?;
    Some((head, &response[at + 4..]))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// Whether a Content-Length response has all its body (else read to the end of the stream).
pub fn complete(response: &[u8]) -> bool {
    let Some((head, body)) = split(response) else {
        return false;
    };
    header(head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|len| body.len() >= len)
}

/// The body of a 200 answer to `GET <path>`, de-chunked; why not, otherwise.
pub fn body_of(response: &[u8], path: &str) -> Result<Vec<u8>, String> {
    let Some((head, body)) = split(response) else {
        return Err("the answer is not HTTP".to_string());
    };
    let status_line = head.lines().next().unwrap_or_default();
    let mut parts = status_line.split_whitespace();
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err("the answer is not HTTP".to_string());
    };
    if !version.starts_with("HTTP/") {
        return Err("the answer is not HTTP".to_string());
    }
    if code != "200" {
        return Err(format!("GET {path} answered HTTP {code}"));
    }
    if header(head, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        return dechunk(body).ok_or_else(|| "a malformed chunked answer".to_string());
    }
    let len = header(head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(body.len())
        .min(body.len());
    Ok(body[..len].to_vec())
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let at = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..at]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        body = &body[at + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}
