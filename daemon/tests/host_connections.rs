//! The hub's listeners against the real `taud`: silent and partial connections are closed by their
//! deadlines on TCP and the Unix socket, a flood of silent connections (more than each listener's
//! cap) under an open-files limit of 1,024 leaves `/health`, the heartbeat and turns working, a quiet Subscribe stream outlives
//! the deadlines, and the soft open-files limit is raised at start.

// Test helpers: a failed set-up step must fail the test at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use support::api::*;
use support::process::{Install, http_get, tcp_channel, wait_for, with_token};
use tau_api::proto::v1::{self as pb, session_event::Kind, tau_client::TauClient};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn with_deadline_ms(ms: u64) -> Install {
    let mut install = Install::new();
    install.extra_env.push((
        taud::host::settings::CONNECTION_DEADLINE_ENV.into(),
        ms.to_string(),
    ));
    install
}

/// Whether the hub has closed this connection (without waiting).
fn is_closed(stream: &mut impl Read) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

/// Blocks until the hub closes the connection; how long that took, or `None` after `wait`.
fn closed_within(stream: &mut impl Read, wait: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 512];
    while started.elapsed() < wait {
        match stream.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Some(started.elapsed()),
        }
    }
    None
}

fn tcp(port: u16, send: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    stream.write_all(send).unwrap();
    stream
}

