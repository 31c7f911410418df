//! The accept loop over real loopback sockets: accept errors pause without ending the loop, a
//! full listener makes room by closing a silent connection, and deadlines close silent peers.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::*;

fn app() -> axum::Router {
    axum::Router::new()
        .route("/health", axum::routing::get(|| async { "alive" }))
        .route(
            "/wait",
            axum::routing::get(std::future::pending::<&'static str>),
        )
}

/// Fails every accept with EMFILE until `until`, then accepts from a real listener.
struct Exhausted {
    listener: TcpListener,
    until: Instant,
    calls: Arc<AtomicUsize>,
}

impl Acceptor for Exhausted {
    type Io = TcpStream;
    type Info = ();

    async fn accept(&mut self) -> io::Result<(TcpStream, ())> {
        if Instant::now() < self.until {
            self.calls.fetch_add(1, Ordering::Relaxed);
            return Err(io::Error::from_raw_os_error(nix::libc::EMFILE));
        }
        let (stream, _) = self.listener.accept().await?;
        Ok((stream, ()))
    }
}

async fn get_health(addr: SocketAddr) -> io::Result<String> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await?;
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer))
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
    Ok(answer)
}

/// Reads until the peer closes; how long that took, or `None` if it stayed open for `wait`.
async fn closed_within(stream: &mut TcpStream, wait: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(wait, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

/// Serves [`app`] over HTTP/1.1 and HTTP/2 with `limits` until the sender is dropped.
async fn serve_app(limits: ConnLimits) -> (SocketAddr, oneshot::Sender<()>) {
    let (listener, addr) = bound().await;
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(
        "test",
        listener,
        app(),
        limits,
        Protocols::Http1And2,
        async move {
            let _ = stopped.await;
        },
    ));
    (addr, stop)
}

async fn bound() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

#[tokio::test]
async fn accept_errors_pause_and_the_loop_keeps_serving() {
    let (listener, addr) = bound().await;
    let calls = Arc::new(AtomicUsize::new(0));
    let acceptor = Exhausted {
        listener,
        until: Instant::now() + Duration::from_millis(400),
        calls: Arc::clone(&calls),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(
        "test",
        acceptor,
        app(),
        ConnLimits::default(),
        Protocols::Http1And2,
        async move {
            let _ = stopped.await;
        },
    ));
    let answer = get_health(addr).await.unwrap();
    assert!(answer.ends_with("alive"), "{answer}");
    // 400 ms of EMFILE: pauses of 50, 100, 200 ms (and one more), not a hot loop.
    let failed = calls.load(Ordering::Relaxed);
    assert!((2..=6).contains(&failed), "{failed} failed accepts");
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_full_listener_closes_a_silent_connection_to_serve_a_new_one() {
    let (addr, _stop) = serve_app(ConnLimits {
        max_connections: 3,
        ..ConnLimits::default()
    })
    .await;
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    // Let the loop admit all three before the fourth arrives.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answer = get_health(addr).await.unwrap();
    assert!(answer.ends_with("alive"), "{answer}");
    // The oldest silent connection made room and was closed.
    let first = closed_within(&mut silent[0], Duration::from_secs(2)).await;
    assert!(
        first.is_some(),
        "the oldest silent connection is still open"
    );
    assert!(
        closed_within(&mut silent[2], Duration::from_millis(200))
            .await
            .is_none(),
        "only as many as needed are closed"
    );
}

#[tokio::test]
async fn a_full_listener_of_live_connections_refuses_a_new_one() {
    let (addr, _stop) = serve_app(ConnLimits {
        max_connections: 1,
        ..ConnLimits::default()
    })
    .await;
    // A connection with a request in flight holds the only place.
    let mut live = TcpStream::connect(addr).await.unwrap();
    live.write_all(b"GET /wait HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut refused = TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_within(&mut refused, Duration::from_secs(2))
            .await
            .is_some(),
        "a connection beyond the cap is closed at once"
    );
    assert!(
        closed_within(&mut live, Duration::from_millis(200))
            .await
            .is_none(),
        "the busy connection stays"
    );
}

#[tokio::test]
async fn a_full_listener_closes_the_connection_idle_the_longest_to_serve_a_new_one() {
    let (addr, _stop) = serve_app(ConnLimits {
        max_connections: 2,
        ..ConnLimits::default()
    })
    .await;
    // Two keep-alive connections that sent a request and are now idle: `older` first.
    let mut idle = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 256];
        assert!(stream.read(&mut buf).await.unwrap() > 0);
        idle.push(stream);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answer = get_health(addr).await.unwrap();
    assert!(answer.ends_with("alive"), "{answer}");
    assert!(
        closed_within(&mut idle[0], Duration::from_secs(2))
            .await
            .is_some(),
        "the connection idle the longest made room"
    );
    assert!(
        closed_within(&mut idle[1], Duration::from_millis(200))
            .await
            .is_none(),
        "only as many as needed are closed"
    );
}

#[tokio::test]
async fn silent_and_partial_connections_are_closed_by_their_deadlines() {
    let (addr, _stop) = serve_app(ConnLimits::with_deadline(Duration::from_millis(300))).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut partial = TcpStream::connect(addr).await.unwrap();
    partial.write_all(b"GET /health HT").await.unwrap();
    let mut preface = TcpStream::connect(addr).await.unwrap();
    preface
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    // A keep-alive HTTP/1.1 connection idle after its request.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    for (what, stream) in [
        ("silent", &mut silent),
        ("partial request line", &mut partial),
        ("bare HTTP/2 preface", &mut preface),
        ("idle keep-alive", &mut idle),
    ] {
        let took = closed_within(stream, Duration::from_secs(3)).await;
        let took = took.unwrap_or_else(|| panic!("{what}: still open after 3 s"));
        assert!(took < Duration::from_secs(2), "{what}: {took:?}");
    }
}

