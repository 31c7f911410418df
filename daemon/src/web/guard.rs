//! The browser protections every request of the web client passes before any handler runs: the
//! Host allowlist (against DNS rebinding), the Origin check (against cross-site requests), and the
//! response headers that keep the page to itself (a strict Content-Security-Policy, no framing, no
//! sniffing, no referrer, no caching, and never a CORS header).
//!
//! Invariants:
//! - A request whose Host is not a loopback name (`localhost`, `127.x.y.z`, `[::1]`), the
//!   configured `public_origin`'s host, or the literal address the client listens on is refused
//!   with 403, whatever its path.
//! - A request that may change anything (any method but GET and HEAD) must carry an `Origin` that
//!   is this page's own: the `public_origin`, or the request's own scheme and Host; a missing or
//!   other Origin is 403. Loopback does not trust loopback: a page on another loopback port is
//!   another origin.
//! - A GET (the event stream included) with an `Origin` must carry this page's own, and one that
//!   a browser marks `Sec-Fetch-Site: cross-site` or `same-site` is refused, so no other page can
//!   read a stream or an answer even with the cookie attached.
//! - Nothing here trusts what a client declares about itself besides these two headers, which a
//!   browser sets and a page cannot.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tau_api::config::{host_of, is_loopback_host};

/// The Content-Security-Policy of every response: only this origin's own scripts, styles and
/// connections; no inline script, no plugins, no framing, no form posts elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Who the page is: what Host and Origin a request may carry.
#[derive(Debug, Clone)]
pub struct Origins {
    /// `https` under TLS, else `http`.
    pub scheme: &'static str,
    /// The configured `public_origin`, lowercased.
    pub public_origin: Option<String>,
    /// The host of `public_origin` (with its port, if it names one).
    public_authority: Option<String>,
    /// The address the client listens on, as a Host may name it (`192.168.1.5:8443`); `None` for
    /// a loopback or unspecified address.
    listen_authority: Option<String>,
}

impl Origins {
    pub fn new(listen: SocketAddr, tls: bool, public_origin: Option<String>) -> Self {
        let public_authority = public_origin
            .as_deref()
            .and_then(|o| o.split_once("://"))
            .map(|(_, authority)| authority.to_owned());
        let ip = listen.ip();
        let listen_authority =
            (!ip.is_loopback() && !ip.is_unspecified()).then(|| listen.to_string());
        Self {
            scheme: if tls { "https" } else { "http" },
            public_origin,
            public_authority,
            listen_authority,
        }
    }

    /// Whether `host` (a Host header's value) names this client.
    pub fn host_allowed(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        if self.public_authority.as_deref() == Some(host.as_str())
            || self.listen_authority.as_deref() == Some(host.as_str())
        {
            return true;
        }
        host_of(&host).is_some_and(is_loopback_host)
    }

    /// Whether `origin` is this page's own for a request that came with `host`.
    pub fn origin_allowed(&self, origin: &str, host: &str) -> bool {
        let origin = origin.trim().to_ascii_lowercase();
        if self.public_origin.as_deref() == Some(origin.as_str()) {
            return true;
        }
        let host = host.trim().to_ascii_lowercase();
        self.host_allowed(&host) && origin == format!("{}://{host}", self.scheme)
    }

    /// The origin the page answers at for a request with `host`: the signature binds it.
    pub fn origin_for(&self, host: &str) -> String {
        match &self.public_origin {
            Some(origin) if self.public_authority.as_deref() == Some(host) => origin.clone(),
            _ => format!("{}://{}", self.scheme, host.trim().to_ascii_lowercase()),
        }
    }
}

/// The Host a request passed the guard with (an extension of every request a handler sees).
#[derive(Debug, Clone)]
pub struct CheckedHost(pub String);

/// A request's Host (HTTP/1.1 `Host`, or the HTTP/2 authority).
pub fn request_host(req: &Request<Body>) -> Option<String> {
    if let Some(host) = req.headers().get(header::HOST) {
        return host.to_str().ok().map(str::to_owned);
    }
    req.uri().authority().map(|a| a.as_str().to_owned())
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Why a request was refused, before any handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    Host,
    Origin,
    CrossSite,
    Preflight,
}

impl Refused {
    fn message(self) -> &'static str {
        match self {
            Self::Host => "forbidden: this Host is not the tau web client's",
            Self::Origin => "forbidden: this request's Origin is not the tau web client's",
            Self::CrossSite => "forbidden: a request from another site",
            Self::Preflight => "cross-origin requests are not served",
        }
    }
}

