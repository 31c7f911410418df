//! The control API service (`control-api`): the hub's TCP listener on 127.0.0.1:<control_port>.
//! It answers `GET /health` and `GET /status` in JSON, serves the routes other services add, and
//! hands gRPC requests (`content-type: application/grpc…`) to the router the gRPC service
//! mounted, so gRPC and JSON share one port.
//!
//! Invariants: binds loopback only (checked again here, not just in the options); JSON requests
//! whose Host (or HTTP/2 authority) is not a loopback name get 403 before any route runs; the
//! router is built once and dispatches through the hub's route table, whose lock is never held
//! across an `.await`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tower::ServiceExt;

use super::core::Hub;
use super::options::OptionsError;
use super::service::{HubService, ServiceError};

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

        let for_health = hub.clone();
        hub.add_route(Method::GET, "/health", move || {
            let hub = for_health.clone();
            async move { Json(json!({"ok": true, "pid": hub.pid(), "uptime_s": hub.uptime_s()})) }
        })?;
        let for_status = hub.clone();
        hub.add_route(Method::GET, "/status", move || {
            let hub = for_status.clone();
            async move { Json(hub.status_json()) }
        })?;

        let app = axum::Router::new()
            .fallback(dispatch)
            .with_state(hub.clone());
        let (shutdown, signal) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = signal.await;
                })
                .await;
            if let Err(e) = served {
                tracing::error!("control API server failed: {e}");
            }
        });
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
        return json_error(StatusCode::FORBIDDEN, "forbidden: non-loopback Host header");
    }
    match hub.route(req.method(), req.uri().path()) {
        Some(handler) => handler.call(req).await,
        None if hub.has_route_path(req.uri().path()) => {
            json_error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        None => json_error(StatusCode::NOT_FOUND, "not found"),
    }
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

/// Whether the request's Host header (or HTTP/2 authority) names the loopback interface. A
/// request with neither is allowed: browsers, the reason for the check, always send one.
fn host_allowed(req: &Request<Body>) -> bool {
    let host = match req.headers().get(header::HOST) {
        Some(value) => match value.to_str() {
            Ok(text) => Some(text.to_owned()),
            Err(_) => return false,
        },
        None => req.uri().authority().map(|a| a.as_str().to_owned()),
    };
    host.is_none_or(|h| is_loopback_host(&h))
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
        assert!(host_allowed(&req(None)));
        let h2 = Request::builder()
            .uri("http://evil.example/health")
            .body(Body::empty())
            .unwrap();
        assert!(!host_allowed(&h2));
    }
}
