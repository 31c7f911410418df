//! Retries: a provider's single attempt ([`Transport`]) wrapped into a [`Model`] that retries what
//! the provider calls retryable, with capped exponential backoff and a bounded number of attempts.
//!
//! Invariants: every wait is announced by a `Throttled { delay }` event *before* the sleep (it also
//! voids what the failed attempt streamed); when the failed attempt had streamed content, an
//! `OutputDiscarded` comes first, so every client voids the partial reply; a server's retry hint is honoured up to
//! [`RetryPolicy::max_server_delay`]; waits and attempts stop at once when the call is cancelled
//! (the stream then just ends); after the last attempt the failure's own error is returned, so a
//! caller (the fallback) can tell an exhausted throttle (`Throttled`) or an unavailable provider
//! (`Unavailable`) from a request the provider refused.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::model::{Model, ModelError, ModelEvent, ModelRequest, ModelStream};

/// Whether (and when) a failed attempt may be tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAdvice {
    /// Never: the same request would fail the same way.
    Never,
    /// Yes, after the server's hint if it gave one, else after the policy's backoff.
    After(Option<Duration>),
}

/// One failed attempt: the error to report if it is the last, and whether to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub error: ModelError,
    pub retry: RetryAdvice,
}

impl Failure {
    /// A failure no retry can fix.
    pub fn fatal(error: ModelError) -> Self {
        Self {
            error,
            retry: RetryAdvice::Never,
        }
    }

    /// A failure worth retrying, after `hint` when the server named a delay.
    pub fn retryable(error: ModelError, hint: Option<Duration>) -> Self {
        Self {
            error,
            retry: RetryAdvice::After(hint),
        }
    }
}

/// The events of one attempt.
pub type AttemptStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, Failure>> + Send>>;

/// One provider attempt: send the request, stream the decoded events.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// The provider and model id, for logs.
    fn name(&self) -> &str;

    /// Sends `request` once. An error here is a failure before any output.
    async fn open(&self, request: &ModelRequest) -> Result<AttemptStream, Failure>;
}

/// How many attempts and how long to wait between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The first backoff; it doubles per retry.
    pub base_delay: Duration,
    /// The longest backoff.
    pub max_delay: Duration,
    /// The longest server-requested wait honoured (a longer hint is cut to this).
    pub max_server_delay: Duration,
    /// Take up to 25 % off each backoff at random, so clients do not retry in step.
    pub jitter: bool,
}

impl RetryPolicy {
    /// Anthropic's SDK schedule (0.5 s doubling to 8 s), with more attempts for a daemon.
    pub fn anthropic() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_server_delay: Duration::from_secs(60),
            jitter: true,
        }
    }

    /// AWS's standard schedule (1 s doubling to 20 s), with more attempts for throttling.
    pub fn bedrock() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(20),
            max_server_delay: Duration::from_secs(60),
            jitter: true,
        }
    }

    /// A model server on this machine or network (Ollama): quick retries (0.25 s doubling to
    /// 4 s), since a busy or restarting local server recovers fast or not at all.
    pub fn local() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(4),
            max_server_delay: Duration::from_secs(30),
            jitter: true,
        }
    }

    /// No waiting at all (tests): `max_attempts` attempts, zero backoff, no jitter; server hints
    /// are still honoured.
    pub fn immediate(max_attempts: u32) -> Self {
        Self {
            max_attempts,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
            max_server_delay: Duration::from_secs(60),
            jitter: false,
        }
    }

    /// The wait before retry number `retry` (0 for the first retry).
    pub fn delay(&self, retry: u32, hint: Option<Duration>) -> Duration {
        if let Some(hint) = hint {
            return hint.min(self.max_server_delay);
        }
        let factor = 2u32.saturating_pow(retry.min(16));
        let backoff = self.base_delay.saturating_mul(factor).min(self.max_delay);
        if self.jitter {
            backoff.mul_f64(1.0 - 0.25 * unit_random(retry))
        } else {
            backoff
        }
    }
}

/// A number in [0, 1), varied by the clock and `salt` (jitter only; no global state).
fn unit_random(salt: u32) -> f64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut x = u64::from(nanos) ^ (u64::from(salt) << 32) ^ 0x9E37_79B9_7F4A_7C15;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// A [`Transport`] with retries: the [`Model`] a provider hands out.
pub struct RetryingModel<T> {
    transport: Arc<T>,
    policy: RetryPolicy,
}

impl<T: Transport> RetryingModel<T> {
    pub fn new(transport: T, policy: RetryPolicy) -> Self {
        Self {
            transport: Arc::new(transport),
            policy,
        }
    }
}

#[async_trait]
impl<T: Transport> Model for RetryingModel<T> {
    fn name(&self) -> &str {
        self.transport.name()
    }

