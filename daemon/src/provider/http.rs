//! The HTTP layer shared by the providers: the reqwest client (rustls with the `ring` provider and
//! the platform's certificate roots, configured per client, never process-wide), proxies from the
//! explicit environment, retry hints from response headers, error bodies, and the adaptor that
//! turns a response body into an attempt's event stream through a [`FrameDecoder`]; every HTTP
//! provider opens its call through [`open_stream`] (or [`stream_or_refused`]).
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

/// The longest retry hint kept from a header; the retry policy cuts it further to its
/// `max_server_delay`. Anything longer (up to `1e30` seconds, say) is read as this.
pub const MAX_RETRY_HINT: Duration = Duration::from_secs(3600);

/// The server's retry hint: `retry-after-ms`, `x-amz-retry-after` (ms), else `retry-after` as
/// seconds or an HTTP date. A hint in the past is zero; a huge one is [`MAX_RETRY_HINT`]; a
/// negative, NaN, infinite or unreadable one is no hint.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, jiff::Timestamp::now())
}

/// [`retry_after`] with an HTTP date measured from `now`.
pub fn retry_after_at(headers: &HeaderMap, now: jiff::Timestamp) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    for name in ["retry-after-ms", "x-amz-retry-after"] {
        if let Some(ms) = text(name).and_then(|v| v.parse::<f64>().ok())
            && let Some(wait) = hint_from_secs(ms / 1000.0)
        {
            return Some(wait);
        }
    }
    let value = text("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return hint_from_secs(secs);
    }
    let date = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let wait = date.duration_since(now);
    if wait.is_negative() {
        return Some(Duration::ZERO);
    }
    Some(
        Duration::try_from(wait)
            .unwrap_or(MAX_RETRY_HINT)
            .min(MAX_RETRY_HINT),
    )
}

/// A hint of `secs` seconds: none unless finite and not negative, at most [`MAX_RETRY_HINT`].
fn hint_from_secs(secs: f64) -> Option<Duration> {
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    let wait = Duration::try_from_secs_f64(secs).unwrap_or(MAX_RETRY_HINT);
    Some(wait.min(MAX_RETRY_HINT))
}

/// A response that was not a success, read once: what a provider's error mapping needs.
#[derive(Debug)]
pub struct Refused {
    /// The HTTP status.
    pub status: u16,
    /// Its headers (provider-specific hints: `x-should-retry`, `x-amzn-errortype`, the date).
    pub headers: HeaderMap,
    /// The body, at most [`MAX_ERROR_BODY`] bytes, as (lossy) text.
    pub body: String,
    /// The retry hint of its headers ([`retry_after`]).
    pub retry_after: Option<Duration>,
}

/// Sends `request`: a success becomes the attempt's stream through the decoder `decoder` makes;
/// anything else is read into a [`Refused`] for the provider to map. A failure to send is a
/// [`transport_failure`]. The one way every HTTP provider opens a streamed call.
pub async fn open_stream<D: FrameDecoder>(
    request: reqwest::RequestBuilder,
    decoder: impl FnOnce() -> D,
) -> Result<Result<AttemptStream, Refused>, Failure> {
    let response = request.send().await.map_err(|e| transport_failure(&e))?;
    Ok(stream_or_refused(response, decoder).await)
}

