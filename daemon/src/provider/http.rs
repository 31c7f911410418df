//! The HTTP layer shared by the providers: the reqwest client (rustls with the `ring` provider and
//! the platform's certificate roots, configured per client, never process-wide), proxies from the
//! explicit environment, retry hints from response headers, error bodies, and the adaptor that
//! turns a response body into an attempt's event stream through a [`FrameDecoder`].
//!
//! Invariants: no total timeout on a streaming call (a connect timeout and an idle read timeout
//! instead); an error body is read only up to [`MAX_ERROR_BODY`] bytes; a connection lost or a
//! body that ends before the protocol's last event is a retryable `Unavailable` failure.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::HeaderMap;
use tau_api::env::Env;

use super::ProviderError;
use super::retry::{AttemptStream, Failure};
use crate::model::{ModelError, ModelEvent};

/// The most bytes of an error response body kept for the message.
pub const MAX_ERROR_BODY: usize = 64 * 1024;
/// How long connecting may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// The longest silence between two pieces of a streamed body (providers send pings meanwhile).
pub const READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Builds the client the providers share: rustls over `ring`, platform roots, HTTP/1.1, proxies
/// from HTTPS_PROXY / HTTP_PROXY / ALL_PROXY / NO_PROXY (either case) in `env`.
pub fn build_client(env: &Env) -> Result<reqwest::Client, ProviderError> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_platform_verifier())
        .map_err(|e| ProviderError::Http(format!("TLS set-up failed: {e}")))?
        .with_no_client_auth();
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .tcp_keepalive(Duration::from_secs(60))
        .user_agent(concat!("tau/", env!("CARGO_PKG_VERSION")));
    let var = |name: &str| {
        env.non_empty(name)
            .or_else(|| env.non_empty(&name.to_ascii_lowercase()))
    };
    let no_proxy = var("NO_PROXY").and_then(reqwest::NoProxy::from_string);
    for name in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"] {
        if let Some(url) = var(name) {
            let proxy = match name {
                "HTTPS_PROXY" => reqwest::Proxy::https(url),
                "HTTP_PROXY" => reqwest::Proxy::http(url),
                _ => reqwest::Proxy::all(url),
            }
            .map_err(|e| ProviderError::Http(format!("{name} is not a proxy URL: {e}")))?;
            builder = builder.proxy(proxy.no_proxy(no_proxy.clone()));
        }
    }
    builder
        .build()
        .map_err(|e| ProviderError::Http(format!("the HTTP client could not be built: {e}")))
}

/// The server's retry hint: `retry-after-ms`, `x-amz-retry-after` (ms), else `retry-after` as
/// seconds or an HTTP date. A hint in the past is zero.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    for name in ["retry-after-ms", "x-amz-retry-after"] {
        if let Some(ms) = text(name).and_then(|v| v.parse::<f64>().ok())
            && ms.is_finite()
            && ms >= 0.0
        {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let date = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let now = jiff::Timestamp::now();
    let wait = now.until(date).ok()?.get_milliseconds();
    Some(Duration::from_millis(u64::try_from(wait).unwrap_or(0)))
}

/// Reads up to [`MAX_ERROR_BODY`] bytes of an error response as (lossy) text.
pub async fn error_body(response: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        let room = MAX_ERROR_BODY.saturating_sub(body.len());
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// A failure to send a request or to read its body: connection problems are retryable.
pub fn transport_failure(error: &reqwest::Error) -> Failure {
    let what = if error.is_timeout() {
        "the connection timed out"
    } else if error.is_connect() {
        "the provider could not be reached"
    } else {
        "the connection failed"
    };
    Failure::retryable(ModelError::Unavailable(format!("{what}: {error}")), None)
}

/// Turns a provider's body framing into model events, incrementally.
pub trait FrameDecoder: Send + 'static {
    /// Decodes `chunk` (any split) into `out`. Returns `true` once the protocol's last event was
    /// seen (the body need not be read further).
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<ModelEvent>) -> Result<bool, Failure>;

    /// The body ended before `feed` returned `true`: a failure, or (for a protocol whose end is
    /// optional) the last events.
    fn end(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), Failure>;
}

/// The events of a successful response, decoded by `decoder` as the body arrives.
pub fn decode_body<D: FrameDecoder>(response: reqwest::Response, decoder: D) -> AttemptStream {
    struct State<D> {
        body: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
        decoder: D,
        pending: VecDeque<ModelEvent>,
        failure: Option<Failure>,
        done: bool,
    }
    let state = State {
        body: response.bytes_stream().boxed(),
        decoder,
        pending: VecDeque::new(),
        failure: None,
        done: false,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(event) = st.pending.pop_front() {
                return Some((Ok(event), st));
            }
            if let Some(failure) = st.failure.take() {
                return Some((Err(failure), st));
            }
            if st.done {
                return None;
            }
            let mut out = Vec::new();
            let result = match st.body.next().await {
                Some(Ok(chunk)) => st.decoder.feed(&chunk, &mut out),
                Some(Err(error)) => Err(transport_failure(&error)),
                None => st.decoder.end(&mut out).map(|()| true),
            };
            st.pending.extend(out);
            match result {
                Ok(finished) => st.done = finished,
                Err(failure) => {
                    // The events decoded before the failure still go out first.
                    st.done = true;
                    st.failure = Some(failure);
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_hints_in_every_form() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("0.5"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(500)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO), "a past date");
        h.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&h), None);
        let mut h = HeaderMap::new();
        h.insert("x-amz-retry-after", HeaderValue::from_static("1200"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1200)));
    }

    #[test]
    fn a_client_builds_without_a_process_wide_crypto_provider() {
        let env: Env = [
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
            ("NO_PROXY", "localhost"),
        ]
        .into_iter()
        .collect();
        assert!(build_client(&env).is_ok());
        let bad: Env = [("HTTPS_PROXY", "::not a url::")].into_iter().collect();
        assert!(
            matches!(build_client(&bad), Err(ProviderError::Http(m)) if m.contains("HTTPS_PROXY"))
        );
    }
}
