//! The `otel` feature: the real `taud`, with `OTEL_EXPORTER_OTLP_ENDPOINT` naming a fake OTLP
//! HTTP collector on 127.0.0.1, exports a turn's spans there, carrying `tau.session_id`.
//! Run: `cargo test -p taud --features otel --test all otel_export::`.

#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::soak::{SoakHub, new_session, turn};

/// One request the fake collector received: its request line and body.
struct Export {
    request_line: String,
    body: Vec<u8>,
}

/// Accepts HTTP/1.1 requests on `listener`, answers each `200` with an empty protobuf body (an
/// empty ExportTraceServiceResponse), and sends what it received.
fn collector(listener: TcpListener, received: mpsc::Sender<Export>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { return };
        let mut reader = BufReader::new(stream);
        loop {
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                break;
            }
            let mut length = 0usize;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 {
                    return;
                }
                let header = header.trim_end();
                if header.is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                break;
            }
            let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
            if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                break;
            }
            if received.send(Export { request_line, body }).is_err() {
                return;
            }
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turns_spans_reach_the_otlp_collector_with_the_session_id() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let (sender, received) = mpsc::channel();
    std::thread::spawn(move || collector(listener, sender));

    let taud = std::path::Path::new(env!("CARGO_BIN_EXE_taud"));
    let hub = SoakHub::start_with_env(
        taud,
        "file",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            // The batch goes out within 100 ms instead of the default 5 s.
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    )
    .unwrap();
    let mut client = hub.client().await.unwrap();
    let session = new_session(&mut client).await.unwrap();
    turn(&mut client, &session, "what time is it")
        .await
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let export = received
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no span with the session id arrived; requests: {seen:?}"));
        assert!(
            export.request_line.starts_with("POST /v1/traces "),
            "{}",
            export.request_line
        );
        let body = &export.body;
        if contains(body, b"tau.session_id")
            && contains(body, session.as_bytes())
            && contains(body, b"tool_call")
        {
            break;
        }
        seen.push(export.request_line);
    }
    drop(hub);
}
