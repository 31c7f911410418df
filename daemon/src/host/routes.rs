//! The hub's dynamic HTTP route table. An axum router cannot change once it is served, so the
//! control API's router has a single fallback that looks requests up here; services add routes
//! while they start.
//!
//! Invariants: routes are additive: adding a `(method, path)` that exists is refused, so no service
//! can replace `GET /health`, `GET /status` or another service's route; the lock is held only to
//! copy a handler out, never across an `.await`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, RwLock};

use axum::body::Body;
use axum::http::{Method, Request};
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;

/// The future a route handler returns.
pub type RouteFuture = Pin<Box<dyn Future<Output = Response> + Send>>;

/// A route handler: an HTTP request in, a response out.
#[derive(Clone)]
pub struct RouteHandler(Arc<dyn Fn(Request<Body>) -> RouteFuture + Send + Sync>);

impl std::fmt::Debug for RouteHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RouteHandler")
    }
}

impl RouteHandler {
    /// Wraps any axum handler (an async fn with extractors).
    pub fn from_axum<H, T>(handler: H) -> Self
    where
        H: axum::handler::Handler<T, ()>,
        T: 'static,
    {
        let service = handler.with_state(());
        Self(Arc::new(move |req| {
            let service = service.clone();
            Box::pin(async move {
                match service.oneshot(req).await {
                    Ok(response) => response.into_response(),
                    Err(never) => match never {},
                }
            })
        }))
    }

    /// Runs the handler.
    pub fn call(&self, req: Request<Body>) -> RouteFuture {
        (self.0)(req)
    }
}

/// A route's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RouteKey {
    /// The HTTP method.
    pub method: Method,
    /// The exact path (no patterns).
    pub path: String,
}

/// A route could not be added.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RouteError {
    /// The `(method, path)` is taken.
    #[error("route {method} {path} already exists")]
    Exists {
        /// The method.
        method: Method,
        /// The path.
        path: String,
    },
    /// Paths are absolute (`/x`).
    #[error("route path {0:?} must start with '/'")]
    InvalidPath(String),
}

/// The table of dynamic routes.
#[derive(Debug, Default)]
pub struct RouteTable {
    routes: RwLock<HashMap<RouteKey, RouteHandler>>,
}

impl RouteTable {
    /// Adds a route; refused when it exists.
    pub fn add(&self, method: Method, path: &str, handler: RouteHandler) -> Result<(), RouteError> {
        if !path.starts_with('/') {
            return Err(RouteError::InvalidPath(path.to_owned()));
        }
        let key = RouteKey {
            method,
            path: path.to_owned(),
        };
        let mut routes = self.routes.write().unwrap_or_else(PoisonError::into_inner);
        if routes.contains_key(&key) {
            return Err(RouteError::Exists {
                method: key.method,
                path: key.path,
            });
        }
        routes.insert(key, handler);
        Ok(())
    }

    /// The handler for `(method, path)`.
    pub fn get(&self, method: &Method, path: &str) -> Option<RouteHandler> {
        let key = RouteKey {
            method: method.clone(),
            path: path.to_owned(),
        };
        self.routes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned()
    }

    /// Whether any method is routed at `path` (to answer 405 rather than 404).
    pub fn has_path(&self, path: &str) -> bool {
        self.routes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .any(|k| k.path == path)
    }

    /// Every route key.
    pub fn keys(&self) -> Vec<RouteKey> {
        self.routes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    /// Removes the given routes (used to undo what a service added before it failed to start).
    pub fn remove(&self, keys: &[RouteKey]) {
        let mut routes = self.routes.write().unwrap_or_else(PoisonError::into_inner);
        for key in keys {
            routes.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn hello() -> &'static str {
        "hello"
    }

    #[tokio::test]
    async fn added_route_answers() {
        let table = RouteTable::default();
        table
            .add(Method::GET, "/x", RouteHandler::from_axum(hello))
            .unwrap();
        let handler = table.get(&Method::GET, "/x").unwrap();
        let response = handler.call(Request::new(Body::empty())).await;
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .unwrap();
        assert_eq!(&body[..], b"hello");
        assert!(table.get(&Method::POST, "/x").is_none());
        assert!(table.has_path("/x"));
    }

    #[test]
    fn existing_route_is_refused_and_bad_paths_too() {
        let table = RouteTable::default();
        table
            .add(Method::GET, "/x", RouteHandler::from_axum(hello))
            .unwrap();
        assert_eq!(
            table.add(Method::GET, "/x", RouteHandler::from_axum(hello)),
            Err(RouteError::Exists {
                method: Method::GET,
                path: "/x".into()
            })
        );
        table
            .add(Method::POST, "/x", RouteHandler::from_axum(hello))
            .unwrap();
        assert_eq!(
            table.add(Method::GET, "x", RouteHandler::from_axum(hello)),
            Err(RouteError::InvalidPath("x".into()))
        );
    }

    #[test]
    fn removed_routes_are_gone() {
        let table = RouteTable::default();
        table
            .add(Method::GET, "/x", RouteHandler::from_axum(hello))
            .unwrap();
        table.remove(&table.keys());
        assert!(table.get(&Method::GET, "/x").is_none());
    }
}
