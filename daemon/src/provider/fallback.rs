//! [`FallbackModel`]: a role's primary model with a second provider/model behind it.
//!
//! Invariants: the fallback answers only when the primary fails with an exhausted throttle
//! (`ModelError::Throttled`) or is unavailable (`ModelError::Unavailable`, which the retry layer
//! returns once its attempts are spent); any other error (a refused request) is the caller's.
//! Content the primary streamed before it failed (and that its retries did not already void with
//! `Throttled` or `OutputDiscarded`) is voided with `OutputDiscarded` before the fallback's first
//! event. After a switch the role stays on the fallback for a cool-down, then
//! tries the primary again. [`Model::fallback_in_use`] tells whether the last call was answered
//! by the fallback. The state is a small mutex never held across an await.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::model::{Model, ModelError, ModelEvent, ModelRequest, ModelStream};

/// How long a role stays on its fallback before the primary is tried again.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(300);

#[derive(Debug, Default)]
struct State {
    /// Until when calls go straight to the fallback.
    fallback_until: Option<Instant>,
    /// Whether the most recent call was answered by the fallback.
    last_used_fallback: bool,
}

/// A primary model with a fallback.
pub struct FallbackModel {
    primary: Arc<dyn Model>,
    fallback: Arc<dyn Model>,
    cooldown: Duration,
    name: String,
    state: Arc<Mutex<State>>,
}

