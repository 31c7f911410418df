//! Clock skew and SigV4: AWS rejects a signature dated more than about five minutes from its own
//! clock (HTTP 403 `InvalidSignatureException`, "Signature expired" / "Signature not yet
//! current"), which is what a Raspberry Pi that booted without a correct clock sends.
//!
//! Owns: recognising such a rejection, the offset it implies (the response's `Date` minus this
//! machine's clock), the offset one transport remembers for its later requests, and the error when
//! the offset does not help. Invariants: the offset is always measured against the raw clock (never
//! an already-adjusted time), so a clock NTP later corrects is learned afresh; the lock is never
//! held across an `.await`; the error text carries the server's message and the offset, never a
//! credential.

use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use jiff::{SignedDuration, Timestamp};
use reqwest::header::{DATE, HeaderMap};

use crate::model::ModelError;

/// How far AWS's clock is ahead of this machine's (negative: behind), as one transport last
/// learned it; zero until a skew rejection teaches otherwise.
#[derive(Debug, Default)]
pub struct ClockOffset(Mutex<Option<SignedDuration>>);

impl ClockOffset {
    /// The remembered offset, zero when none.
    pub fn get(&self) -> SignedDuration {
        let guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        guard.unwrap_or(SignedDuration::ZERO)
    }

    /// Remembers `offset` for later requests.
    pub fn set(&self, offset: SignedDuration) {
        let mut guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *guard = Some(offset);
    }
}

/// Whether a rejection (`status`, error `code`, `message`) says the signature's time is too far
/// from the server's.
pub fn is_skew(status: u16, code: &str, message: &str) -> bool {
    if !matches!(status, 400 | 403) {
        return false;
    }
    let lowered = message.to_ascii_lowercase();
    let says_time =
        lowered.contains("signature expired") || lowered.contains("signature not yet current");
    code == "RequestTimeTooSkewed"
        || (says_time
            && matches!(
                code,
                "InvalidSignatureException" | "SignatureDoesNotMatch" | ""
            ))
}

/// The server's clock minus `now`, read from the response's `Date` header (an HTTP date); `None`
/// when the header is missing or unreadable.
pub fn offset_from(headers: &HeaderMap, now: SystemTime) -> Option<SignedDuration> {
    let value = headers.get(DATE)?.to_str().ok()?.trim();
    let server = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let now = Timestamp::try_from(now).ok()?;
    Some(server.duration_since(now))
}

/// The time to sign with: `now` moved by `offset`.
pub fn signing_time(now: SystemTime, offset: SignedDuration) -> Result<Timestamp, ModelError> {
    Timestamp::try_from(now)
        .and_then(|now| now.checked_add(offset))
        .map_err(|_| {
            ModelError::Request(
                "the system clock reads a time a request cannot be signed with; \
                 check the system time (NTP)"
                    .into(),
            )
        })
}

