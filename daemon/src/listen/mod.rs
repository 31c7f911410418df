//! The hub's HTTP listeners (the control API's TCP port, the gRPC Unix socket): an accept loop
//! that serves an axum router over HTTP/1.1 and HTTP/2 with connection deadlines and a cap
//! ([`ConnLimits`]), and raises the open-files limit at start ([`nofile`]).
//!
//! Invariants: a connection that has not sent the headers of a request within
//! [`ConnLimits::first_request`] is closed; HTTP/1.1 headers have [`ConnLimits::header_read`];
//! a connection with no request in flight for [`ConnLimits::idle_close`] is closed gracefully
//! (answering pings does not keep it); an HTTP/2 connection with a stream open is closed only
//! when its peer stops answering pings (a quiet stream is never cut); at most [`ConnLimits::max_connections`] connections are open per listener
//! ([`slots`]); a failed accept pauses and retries, never ends the loop ([`accept`]); on shutdown
//! accepting stops, every connection is shut down gracefully, and the loop returns when the last
//! one has ended. This module knows nothing of tonic: a listener passes its own peer information.

pub mod accept;
pub mod conn_limits;
pub mod nofile;
pub mod slots;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

pub use accept::Acceptor;
pub use conn_limits::ConnLimits;
use slots::{Slot, Slots};

/// The HTTP versions a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocols {
    /// HTTP/1.1 and HTTP/2 (prior knowledge), told apart by the first bytes: the control API.
    Http1And2,
    /// HTTP/2 only: gRPC on the Unix socket.
    Http2Only,
}

/// Serves `app` on the connections of `acceptor` until `shutdown` resolves, then shuts every
/// connection down gracefully and returns when the last one has ended (the caller bounds that).
pub async fn serve<A, F>(
    name: &'static str,
    mut acceptor: A,
    app: axum::Router,
    limits: ConnLimits,
    protocols: Protocols,
    shutdown: F,
) where
    A: Acceptor,
    F: Future<Output = ()> + Send,
{
    let builder = Arc::new(http_builder(&limits, protocols));
    let slots = Slots::new(name, limits.max_connections);
    let stop = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut backoff = accept::Backoff::default();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(ended) = connections.join_next(), if !connections.is_empty() => {
                if let Err(e) = ended {
                    tracing::error!(listener = name, "a connection task failed: {e}");
                }
            }
            accepted = acceptor.accept() => match accepted {
                Ok((io, info)) => {
                    backoff.reset();
                    // Refused (full of connections that sent requests): dropping `io` closes it.
                    if let Some((slot, _)) = slots.admit() {
                        connections.spawn(connection(
                            io,
                            info,
                            app.clone(),
                            Arc::clone(&builder),
                            limits,
                            slot,
                            stop.clone(),
                        ));
                    }
                }
                Err(e) => {
                    if let Some(pause) = backoff.after(name, &e) {
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(pause) => {}
                        }
                    }
                }
            },
        }
    }
    drop(acceptor);
    stop.cancel();
    while connections.join_next().await.is_some() {}
}

fn http_builder(limits: &ConnLimits, protocols: Protocols) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.keepalive_interval)
        .keep_alive_timeout(limits.keepalive_timeout);
    match protocols {
        Protocols::Http1And2 => builder,
        Protocols::Http2Only => builder.http2_only(),
    }
}

/// A response body that keeps its request counted as in flight until it ends or is dropped.
struct TrackedBody {
    body: axum::body::Body,
    _in_flight: slots::InFlight,
}

impl hyper::body::Body for TrackedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves one connection until it ends, misses its first-request deadline, sits with no request
/// in flight for the idle deadline (closed gracefully), is evicted by a newer connection (at once
/// while it has sent no request, gracefully once it sits idle), or is shut down with the listener.
async fn connection<Io, Info>(
    io: Io,
    info: Info,
    app: axum::Router,
    builder: Arc<Builder<TokioExecutor>>,
    limits: ConnLimits,
    slot: Slot,
    stop: CancellationToken,
) where
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    Info: Clone + Send + Sync + 'static,
{
    let tracker = slot.tracker();
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let in_flight = tracker.begin();
        req.extensions_mut().insert(info.clone());
        let response = app.clone().oneshot(req);
        async move {
            let response = response.await?;
            // Busy until the body has ended or is dropped: a stream counts for its whole life.
            Ok::<_, std::convert::Infallible>(response.map(|body| {
                axum::body::Body::new(TrackedBody {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    });
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let first_request = limits.first_request;
    let first = tokio::time::sleep(first_request);
    tokio::pin!(first);
    // Looked at when it fires: the connection may have been busy meanwhile.
    let idle = tokio::time::sleep(limits.idle_close);
    tokio::pin!(idle);
    let mut awaiting_first = true;
    let mut stopping = false;
    loop {
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!("connection ended: {e}");
                }
                return;
            }
            () = &mut first, if awaiting_first => {
                if !slot.is_proven() {
                    tracing::debug!(
                        "closing a connection that sent no request within {} ms",
                        first_request.as_millis()
                    );
                    return;
                }
                awaiting_first = false;
            }
            () = &mut idle, if !stopping => {
                match slot.idle_for() {
                    Some(quiet) if quiet >= limits.idle_close => {
                        tracing::debug!(
                            "closing a connection with no request for {} ms",
                            quiet.as_millis()
                        );
                        stopping = true;
                        conn.as_mut().graceful_shutdown();
                    }
                    quiet => {
                        let left = limits.idle_close.saturating_sub(quiet.unwrap_or_default());
                        // A deadline past what an instant holds waits as long as tokio's sleep
                        // would (about 30 years), never overflows.
                        let now = tokio::time::Instant::now();
                        let at = now
                            .checked_add(left)
                            .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30));
                        idle.as_mut().reset(at);
                    }
                }
            }
            () = slot.evicted(), if !stopping => {
                if !slot.is_proven() {
                    tracing::debug!("closing a connection that sent no request: a newer one needs its place");
                    return;
                }
                tracing::debug!("closing an idle connection: a newer one needs its place");
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            () = stop.cancelled(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}
