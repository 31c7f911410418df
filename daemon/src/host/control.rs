//! The control API service (`control-api`): the hub's TCP listener on 127.0.0.1:<control_port>.
//! It answers `GET /health` and `GET /status` in JSON, serves the routes other services add, and
//! hands gRPC requests (`content-type: application/grpc…`) to the router the gRPC service
//! mounted, so gRPC and JSON share one port. Connections get the hub's deadlines and cap
//! ([`crate::listen`]).
//!
//! Invariants: binds loopback only (checked again here, not just in the options); JSON requests
//! whose Host (or HTTP/2 authority) is missing or not a loopback name get 403 before any route
//! runs; `GET /status` shows the full status only with the hub token (`authorization: Bearer`),
//! otherwise only what `GET /health` shows; the router is built once and dispatches through the
//! hub's route table, whose lock is never held across an `.await`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tower::ServiceExt;

use super::handle::{Hub, HubService, ServiceError};
use super::settings::OptionsError;
use super::token;
use crate::listen::{self, Protocols};

/// The control API's service name.
pub const CONTROL_API: &str = "control-api";

/// gRPC status code UNIMPLEMENTED.
const GRPC_UNIMPLEMENTED: &str = "12";

struct Running {
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// The control API service.
#[derive(Default)]
pub struct ControlApi {
    running: Mutex<Option<Running>>,
}

impl ControlApi {
    /// A control API that has not started.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl HubService for ControlApi {
    fn name(&self) -> &str {
        CONTROL_API
    }

    async fn start(&self, hub: &Hub) -> Result<(), ServiceError> {
        let options = hub.options();
        if !options.bind_addr.is_loopback() {
            return Err(ServiceError::Failed(
                OptionsError::NotLoopback(options.bind_addr).to_string(),
            ));
        }
        let addr = SocketAddr::new(options.bind_addr, options.control_port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ServiceError::io(format!("cannot listen on {addr}"), e))?;
        let bound = listener
            .local_addr()
            .map_err(|e| ServiceError::io("cannot read the bound address", e))?;

        // Without a token nobody sees more than liveness; /health itself needs none.
        let token = token::ensure(&hub.paths().token_file)
            .inspect_err(|e| tracing::warn!("GET /status will show liveness only: {e}"))
            .ok();

        let for_health = hub.clone();
        hub.add_route(Method::GET, "/health", move || {
            let hub = for_health.clone();
            async move { Json(health_json(&hub)) }
        })?;
        let for_status = hub.clone();
        hub.add_route(Method::GET, "/status", move |headers: HeaderMap| {
            let hub = for_status.clone();
            let authorization = headers
                .get(header::AUTHORIZATION)
                .map(HeaderValue::as_bytes);
            let authorized = token
                .as_ref()
                .is_some_and(|t| t.check_authorization(authorization).is_ok());
            async move {
                if authorized {
                    Json(hub.status_json())
                } else {
                    Json(health_json(&hub))
                }
            }
        })?;

        let app = axum::Router::new()
            .fallback(dispatch)
            .with_state(hub.clone());
        let (shutdown, signal) = oneshot::channel::<()>();
        let task = tokio::spawn(listen::serve(
            CONTROL_API,
            listener,
            app,
            options.connections,
            Protocols::Http1And2,
            async move {
                let _ = signal.await;
            },
        ));
        hub.set_listening_port(Some(bound.port()));
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Running { shutdown, task });
        tracing::info!(%bound, "control API listening");
        Ok(())
    }

    async fn stop(&self) -> Result<(), ServiceError> {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Running { shutdown, task }) = running {
            let _ = shutdown.send(());
            let abort = task.abort_handle();
            // If the hub's stop deadline drops this future, the server task is aborted.
            let _guard = AbortOnDrop(abort);
            task.await
                .map_err(|e| ServiceError::Failed(format!("control API task: {e}")))?;
        }
        Ok(())
    }
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn dispatch(State(hub): State<Hub>, req: Request<Body>) -> Response {
    if is_grpc(&req) {
        return match hub.grpc_router() {
            Some(router) => match router.oneshot(req).await {
                Ok(response) => response,
                Err(never) => match never {},
            },
            None => grpc_unavailable(),
        };
    }
    if !host_allowed(&req) {
        return json_error(
            StatusCode::FORBIDDEN,
            "forbidden: missing or non-loopback Host header",
        );
    }
    match hub.route(req.method(), req.uri().path()) {
        Some(handler) => handler.call(req).await,
        None if hub.has_route_path(req.uri().path()) => {
            json_error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        None => json_error(StatusCode::NOT_FOUND, "not found"),
    }
}

/// What `GET /health` shows, and `GET /status` without the token: liveness only.
fn health_json(hub: &Hub) -> Value {
    json!({"ok": true, "pid": hub.pid(), "uptime_s": hub.uptime_s()})
}

fn json_error(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"ok": false, "error": message}))).into_response()
}

fn is_grpc(req: &Request<Body>) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"))
}

fn grpc_unavailable() -> Response {
    let mut response = Response::new(Body::empty());
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", HeaderValue::from_static(GRPC_UNIMPLEMENTED));
    headers.insert(
        "grpc-message",
        HeaderValue::from_static("gRPC is not served on this hub"),
    );
    response
}

/// Whether the request's Host header (or HTTP/2 authority) names the loopback interface; a
/// request with neither is refused too (HTTP/1.1 requires Host, and no client of the hub omits
/// it).
fn host_allowed(req: &Request<Body>) -> bool {
    match req.headers().get(header::HOST) {
        Some(value) => value.to_str().is_ok_and(is_loopback_host),
        None => req
            .uri()
            .authority()
            .is_some_and(|a| is_loopback_host(a.as_str())),
    }
}

/// `localhost`, `127.x.y.z` or `[::1]`, with an optional port.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return false;
        };
        if !(after.is_empty() || port_suffix(after)) {
            return false;
        }
        return inside
            .parse::<Ipv6Addr>()
            .is_ok_and(|ip| IpAddr::V6(ip).is_loopback());
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port_suffix(&format!(":{port}")) => name,
            Some(_) => return false,
            None => host,
        }
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

fn port_suffix(s: &str) -> bool {
    s.strip_prefix(':')
        .is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for ok in [
            "localhost",
            "LOCALHOST:7877",
            "127.0.0.1",
            "127.0.0.1:80",
            "127.1.2.3",
            "[::1]",
            "[::1]:7877",
            "localhost.",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.com",
            "evil.com:7877",
            "localhost.evil.com",
            "10.0.0.1",
            "0.0.0.0",
            "[::2]",
            "[::1",
            "127.0.0.1:",
            "127.0.0.1:x",
            "",
            "[fe80::1]:1",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    fn req(host: Option<&str>) -> Request<Body> {
        let mut b = Request::builder().uri("/health");
        if let Some(h) = host {
            b = b.header(header::HOST, h);
        }
        b.body(Body::empty()).unwrap()
    }

    #[test]
    fn host_header_decides() {
        assert!(host_allowed(&req(Some("127.0.0.1:1"))));
        assert!(!host_allowed(&req(Some("attacker.example:1"))));
        assert!(
            !host_allowed(&req(None)),
            "no Host is refused like a wrong one"
        );
        let h2_local = Request::builder()
            .uri("http://127.0.0.1:7877/health")
            .body(Body::empty())
            .unwrap();
        assert!(host_allowed(&h2_local));
        let h2 = Request::builder()
            .uri("http://evil.example/health")
            .body(Body::empty())
            .unwrap();
        assert!(!host_allowed(&h2));
    }
}