    async fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelStream, ModelError> {
        let run = Run {
            transport: Arc::clone(&self.transport),
            request,
            cancel,
            policy: self.policy,
            retries: 0,
            current: None,
            streamed: false,
            pending: None,
            wait: None,
            finished: false,
        };
        Ok(Box::pin(futures::stream::unfold(run, Run::step)))
    }
}

struct Run<T> {
    transport: Arc<T>,
    request: ModelRequest,
    cancel: CancellationToken,
    policy: RetryPolicy,
    retries: u32,
    current: Option<AttemptStream>,
    /// Whether the current attempt streamed content (a failure then voids it).
    streamed: bool,
    /// An event to send before anything else (the `Throttled` after an `OutputDiscarded`).
    pending: Option<ModelEvent>,
    wait: Option<Duration>,
    finished: bool,
}

/// Whether `event` is content a client shows (and a retry must void).
fn is_content(event: &ModelEvent) -> bool {
    matches!(
        event,
        ModelEvent::TextDelta { .. }
            | ModelEvent::ReasoningDelta { .. }
            | ModelEvent::ToolUseStart { .. }
            | ModelEvent::ToolUseInputDelta { .. }
    )
}

impl<T: Transport> Run<T> {
    async fn step(mut self) -> Option<(Result<ModelEvent, ModelError>, Self)> {
        let cancel = self.cancel.clone();
        loop {
            if let Some(event) = self.pending.take() {
                return Some((Ok(event), self));
            }
            if self.finished {
                return None;
            }
            if let Some(delay) = self.wait.take() {
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep(delay) => {}
                }
            }
            let Some(current) = self.current.as_mut() else {
                let opened = tokio::select! {
                    biased;
                    () = cancel.cancelled() => return None,
                    opened = self.transport.open(&self.request) => opened,
                };
                match opened {
                    Ok(stream) => {
                        self.current = Some(stream);
                        continue;
                    }
                    Err(failure) => {
                        let item = self.on_failure(failure);
                        return Some((item, self));
                    }
                }
            };
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => return None,
                next = current.next() => next,
            };
            match next {
                Some(Ok(event)) => {
                    self.streamed |= is_content(&event);
                    return Some((Ok(event), self));
                }
                Some(Err(failure)) => {
                    self.current = None;
                    let item = self.on_failure(failure);
                    return Some((item, self));
                }
                None => {
                    self.finished = true;
                    return None;
                }
            }
        }
    }

    /// Schedules a retry (and announces it, after voiding what the attempt streamed) or ends the
    /// call with the failure's error.
    fn on_failure(&mut self, failure: Failure) -> Result<ModelEvent, ModelError> {
        match failure.retry {
            RetryAdvice::After(hint) if self.retries + 1 < self.policy.max_attempts => {
                let delay = self.policy.delay(self.retries, hint);
                self.retries += 1;
                warn!(
                    model = self.transport.name(),
                    attempt = self.retries,
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "retrying after: {}",
                    failure.error
                );
                self.wait = Some(delay);
                if std::mem::take(&mut self.streamed) {
                    self.pending = Some(ModelEvent::Throttled { delay });
                    return Ok(ModelEvent::OutputDiscarded);
                }
                Ok(ModelEvent::Throttled { delay })
            }
            _ => {
                self.finished = true;
                Err(failure.error)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use crate::agent::StopReason;

    type Attempt = Result<Vec<Result<ModelEvent, Failure>>, Failure>;

    /// Attempts that fail as scripted, then succeed.
    struct Script {
        outcomes: Mutex<Vec<Attempt>>,
        opened: Mutex<u32>,
    }

    #[async_trait]
    impl Transport for Script {
        fn name(&self) -> &str {
            "script"
        }

        async fn open(&self, _request: &ModelRequest) -> Result<AttemptStream, Failure> {
            *self.opened.lock().unwrap() += 1;
            let next = self.outcomes.lock().unwrap().remove(0);
            next.map(|events| Box::pin(futures::stream::iter(events)) as AttemptStream)
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            system: Vec::new(),
            messages: Vec::new(),
            tools: Vec::new().into(),
        }
    }

    fn throttled(hint: Option<Duration>) -> Failure {
        Failure::retryable(ModelError::Throttled("slow down".into()), hint)
    }

    async fn collect(model: &dyn Model) -> Vec<Result<ModelEvent, ModelError>> {
        model
            .stream(request(), CancellationToken::new())
            .await
            .unwrap()
            .collect()
            .await
    }

    fn stop() -> ModelEvent {
        ModelEvent::MessageStop {
            stop_reason: StopReason::EndTurn,
        }
    }

    #[tokio::test]
    async fn throttled_open_then_mid_stream_failure_then_success() {
        let text = ModelEvent::TextDelta {
            index: 0,
            text: "par".into(),
        };
        let script = Script {
            outcomes: Mutex::new(vec![
                Err(throttled(Some(Duration::from_millis(3)))),
                Ok(vec![
                    Ok(text.clone()),
                    Err(Failure::retryable(
                        ModelError::Unavailable("overloaded".into()),
                        None,
                    )),
                ]),
                Ok(vec![Ok(stop())]),
            ]),
            opened: Mutex::new(0),
        };
        let model = RetryingModel::new(script, RetryPolicy::immediate(3));
        let events = collect(&model).await;
        assert_eq!(
            events,
            vec![
                Ok(ModelEvent::Throttled {
                    delay: Duration::from_millis(3)
                }),
                Ok(text),
                Ok(ModelEvent::OutputDiscarded),
                Ok(ModelEvent::Throttled {
                    delay: Duration::ZERO
                }),
                Ok(stop()),
            ]
        );
        assert_eq!(*model.transport.opened.lock().unwrap(), 3);
    }

    #[tokio::test]
    async fn only_an_attempt_that_streamed_content_is_discarded() {
        let meta = ModelEvent::Metadata {
            usage: None,
            metrics: None,
        };
        let reasoning = ModelEvent::ReasoningDelta {
            index: 0,
            delta: crate::model::ReasoningDelta::Text("hmm".into()),
        };
        let unavailable = || Failure::retryable(ModelError::Unavailable("gone".into()), None);
        let script = Script {
            outcomes: Mutex::new(vec![
                // Nothing shown before the failure: no discard.
                Ok(vec![Ok(meta.clone()), Err(unavailable())]),
                // Reasoning was shown: discarded before the wait is announced.
                Ok(vec![Ok(reasoning.clone()), Err(unavailable())]),
                // A failure to open after that: nothing new to discard.
                Err(unavailable()),
                Ok(vec![Ok(stop())]),
            ]),
            opened: Mutex::new(0),
        };
        let model = RetryingModel::new(script, RetryPolicy::immediate(4));
        let throttled = || {
            Ok(ModelEvent::Throttled {
                delay: Duration::ZERO,
            })
        };
        assert_eq!(
            collect(&model).await,
            vec![
                Ok(meta),
                throttled(),
                Ok(reasoning),
                Ok(ModelEvent::OutputDiscarded),
                throttled(),
                throttled(),
                Ok(stop()),
            ]
        );
    }

    #[tokio::test]
    async fn attempts_are_bounded_and_fatal_errors_are_not_retried() {
        let script = Script {
            outcomes: Mutex::new(vec![Err(throttled(None)), Err(throttled(None))]),
            opened: Mutex::new(0),
        };
        let model = RetryingModel::new(script, RetryPolicy::immediate(2));
        let events = collect(&model).await;
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[1],
            Err(ModelError::Throttled("slow down".into())),
            "the last failure's error is reported"
        );

        let script = Script {
            outcomes: Mutex::new(vec![Err(Failure::fatal(ModelError::Request("bad".into())))]),
            opened: Mutex::new(0),
        };
        let model = RetryingModel::new(script, RetryPolicy::immediate(5));
        assert_eq!(
            collect(&model).await,
            vec![Err(ModelError::Request("bad".into()))]
        );
        assert_eq!(*model.transport.opened.lock().unwrap(), 1);
    }

    #[tokio::test]
    async fn a_cancel_during_the_wait_ends_the_stream() {
        let script = Script {
            outcomes: Mutex::new(vec![Err(throttled(Some(Duration::from_secs(30))))]),
            opened: Mutex::new(0),
        };
        let model = RetryingModel::new(script, RetryPolicy::immediate(3));
        let cancel = CancellationToken::new();
        let mut stream = model.stream(request(), cancel.clone()).await.unwrap();
        assert_eq!(
            stream.next().await,
            Some(Ok(ModelEvent::Throttled {
                delay: Duration::from_secs(30)
            }))
        );
        cancel.cancel();
        let next = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
        assert_eq!(next, Ok(None));
    }

    #[test]
    fn backoff_doubles_is_capped_and_hints_win() {
        let policy = RetryPolicy {
            jitter: false,
            ..RetryPolicy::anthropic()
        };
        assert_eq!(policy.delay(0, None), Duration::from_millis(500));
        assert_eq!(policy.delay(1, None), Duration::from_secs(1));
        assert_eq!(policy.delay(10, None), Duration::from_secs(8));
        assert_eq!(
            policy.delay(3, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(600))),
            Duration::from_secs(60)
        );
        let jittered = RetryPolicy::anthropic().delay(2, None);
        assert!(jittered <= Duration::from_secs(2) && jittered >= Duration::from_millis(1500));
    }
}