/// The check itself, on a request's method and headers.
pub fn check(
    origins: &Origins,
    method: &Method,
    host: Option<&str>,
    headers: &HeaderMap,
) -> Result<(), Refused> {
    let host = host.ok_or(Refused::Host)?;
    if !origins.host_allowed(host) {
        return Err(Refused::Host);
    }
    if method == Method::OPTIONS {
        return Err(Refused::Preflight);
    }
    let origin = header_str(headers, "origin");
    if let Some(origin) = origin
        && !origins.origin_allowed(origin, host)
    {
        return Err(Refused::Origin);
    }
    let safe = method == Method::GET || method == Method::HEAD;
    if !safe && origin.is_none() {
        return Err(Refused::Origin);
    }
    if matches!(
        header_str(headers, "sec-fetch-site"),
        Some("cross-site" | "same-site")
    ) {
        return Err(Refused::CrossSite);
    }
    Ok(())
}

/// The axum middleware: refuses what [`check`] refuses, and puts the security headers on every
/// response (refusals included).
pub async fn protect(
    State(origins): State<Arc<Origins>>,
    mut req: Request<Body>,
    next: Next,
) -> Response {
    let host = request_host(&req);
    let mut response = match check(&origins, req.method(), host.as_deref(), req.headers()) {
        Ok(()) => {
            let host = host.unwrap_or_default().trim().to_ascii_lowercase();
            req.extensions_mut().insert(CheckedHost(host));
            next.run(req).await
        }
        Err(refused) => {
            tracing::info!(?refused, "web request refused");
            let status = match refused {
                Refused::Preflight => StatusCode::METHOD_NOT_ALLOWED,
                _ => StatusCode::FORBIDDEN,
            };
            (
                status,
                axum::Json(serde_json::json!({"ok": false, "error": refused.message()})),
            )
                .into_response()
        }
    };
    secure_headers(response.headers_mut());
    response
}

/// The headers every response carries. No `Access-Control-*` header is ever set.
pub fn secure_headers(headers: &mut HeaderMap) {
    let fixed = [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "permissions-policy",
        HeaderValue::from_static("camera=(), microphone=(), geolocation=()"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback() -> Origins {
        Origins::new("127.0.0.1:7878".parse().unwrap(), false, None)
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn hosts_are_loopback_names_or_the_configured_origin() {
        let o = loopback();
        for host in [
            "127.0.0.1:7878",
            "localhost:7878",
            "[::1]:7878",
            "LOCALHOST",
        ] {
            assert!(o.host_allowed(host), "{host}");
        }
        for host in [
            "evil.example:7878",
            "localhost.evil.example",
            "10.0.0.2:7878",
            "",
        ] {
            assert!(!o.host_allowed(host), "{host}");
        }
        let proxied = Origins::new(
            "127.0.0.1:7878".parse().unwrap(),
            false,
            Some("https://tau.example.org".into()),
        );
        assert!(proxied.host_allowed("tau.example.org"));
        assert!(!proxied.host_allowed("tau.example.org.evil.example"));
        assert!(proxied.origin_allowed("https://tau.example.org", "127.0.0.1:7878"));
    }

    #[test]
    fn loopback_does_not_trust_another_loopback_origin() {
        let o = loopback();
        assert!(o.origin_allowed("http://127.0.0.1:7878", "127.0.0.1:7878"));
        assert!(!o.origin_allowed("http://127.0.0.1:9999", "127.0.0.1:7878"));
        assert!(!o.origin_allowed("http://localhost:7878", "127.0.0.1:7878"));
        assert!(!o.origin_allowed("https://127.0.0.1:7878", "127.0.0.1:7878"));
        assert!(!o.origin_allowed("null", "127.0.0.1:7878"));
    }

    #[test]
    fn state_changes_need_our_origin_and_reads_refuse_other_sites() {
        let o = loopback();
        let host = Some("127.0.0.1:7878");
        assert_eq!(
            check(&o, &Method::POST, host, &headers(&[])),
            Err(Refused::Origin)
        );
        let ours = headers(&[("origin", "http://127.0.0.1:7878")]);
        assert_eq!(check(&o, &Method::POST, host, &ours), Ok(()));
        let theirs = headers(&[("origin", "http://evil.example")]);
        assert_eq!(
            check(&o, &Method::POST, host, &theirs),
            Err(Refused::Origin)
        );
        assert_eq!(check(&o, &Method::GET, host, &theirs), Err(Refused::Origin));
        assert_eq!(check(&o, &Method::GET, host, &headers(&[])), Ok(()));
        let cross = headers(&[("sec-fetch-site", "cross-site")]);
        assert_eq!(
            check(&o, &Method::GET, host, &cross),
            Err(Refused::CrossSite)
        );
        assert_eq!(
            check(&o, &Method::OPTIONS, host, &ours),
            Err(Refused::Preflight)
        );
        assert_eq!(check(&o, &Method::GET, None, &ours), Err(Refused::Host));
        assert_eq!(
            check(&o, &Method::GET, Some("evil.example"), &headers(&[])),
            Err(Refused::Host)
        );
    }
}