fn unix(install: &Install, send: &[u8]) -> UnixStream {
    let mut stream = UnixStream::connect(install.paths().socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    stream.write_all(send).unwrap();
    stream
}

#[test]
fn silent_and_partial_connections_are_closed_by_the_deadline() {
    let install = with_deadline_ms(1000);
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let port = install.port;
    let mut tcp_cases = [
        ("TCP: silent", tcp(port, b"")),
        ("TCP: partial request line", tcp(port, b"GET /health HT")),
        (
            "TCP: partial headers",
            tcp(port, b"GET /health HTTP/1.1\r\nHost: 127."),
        ),
        ("TCP: bare HTTP/2 preface", tcp(port, PREFACE)),
    ];
    let mut unix_cases = [
        ("socket: silent", unix(&install, b"")),
        ("socket: bare HTTP/2 preface", unix(&install, PREFACE)),
    ];
    let mut outcomes = Vec::new();
    for (what, stream) in &mut tcp_cases {
        outcomes.push((*what, closed_within(stream, Duration::from_secs(6))));
    }
    for (what, stream) in &mut unix_cases {
        outcomes.push((*what, closed_within(stream, Duration::from_secs(6))));
    }
    for (what, took) in outcomes {
        assert!(
            took.is_some(),
            "{what}: still open 6 s after a 1 s deadline"
        );
    }
    // The hub still answers.
    assert_eq!(http_get(port, "/health", "127.0.0.1").unwrap().0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_connections_under_1024_files_leaves_the_hub_serving() {
    let mut install = with_deadline_ms(5000);
    // Soft and hard limit 1,024: raising the soft limit cannot help, the cap must.
    install.ulimit = Some("-n 1024".into());
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let before = install.state().unwrap().heartbeat_at;

    let flood_started = Instant::now();
    let mut silent_tcp: Vec<TcpStream> = (0..1100)
        .map(|_| TcpStream::connect(("127.0.0.1", install.port)).unwrap())
        .collect();
    // More than the socket's cap of 256 too: the turn below needs a place there.
    let mut silent_unix: Vec<UnixStream> = (0..300)
        .map(|_| UnixStream::connect(install.paths().socket).unwrap())
        .collect();
    eprintln!("flood opened in {:?}", flood_started.elapsed());

    let mut latencies = Vec::new();
    for _ in 0..10 {
        let started = Instant::now();
        let (code, body) = http_get(install.port, "/health", "127.0.0.1").unwrap();
        latencies.push(started.elapsed());
        assert_eq!(code, 200, "{body}");
    }
    latencies.sort();
    eprintln!(
        "/health under the flood: median {:?}, max {:?}",
        latencies[5], latencies[9]
    );
    assert!(latencies[9] < Duration::from_secs(1), "{latencies:?}");

    // A turn completes and is stored (over the socket), gRPC over TCP answers.
    let mut client = socket_client(&install).await;
    let id = new_session(&mut client, "terminal").await;
    let (mut stream, _) = start(&mut client, turn(&id, "hello", "terminal")).await;
    let kinds = rest(&mut stream).await;
    assert_eq!(ended(&kinds).stop_reason, "end_turn");
    let session = client
        .get_session(pb::GetSessionRequest {
            session_id: id.clone(),
            include_messages: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(session.messages.len(), 2);
    let mut over_tcp = TauClient::new(tcp_channel(install.port).await);
    let status = over_tcp
        .get_status(with_token(pb::GetStatusRequest {}, Some(&token(&install))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.pid, hub.pid());

    let fds = std::fs::read_dir(format!("/proc/{}/fd", hub.pid()))
        .map(|d| d.count())
        .unwrap_or(0);
    eprintln!("taud holds {fds} file descriptors under the flood");
    assert!(fds < 900, "{fds} open files");
    wait_for("a heartbeat during the flood", || {
        install.state().filter(|s| s.heartbeat_at > before)
    });

    // Every silent connection is closed by the hub: at once (beyond the cap) or by the deadline.
    for s in &silent_tcp {
        s.set_nonblocking(true).unwrap();
    }
    for s in &silent_unix {
        s.set_nonblocking(true).unwrap();
    }
    wait_for("every silent connection to be closed", || {
        let open = silent_tcp
            .iter_mut()
            .map(is_closed)
            .chain(silent_unix.iter_mut().map(is_closed))
            .filter(|closed| !closed)
            .count();
        (open == 0).then_some(())
    });
    eprintln!(
        "all 1,400 silent connections closed {:?} after the flood began",
        flood_started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_subscribe_stream_outlives_the_deadlines() {
    let install = with_deadline_ms(500);
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let mut client = socket_client(&install).await;
    let id = new_session(&mut client, "terminal").await;

    let (mut over_socket, _) = subscribe(&mut socket_client(&install).await, &id, None).await;
    let token = token(&install);
    let mut tcp_client = TauClient::new(tcp_channel(install.port).await);
    let mut over_tcp = tcp_client
        .subscribe(with_token(
            pb::SubscribeRequest {
                session_id: id.clone(),
                after_seq: None,
                channel: "terminal".into(),
                stream_id: String::new(),
            },
            Some(&token),
        ))
        .await
        .unwrap()
        .into_inner();
    let first = over_tcp.message().await.unwrap().unwrap();
    assert!(matches!(
        first.kind,
        Some(pb::subscribe_response::Kind::Snapshot(_))
    ));

    // Six deadlines of silence: first request, header and ping deadlines all pass.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (mut stream, _) = start(&mut client, turn(&id, "hello", "terminal")).await;
    assert_eq!(ended(&rest(&mut stream).await).stop_reason, "end_turn");
    for (what, subscription) in [("socket", &mut over_socket), ("TCP", &mut over_tcp)] {
        let events = events_until_end(subscription).await;
        assert!(
            matches!(
                events.last().and_then(|e| e.kind.as_ref()),
                Some(Kind::TurnEnded(_))
            ),
            "{what}: {events:?}"
        );
    }
}

#[test]
fn the_soft_open_files_limit_is_raised_to_the_hard_one() {
    let mut install = Install::new();
    install.ulimit = Some("-S -n 1024".into());
    let hub = install.spawn();
    install.wait_ready(hub.pid());
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", hub.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<&str> = line.split_whitespace().skip(3).take(2).collect();
    assert_eq!(numbers[0], numbers[1], "{line}");
    assert_ne!(numbers[0], "1024", "{line}");
    let log = std::fs::read_to_string(install.data.join("logs/tau.log")).unwrap_or_default();
    assert!(
        log.contains(&format!("open files limit: soft 1024 -> {}", numbers[0])),
        "{log}"
    );
}