/// The error for a skew rejection that a re-signed retry cannot (or did not) cure: `offset` is the
/// server's clock minus ours when the response said it, `detail` the server's words.
pub fn error(offset: Option<SignedDuration>, status: u16, code: &str, message: &str) -> ModelError {
    let code = if code.is_empty() {
        "signature time rejected"
    } else {
        code
    };
    let detail = format!("HTTP {status} {code}: {message}");
    let text = match offset {
        Some(offset) => {
            let secs = offset.as_secs();
            let direction = if secs >= 0 { "behind" } else { "ahead of" };
            format!(
                "AWS rejected the request signature's time even after re-signing with its clock: \
                 this machine's clock looks wrong by about {} seconds ({direction} AWS); \
                 check NTP / the system time (`timedatectl`) ({detail})",
                secs.unsigned_abs()
            )
        }
        None => format!(
            "AWS rejected the request signature's time and sent no usable Date header, so this \
             machine's clock may be wrong; check NTP / the system time (`timedatectl`) ({detail})"
        ),
    };
    ModelError::Request(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn at(rfc3339: &str) -> SystemTime {
        SystemTime::from(rfc3339.parse::<Timestamp>().unwrap())
    }

    #[test]
    fn only_time_rejections_are_skew() {
        let expired = "Signature expired: 20260101T000000Z is now earlier than \
                       20260101T005500Z (20260101T010000Z - 5 min.)";
        let early = "Signature not yet current: 20260101T020000Z is still later than \
                     20260101T010500Z (20260101T010000Z + 5 min.)";
        assert!(is_skew(403, "InvalidSignatureException", expired));
        assert!(is_skew(403, "InvalidSignatureException", early));
        assert!(is_skew(403, "", expired));
        assert!(is_skew(
            403,
            "RequestTimeTooSkewed",
            "The difference is too large."
        ));
        assert!(!is_skew(
            403,
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided."
        ));
        assert!(!is_skew(
            403,
            "UnrecognizedClientException",
            "The security token included in the request is invalid."
        ));
        assert!(!is_skew(403, "AccessDeniedException", expired));
        assert!(!is_skew(500, "InvalidSignatureException", expired));
    }

    #[test]
    fn the_offset_comes_from_an_http_date() {
        let mut headers = HeaderMap::new();
        assert_eq!(offset_from(&headers, at("2026-01-01T00:00:00Z")), None);
        headers.insert(
            DATE,
            HeaderValue::from_static("Thu, 01 Jan 2026 01:00:00 GMT"),
        );
        assert_eq!(
            offset_from(&headers, at("2026-01-01T00:00:00Z")),
            Some(SignedDuration::from_secs(3600))
        );
        assert_eq!(
            offset_from(&headers, at("2026-01-01T01:00:30Z")),
            Some(SignedDuration::from_secs(-30))
        );
        headers.insert(DATE, HeaderValue::from_static("yesterday-ish"));
        assert_eq!(offset_from(&headers, at("2026-01-01T00:00:00Z")), None);
    }

    #[test]
    fn the_signing_time_is_now_plus_the_offset() {
        let time = signing_time(at("2026-01-01T00:00:00Z"), SignedDuration::from_secs(3600));
        assert_eq!(time.unwrap().to_string(), "2026-01-01T01:00:00Z");
        assert!(signing_time(at("9999-12-30T00:00:00Z"), SignedDuration::from_hours(48)).is_err());
        // About the year 14600: past what a timestamp can hold.
        let far = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(400_000_000_000);
        assert!(signing_time(far, SignedDuration::ZERO).is_err());
    }

    #[test]
    fn the_offset_is_remembered() {
        let offset = ClockOffset::default();
        assert_eq!(offset.get(), SignedDuration::ZERO);
        offset.set(SignedDuration::from_secs(-90));
        assert_eq!(offset.get(), SignedDuration::from_secs(-90));
    }

    #[test]
    fn errors_say_how_wrong_the_clock_looks() {
        let ModelError::Request(behind) = error(
            Some(SignedDuration::from_secs(3600)),
            403,
            "InvalidSignatureException",
            "Signature expired",
        ) else {
            panic!("a request error")
        };
        assert!(
            behind.contains("wrong by about 3600 seconds (behind AWS)"),
            "{behind}"
        );
        assert!(behind.contains("NTP"), "{behind}");
        assert!(behind.contains("HTTP 403 InvalidSignatureException: Signature expired"));
        let ModelError::Request(ahead) = error(Some(SignedDuration::from_secs(-400)), 403, "", "x")
        else {
            panic!("a request error")
        };
        assert!(ahead.contains("400 seconds (ahead of AWS)"), "{ahead}");
        let ModelError::Request(unknown) = error(None, 403, "InvalidSignatureException", "x")
        else {
            panic!("a request error")
        };
        assert!(unknown.contains("may be wrong"), "{unknown}");
        assert!(unknown.contains("NTP"), "{unknown}");
    }
}
