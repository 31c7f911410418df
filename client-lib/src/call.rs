//! One-shot hub calls of the clients (`tau chat`, `tau ask`, `tau tui`, the relay, the approvals
//! calls): each has a deadline, and in the chat each gives way to Ctrl-C.
//!
//! Invariants:
//! - Every unary call the chat makes goes through [`call`]: a stalled hub ends the call after its
//!   deadline with [`CallError::TimedOut`], and Ctrl-C ends it with [`CallError::Interrupted`], so
//!   the chat always gets back to its prompt.
//! - The chat listens for Ctrl-C ([`Interrupts`]) from the moment it has a session until it ends:
//!   a handler, once installed, stays for the run, so every wait of the chat outside the line
//!   editor (which reads Ctrl-C as a key) listens to the same [`Interrupts`]. A Ctrl-C pressed
//!   while nothing waited is forgotten before the next typed line runs
//!   ([`Interrupts::forget_earlier`]).
//! - Dropping a call's future abandons only the waiting: what the hub already received may still
//!   take effect (a compaction that finishes after Ctrl-C leaves a new session in the hub).

use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The deadline of an ordinary one-shot hub call (status, listings, open, decide, cancel).
pub const CALL_DEADLINE: Duration = Duration::from_secs(30);

/// The deadline of `/compact`, which calls the model for a summary.
pub const COMPACT_DEADLINE: Duration = Duration::from_secs(300);

/// The variable that shortens or lengthens [`CALL_DEADLINE`] (whole seconds, at least 1).
pub const DEADLINE_VAR: &str = "TAU_HUB_TIMEOUT";

/// How a one-shot hub call did not give an answer (shown as one line: the hub's message, or
/// the deadline).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The hub answered with an error.
    #[error("{}", .0.message())]
    Hub(tonic::Status),
    /// The hub did not answer within this deadline.
    #[error("no answer from the hub within {0:?}")]
    TimedOut(Duration),
    /// The person pressed Ctrl-C while waiting.
    #[error("interrupted")]
    Interrupted,
}

/// The deadlines of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Ordinary calls.
    pub call: Duration,
    /// `/compact`.
    pub compact: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Self {
            call: CALL_DEADLINE,
            compact: COMPACT_DEADLINE,
        }
    }
}

impl Deadlines {
    /// The deadlines with [`DEADLINE_VAR`] applied when it holds a whole number of seconds (at
    /// least 1); `/compact` never gets less than the ordinary deadline.
    pub fn from_var(value: Option<&str>) -> Self {
        let default = Self::default();
        match value.and_then(|v| v.trim().parse::<u64>().ok()) {
            Some(seconds) if seconds > 0 => {
                let call = Duration::from_secs(seconds);
                Self {
                    call,
                    compact: default.compact.max(call),
                }
            }
            _ => default,
        }
    }
}

/// The Ctrl-Cs (SIGINT) of this process, from the moment [`Interrupts::listen`] is called.
pub struct Interrupts {
    /// `None` when the signal cannot be listened for: then no wait ends by Ctrl-C.
    signal: Option<Signal>,
}

impl Interrupts {
    /// Starts listening (inside a tokio runtime). From now on Ctrl-C no longer ends the process.
    pub fn listen() -> Self {
        Self {
            signal: signal(SignalKind::interrupt()).ok(),
        }
    }

    /// Resolves on the next Ctrl-C (or one pressed since the last was taken).
    pub async fn next(&mut self) {
        match &mut self.signal {
            Some(signal) => {
                if signal.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }

    /// Forgets the Ctrl-Cs pressed while nothing waited for one.
    pub fn forget_earlier(&mut self) {
        let Some(signal) = &mut self.signal else {
            return;
        };
        let mut context = Context::from_waker(Waker::noop());
        while let Poll::Ready(Some(())) = signal.poll_recv(&mut context) {}
    }
}

/// Waits for `request` at most `deadline`, and not after a Ctrl-C.
pub async fn call<T, F>(
    interrupts: &mut Interrupts,
    deadline: Duration,
    request: F,
) -> Result<T, CallError>
where
    F: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    tokio::select! {
        answer = within(deadline, request) => answer,
        () = interrupts.next() => Err(CallError::Interrupted),
    }
}

/// Waits for `request` at most `deadline` (Ctrl-C keeps its default meaning).
pub async fn within<T, F>(deadline: Duration, request: F) -> Result<T, CallError>
where
    F: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    match tokio::time::timeout(deadline, request).await {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(CallError::Hub(status)),
        Err(_) => Err(CallError::TimedOut(deadline)),
    }
}

/// The deadline in whole seconds (rounded up), for messages.
pub fn seconds(deadline: Duration) -> u64 {
    deadline.as_secs() + u64::from(deadline.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stalled_call_ends_at_its_deadline() {
        let stalled = std::future::pending::<Result<tonic::Response<()>, tonic::Status>>();
        let mut interrupts = Interrupts { signal: None };
        let result = call(&mut interrupts, Duration::from_millis(20), stalled).await;
        assert!(
            matches!(result, Err(CallError::TimedOut(d)) if d == Duration::from_millis(20)),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn answers_and_refusals_pass_through() {
        let ok = async { Ok(tonic::Response::new(7)) };
        let mut interrupts = Interrupts { signal: None };
        assert_eq!(call(&mut interrupts, CALL_DEADLINE, ok).await.unwrap(), 7);
        let refused = async { Err::<tonic::Response<()>, _>(tonic::Status::not_found("gone")) };
        let result = within(CALL_DEADLINE, refused).await;
        assert!(
            matches!(&result, Err(CallError::Hub(s)) if s.message() == "gone"),
            "{result:?}"
        );
    }

    #[test]
    fn the_variable_sets_the_ordinary_deadline() {
        assert_eq!(Deadlines::from_var(None), Deadlines::default());
        for bad in ["", "0", "-3", "soon", "1.5"] {
            assert_eq!(
                Deadlines::from_var(Some(bad)),
                Deadlines::default(),
                "{bad}"
            );
        }
        let short = Deadlines::from_var(Some(" 2 "));
        assert_eq!(short.call, Duration::from_secs(2));
        assert_eq!(short.compact, COMPACT_DEADLINE);
        let long = Deadlines::from_var(Some("900"));
        assert_eq!(long.compact, Duration::from_secs(900));
        assert_eq!(seconds(Duration::from_millis(1500)), 2);
        assert_eq!(seconds(Duration::from_secs(30)), 30);
    }
}