impl FallbackModel {
    pub fn new(primary: Arc<dyn Model>, fallback: Arc<dyn Model>, cooldown: Duration) -> Self {
        let name = format!("{} (fallback {})", primary.name(), fallback.name());
        Self {
            primary,
            fallback,
            cooldown,
            name,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether `error` sends a call to the fallback.
pub fn falls_back_on(error: &ModelError) -> bool {
    matches!(error, ModelError::Throttled(_) | ModelError::Unavailable(_))
}

#[async_trait]
impl Model for FallbackModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn fallback_in_use(&self) -> bool {
        self.lock().last_used_fallback
    }

    async fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelStream, ModelError> {
        let skip_primary = {
            let mut state = self.lock();
            match state.fallback_until {
                Some(until) if Instant::now() < until => true,
                Some(_) => {
                    state.fallback_until = None;
                    false
                }
                None => false,
            }
        };
        if skip_primary {
            self.lock().last_used_fallback = true;
            return self.fallback.stream(request, cancel).await;
        }
        let switch = Switch {
            fallback: Arc::clone(&self.fallback),
            state: Arc::clone(&self.state),
            cooldown: self.cooldown,
            primary_name: self.primary.name().to_owned(),
        };
        match self.primary.stream(request.clone(), cancel.clone()).await {
            Ok(primary) => {
                let run = Run {
                    phase: Phase::Primary(primary),
                    request: Some(request),
                    cancel,
                    switch,
                    streamed: false,
                };
                Ok(Box::pin(futures::stream::unfold(run, Run::step)))
            }
            Err(error) if falls_back_on(&error) => {
                switch.engage(&error);
                self.fallback.stream(request, cancel).await
            }
            Err(error) => {
                self.lock().last_used_fallback = false;
                Err(error)
            }
        }
    }
}

struct Switch {
    fallback: Arc<dyn Model>,
    state: Arc<Mutex<State>>,
    cooldown: Duration,
    primary_name: String,
}

impl Switch {
    fn engage(&self, error: &ModelError) {
        warn!(
            primary = %self.primary_name,
            fallback = self.fallback.name(),
            "switching to the fallback model: {error}"
        );
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.fallback_until = Instant::now().checked_add(self.cooldown);
        state.last_used_fallback = true;
    }

    fn primary_answered(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.last_used_fallback = false;
    }
}

enum Phase {
    Primary(ModelStream),
    Fallback(ModelStream),
    Done,
}

struct Run {
    phase: Phase,
    request: Option<ModelRequest>,
    cancel: CancellationToken,
    switch: Switch,
    /// Whether the primary streamed content not voided since (then the switch voids it).
    streamed: bool,
}

impl Run {
    async fn step(mut self) -> Option<(Result<ModelEvent, ModelError>, Self)> {
        loop {
            match &mut self.phase {
                Phase::Done => return None,
                Phase::Fallback(stream) => {
                    let next = stream.next().await;
                    if next.is_none() {
                        self.phase = Phase::Done;
                    }
                    return next.map(|item| (item, self));
                }
                Phase::Primary(stream) => match stream.next().await {
                    Some(Ok(event)) => {
                        match event {
                            ModelEvent::MessageStop { .. } => self.switch.primary_answered(),
                            // Both void what came before: nothing shown is left to discard.
                            ModelEvent::Throttled { .. } | ModelEvent::OutputDiscarded => {
                                self.streamed = false;
                            }
                            ModelEvent::TextDelta { .. }
                            | ModelEvent::ReasoningDelta { .. }
                            | ModelEvent::ToolUseStart { .. }
                            | ModelEvent::ToolUseInputDelta { .. } => self.streamed = true,
                            ModelEvent::BlockStop { .. } | ModelEvent::Metadata { .. } => {}
                        }
                        return Some((Ok(event), self));
                    }
                    Some(Err(error)) if falls_back_on(&error) => {
                        self.switch.engage(&error);
                        let request = self.request.take()?;
                        match self
                            .switch
                            .fallback
                            .stream(request, self.cancel.clone())
                            .await
                        {
                            Ok(stream) => self.phase = Phase::Fallback(stream),
                            Err(error) => {
                                self.phase = Phase::Done;
                                return Some((Err(error), self));
                            }
                        }
                        if std::mem::take(&mut self.streamed) {
                            return Some((Ok(ModelEvent::OutputDiscarded), self));
                        }
                    }
                    Some(Err(error)) => {
                        self.phase = Phase::Done;
                        return Some((Err(error), self));
                    }
                    None => {
                        self.phase = Phase::Done;
                        return None;
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::StopReason;
    use crate::testing::{FakeModel, FakeReply};

    fn request() -> ModelRequest {
        ModelRequest {
            system: Vec::new(),
            messages: vec![crate::message::Message::user_text("hi")]
                .into_iter()
                .map(Arc::new)
                .collect(),
            tools: Vec::new().into(),
        }
    }

    async fn collect(model: &dyn Model) -> Vec<Result<ModelEvent, ModelError>> {
        match model.stream(request(), CancellationToken::new()).await {
            Ok(stream) => stream.collect().await,
            Err(error) => vec![Err(error)],
        }
    }

    /// A model whose stream yields these items.
    struct Canned(Mutex<Vec<Vec<Result<ModelEvent, ModelError>>>>);

    #[async_trait]
    impl Model for Canned {
        fn name(&self) -> &str {
            "canned"
        }

        async fn stream(
            &self,
            _request: ModelRequest,
            _cancel: CancellationToken,
        ) -> Result<ModelStream, ModelError> {
            let items = self.0.lock().unwrap().remove(0);
            Ok(Box::pin(futures::stream::iter(items)))
        }
    }

    fn texts(events: &[Result<ModelEvent, ModelError>]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                Ok(ModelEvent::TextDelta { text, .. }) => Some(text.clone()),
                Ok(ModelEvent::OutputDiscarded) => Some("<discarded>".into()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn unavailable_mid_stream_discards_and_switches_then_cools_down() {
        let primary = Arc::new(Canned(Mutex::new(vec![
            vec![
                Ok(ModelEvent::TextDelta {
                    index: 0,
                    text: "half".into(),
                }),
                Err(ModelError::Unavailable("overloaded".into())),
            ],
            vec![
                Ok(ModelEvent::TextDelta {
                    index: 0,
                    text: "primary".into(),
                }),
                Ok(ModelEvent::MessageStop {
                    stop_reason: StopReason::EndTurn,
                }),
            ],
        ])));
        let fallback = Arc::new(FakeModel::scripted([
            FakeReply::text("from fallback"),
            FakeReply::text("still fallback"),
        ]));
        let model = FallbackModel::new(primary, fallback.clone(), Duration::from_secs(600));
        assert!(!model.fallback_in_use());
        let events = collect(&model).await;
        assert_eq!(texts(&events), vec!["half", "<discarded>", "from fallback"]);
        assert!(model.fallback_in_use());
        // Within the cool-down the primary is not asked.
        let events = collect(&model).await;
        assert_eq!(texts(&events), vec!["still fallback"]);
        assert_eq!(fallback.call_count(), 2);
        // After it, the primary answers again and the status says so.
        model.lock().fallback_until = Some(Instant::now());
        let events = collect(&model).await;
        assert_eq!(texts(&events), vec!["primary"]);
        assert!(!model.fallback_in_use());
    }

    #[tokio::test]
    async fn throttle_notices_alone_are_not_discarded_output() {
        let throttled = || {
            Ok(ModelEvent::Throttled {
                delay: Duration::ZERO,
            })
        };
        let half = || {
            Ok(ModelEvent::TextDelta {
                index: 0,
                text: "half".into(),
            })
        };
        let primary = Arc::new(Canned(Mutex::new(vec![
            // Only throttle notices, then the retries give up.
            vec![
                throttled(),
                throttled(),
                Err(ModelError::Throttled("slow down".into())),
            ],
            // Content the retry layer already voided before its next wait.
            vec![
                half(),
                Ok(ModelEvent::OutputDiscarded),
                throttled(),
                Err(ModelError::Throttled("slow down".into())),
            ],
        ])));
        let fallback = Arc::new(FakeModel::scripted([
            FakeReply::text("from fallback"),
            FakeReply::text("again fallback"),
        ]));
        let model = FallbackModel::new(primary, fallback, Duration::ZERO);
        let events = collect(&model).await;
        assert_eq!(texts(&events), vec!["from fallback"]);
        assert!(!events.contains(&Ok(ModelEvent::OutputDiscarded)));
        let events = collect(&model).await;
        assert_eq!(
            texts(&events),
            vec!["half", "<discarded>", "again fallback"],
            "one discard, the retry layer's"
        );
    }

    #[tokio::test]
    async fn a_refused_request_does_not_fall_back() {
        let primary = Arc::new(Canned(Mutex::new(vec![vec![Err(ModelError::Request(
            "400 invalid".into(),
        ))]])));
        let fallback = Arc::new(FakeModel::scripted([FakeReply::text("unused")]));
        let model = FallbackModel::new(primary, fallback.clone(), DEFAULT_COOLDOWN);
        let events = collect(&model).await;
        assert_eq!(events, vec![Err(ModelError::Request("400 invalid".into()))]);
        assert_eq!(fallback.call_count(), 0);
        assert!(!model.fallback_in_use());
    }
}
