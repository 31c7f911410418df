//! [`ConnLimits`]: the deadlines and the cap every listener of the hub applies to its connections.
//!
//! Invariants: with the defaults a connection that sends nothing, or only part of a request, is
//! closed within [`SILENT_CLOSE_BOUND`] (30 s); a connection with no request in flight is closed
//! gracefully after [`ConnLimits::idle_close`] whether or not it answers pings (a client opens a
//! new one when it next calls), while one with a stream open (a Subscribe waiting for events, a
//! turn waiting on an approval) is never cut for being quiet; no deadline is zero.

use std::time::Duration;

/// The most any silent or partial connection may stay open with the default limits.
pub const SILENT_CLOSE_BOUND: Duration = Duration::from_secs(30);

/// The default time a connection may sit with no request in flight.
pub const DEFAULT_IDLE_CLOSE: Duration = Duration::from_secs(60);

/// The default cap on concurrent connections per listener.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// The shortest and longest deadline accepted from [`ConnLimits::with_deadline`] (at most half
/// the bound, since a dead HTTP/2 peer is closed after a ping interval plus a ping timeout).
const DEADLINE_RANGE: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(15));

/// What a listener allows a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// A connection must have sent the headers of its first request (HTTP/1.1 or HTTP/2) within
    /// this time of being accepted; covers silent peers, partial request lines and a bare HTTP/2
    /// preface.
    pub first_request: Duration,
    /// HTTP/1.1: the headers of each request must arrive within this; it also bounds the idle time
    /// between keep-alive requests.
    pub header_read: Duration,
    /// HTTP/2: after this long without a frame from the peer, the hub sends a ping.
    pub keepalive_interval: Duration,
    /// HTTP/2: a ping not answered within this closes the connection.
    pub keepalive_timeout: Duration,
    /// A connection with no request in flight for this long is closed gracefully (HTTP/2 GOAWAY,
    /// or the end of an HTTP/1.1 keep-alive), even if its peer answers every ping.
    pub idle_close: Duration,
    /// Connections open at once on one listener; beyond it a new connection replaces the oldest
    /// one that has not sent a request yet, or is closed at once.
    pub max_connections: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            first_request: Duration::from_secs(10),
            header_read: Duration::from_secs(10),
            keepalive_interval: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(10),
            idle_close: DEFAULT_IDLE_CLOSE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl ConnLimits {
    /// The default cap with every deadline set to `deadline` (clamped to 50 ms..=15 s); tests use
    /// it to see deadlines act without waiting for the defaults.
    pub fn with_deadline(deadline: Duration) -> Self {
        let deadline = deadline.clamp(DEADLINE_RANGE.0, DEADLINE_RANGE.1);
        Self {
            first_request: deadline,
            header_read: deadline,
            keepalive_interval: deadline,
            keepalive_timeout: deadline,
            idle_close: deadline,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }

    /// The longest a connection that sent nothing, or part of a request, stays open: the first
    /// request deadline, or a dead HTTP/2 peer's ping interval plus the ping timeout.
    pub fn silent_close_bound(&self) -> Duration {
        self.first_request
            .max(self.header_read)
            .max(self.keepalive_interval + self.keepalive_timeout)
    }

    /// Limits from a deadline in milliseconds (the `TAU_HUB_CONNECTION_DEADLINE_MS` test knob);
    /// `None` for text that is not a positive whole number.
    pub fn from_deadline_ms(text: &str) -> Option<Self> {
        let ms = text.trim().parse::<u64>().ok().filter(|ms| *ms > 0)?;
        Some(Self::with_deadline(Duration::from_millis(ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_close_silent_connections_within_30_seconds() {
        let limits = ConnLimits::default();
        assert_eq!(limits.first_request, Duration::from_secs(10));
        assert_eq!(limits.header_read, Duration::from_secs(10));
        assert_eq!(limits.keepalive_interval, Duration::from_secs(10));
        assert_eq!(limits.keepalive_timeout, Duration::from_secs(10));
        assert_eq!(limits.idle_close, Duration::from_secs(60));
        assert_eq!(limits.max_connections, 256);
        assert_eq!(limits.silent_close_bound(), Duration::from_secs(20));
        assert!(limits.silent_close_bound() <= SILENT_CLOSE_BOUND);
    }

    #[test]
    fn a_test_deadline_sets_every_deadline_within_bounds() {
        let limits = ConnLimits::from_deadline_ms("700").unwrap();
        assert_eq!(limits.first_request, Duration::from_millis(700));
        assert_eq!(limits.keepalive_timeout, Duration::from_millis(700));
        assert_eq!(limits.idle_close, Duration::from_millis(700));
        assert_eq!(limits.max_connections, DEFAULT_MAX_CONNECTIONS);
        assert_eq!(
            ConnLimits::from_deadline_ms("1").unwrap().first_request,
            Duration::from_millis(50)
        );
        let longest = ConnLimits::from_deadline_ms("600000").unwrap();
        assert_eq!(longest.header_read, Duration::from_secs(15));
        assert!(longest.silent_close_bound() <= SILENT_CLOSE_BOUND);
        for bad in ["", "0", "-5", "1.5", "soon"] {
            assert_eq!(ConnLimits::from_deadline_ms(bad), None, "{bad}");
        }
    }
}
