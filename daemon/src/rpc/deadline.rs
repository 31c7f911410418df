//! A caller's deadline (`grpc-timeout`, gRPC over HTTP/2): the hub serves its routes itself
//! (`crate::listen`) instead of through tonic's server, which would apply it, so this layer does
//! on both transports. A call still running at its deadline ends with DEADLINE_EXCEEDED: before
//! its response began as a trailers-only answer, during a streamed response as the stream's
//! trailers. Ending a call's stream is what the caller's going away is: a turn it started goes
//! on and is stored, and its events can be read again.
//!
//! Invariants: a malformed header is ignored, as tonic's server does (no deadline); a deadline
//! too far to be represented is no deadline; a response is never cut before its deadline.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::Frame;
use tokio::time::{Instant, Sleep};

/// The header a gRPC client sends its deadline in.
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The duration a `grpc-timeout` value names: one to eight digits and a unit (`H`, `M`, `S`, `m`
/// milliseconds, `u` microseconds, `n` nanoseconds); `None` when it is not one.
pub fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at_checked(value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    match unit {
        "H" => amount.checked_mul(3600).map(Duration::from_secs),
        "M" => amount.checked_mul(60).map(Duration::from_secs),
        "S" => Some(Duration::from_secs(amount)),
        "m" => Some(Duration::from_millis(amount)),
        "u" => Some(Duration::from_micros(amount)),
        "n" => Some(Duration::from_nanos(amount)),
        _ => None,
    }
}

/// The middleware: applies the request's `grpc-timeout`, if it has a valid one.
pub async fn apply_grpc_timeout(request: Request, next: Next) -> Response {
    let deadline = request
        .headers()
        .get(GRPC_TIMEOUT)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout)
        .and_then(|timeout| Instant::now().checked_add(timeout));
    let Some(deadline) = deadline else {
        return next.run(request).await;
    };
    match tokio::time::timeout_at(deadline, next.run(request)).await {
        Ok(response) => response.map(|body| {
            Body::new(DeadlineBody {
                body,
                expiry: Box::pin(tokio::time::sleep_until(deadline)),
                ended: false,
            })
        }),
        Err(_) => tonic::Status::deadline_exceeded(EXPIRED).into_http(),
    }
}

/// What a caller whose deadline passed reads.
const EXPIRED: &str = "the call's deadline (grpc-timeout) passed before it finished";

/// A response body that ends with DEADLINE_EXCEEDED trailers at its deadline.
struct DeadlineBody {
    body: Body,
    expiry: Pin<Box<Sleep>>,
    ended: bool,
}

impl hyper::body::Body for DeadlineBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            if frame.is_none() {
                self.ended = true;
            }
            return Poll::Ready(frame);
        }
        if self.expiry.as_mut().poll(cx).is_ready() {
            self.ended = true;
            let mut trailers = HeaderMap::new();
            // Only fails for a message that is not a valid header, which this one is.
            let _ = tonic::Status::deadline_exceeded(EXPIRED).add_header(&mut trailers);
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.body.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_is_read_and_bad_values_are_none() {
        assert_eq!(parse_grpc_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_grpc_timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse_grpc_timeout("10S"), Some(Duration::from_secs(10)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(
            parse_grpc_timeout("99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        assert_eq!(
            parse_grpc_timeout("99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        for bad in [
            "",
            "S",
            "5",
            "123456789S",
            "5s",
            "-5S",
            "5 S",
            "1.5S",
            "５S",
        ] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }
}