/// [`open_stream`] for a response already received (a provider that sends in its own way).
pub async fn stream_or_refused<D: FrameDecoder>(
    response: reqwest::Response,
    decoder: impl FnOnce() -> D,
) -> Result<AttemptStream, Refused> {
    let status = response.status();
    if status.is_success() {
        return Ok(decode_body(response, decoder()));
    }
    let headers = response.headers().clone();
    let retry_after = retry_after(&headers);
    let body = error_body(response).await;
    Err(Refused {
        status: status.as_u16(),
        headers,
        body,
        retry_after,
    })
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

/// Test support: decodes `body` fed in pieces of `piece` bytes, as a response split at awkward
/// points would arrive, with the failure that ended it.
#[cfg(test)]
pub(crate) fn decode_in_pieces(
    decoder: &mut dyn FrameDecoder,
    body: &[u8],
    piece: usize,
) -> (Vec<ModelEvent>, Option<Failure>) {
    let mut out = Vec::new();
    for chunk in body.chunks(piece) {
        match decoder.feed(chunk, &mut out) {
            Ok(true) => return (out, None),
            Ok(false) => {}
            Err(failure) => return (out, Some(failure)),
        }
    }
    let end = decoder.end(&mut out).err();
    (out, end)
}

/// Test support: asserts that every body of `bodies` decodes to the same events and failure
/// whole and fed in each size of `pieces` (a frame split anywhere must decode alike).
#[cfg(test)]
pub(crate) fn assert_pieces_decode_alike(
    decode: impl Fn(&[u8], usize) -> (Vec<ModelEvent>, Option<Failure>),
    bodies: &[&[u8]],
    pieces: &[usize],
) {
    for body in bodies {
        let whole = decode(body, body.len());
        for &piece in pieces {
            assert_eq!(decode(body, piece), whole, "piece size {piece}");
        }
    }
}

/// Test support: the text of content block `index` in `events`.
#[cfg(test)]
pub(crate) fn block_text(events: &[ModelEvent], index: u32) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta { index: i, text } if *i == index => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Test support: the reasoning text of content block `index` in `events`.
#[cfg(test)]
pub(crate) fn reasoning_text(events: &[ModelEvent], index: u32) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ReasoningDelta {
                index: i,
                delta: crate::model::ReasoningDelta::Text(t),
            } if *i == index => Some(t.as_str()),
            _ => None,
        })
        .collect()
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
    fn nonsense_hints_never_panic_and_huge_ones_are_capped() {
        use crate::provider::retry::RetryPolicy;
        let policy = RetryPolicy::anthropic();
        for name in ["retry-after", "retry-after-ms", "x-amz-retry-after"] {
            for huge in ["1e30", "1.7976931348623157e308", "18446744073709551616"] {
                let mut h = HeaderMap::new();
                h.insert(name, HeaderValue::from_static(huge));
                let hint = retry_after(&h);
                assert_eq!(hint, Some(MAX_RETRY_HINT), "{name}: {huge}");
                assert_eq!(policy.delay(0, hint), policy.max_server_delay);
            }
            for nonsense in [
                "-1", "-0.5", "NaN", "nan", "inf", "-inf", "infinity", "1e400",
            ] {
                let mut h = HeaderMap::new();
                h.insert(name, HeaderValue::from_static(nonsense));
                assert_eq!(retry_after(&h), None, "{name}: {nonsense}");
            }
        }
        // A nonsense millisecond hint falls through to a good `retry-after`.
        let mut h = HeaderMap::new();
        h.insert("retry-after-ms", HeaderValue::from_static("NaN"));
        h.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
    }

    #[test]
    fn an_http_date_counts_whole_seconds_from_now() {
        let now: jiff::Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
        let at = |date: &'static str| {
            let mut h = HeaderMap::new();
            h.insert("retry-after", HeaderValue::from_static(date));
            retry_after_at(&h, now)
        };
        assert_eq!(
            at("Sun, 01 Mar 2026 12:00:30 GMT"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            at("Sun, 01 Mar 2026 12:02:05 GMT"),
            Some(Duration::from_secs(125))
        );
        assert_eq!(at("Sun, 01 Mar 2026 11:59:30 GMT"), Some(Duration::ZERO));
        assert_eq!(at("Sun, 01 Mar 2026 12:00:00 GMT"), Some(Duration::ZERO));
        assert_eq!(at("Fri, 01 Mar 2030 12:00:00 GMT"), Some(MAX_RETRY_HINT));
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