/// An HTTP/2 client on `addr` whose connection task answers pings; resolves when the hub closes
/// the connection.
async fn h2_client(
    addr: SocketAddr,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<()>,
) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (send, connection) = h2::client::handshake(tcp).await.unwrap();
    let driver = tokio::spawn(async move {
        let _ = connection.await;
    });
    (send, driver)
}

async fn h2_get(
    send: &mut h2::client::SendRequest<bytes::Bytes>,
    path: &str,
) -> h2::client::ResponseFuture {
    let request = http::Request::get(format!("http://127.0.0.1{path}"))
        .body(())
        .unwrap();
    let ready = send.clone().ready().await.unwrap();
    *send = ready;
    let (response, _) = send.send_request(request, true).unwrap();
    response
}

#[tokio::test]
async fn an_idle_http2_connection_is_closed_though_it_answers_pings_and_a_busy_one_stays() {
    // Pings every 150 ms are answered by both clients; only the idle deadline can close one.
    let limits = ConnLimits {
        keepalive_interval: Duration::from_millis(150),
        idle_close: Duration::from_millis(600),
        ..ConnLimits::default()
    };
    let (addr, _stop) = serve_app(limits).await;

    let (mut idle, idle_driver) = h2_client(addr).await;
    let response = h2_get(&mut idle, "/health").await.await.unwrap();
    assert_eq!(response.status(), 200);
    let started = Instant::now();

    let (mut busy, busy_driver) = h2_client(addr).await;
    let _waiting = h2_get(&mut busy, "/wait").await;

    tokio::time::timeout(Duration::from_secs(5), idle_driver)
        .await
        .expect("the idle connection is closed")
        .unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(500), "closed after {took:?}");
    assert!(took < Duration::from_millis(2500), "closed after {took:?}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !busy_driver.is_finished(),
        "a connection with a stream open stays"
    );
    busy_driver.abort();
}
