//! [`MeteredModel`]: a role's model that counts each call's usage with the [`SpendMeter`] and
//! keeps the role within its daily budget.
//!
//! Invariants: a role over its budget is served by its fallback model, or each call is refused
//! with [`ModelError::BudgetExceeded`] before anything is sent when it has none; a call's usage
//! (the last `Metadata` it streamed) is counted exactly once, when its stream ends or is dropped.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use futures::Stream;
use tokio_util::sync::CancellationToken;

use super::meter::SpendMeter;
use crate::message::Usage;
use crate::model::{Model, ModelError, ModelEvent, ModelRequest, ModelStream};

/// A role's model under the spend meter.
pub struct MeteredModel {
    role: String,
    model: Arc<dyn Model>,
    /// The role's fallback model alone, used while the role is over its budget.
    fallback: Option<Arc<dyn Model>>,
    meter: Arc<SpendMeter>,
}

impl MeteredModel {
    pub fn new(
        role: impl Into<String>,
        model: Arc<dyn Model>,
        fallback: Option<Arc<dyn Model>>,
        meter: Arc<SpendMeter>,
    ) -> Self {
        Self {
            role: role.into(),
            model,
            fallback,
            meter,
        }
    }
}

#[async_trait]
impl Model for MeteredModel {
    fn name(&self) -> &str {
        self.model.name()
    }

    fn fallback_in_use(&self) -> bool {
        self.model.fallback_in_use()
            || (self.fallback.is_some() && self.meter.over_budget(&self.role).is_some())
    }

    async fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelStream, ModelError> {
        let (model, forced) = match self.meter.over_budget(&self.role) {
            None => (Arc::clone(&self.model), false),
            Some(over) => match &self.fallback {
                Some(fallback) => {
                    tracing::info!(role = %self.role, "the role is over its daily budget; its fallback model answers");
                    (Arc::clone(fallback), true)
                }
                None => return Err(ModelError::BudgetExceeded(over.refusal())),
            },
        };
        let inner = model.stream(request, cancel).await?;
        Ok(Box::pin(MeteredStream {
            inner,
            usage: None,
            counter: Some(Counter {
                meter: Arc::clone(&self.meter),
                role: self.role.clone(),
                model,
                forced,
            }),
        }))
    }
}

/// Counts one call once.
struct Counter {
    meter: Arc<SpendMeter>,
    role: String,
    /// The model that served the call (it tells whether its own fallback answered).
    model: Arc<dyn Model>,
    /// Sent to the fallback because the role was over its budget.
    forced: bool,
}

struct MeteredStream {
    inner: ModelStream,
    usage: Option<Usage>,
    counter: Option<Counter>,
}

impl MeteredStream {
    fn count(&mut self) {
        let (Some(counter), Some(usage)) = (self.counter.take(), self.usage.take()) else {
            return;
        };
        let by_fallback = counter.forced || counter.model.fallback_in_use();
        counter.meter.record(&counter.role, by_fallback, &usage);
    }
}

impl Stream for MeteredStream {
    type Item = Result<ModelEvent, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.inner.as_mut().poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(ModelEvent::Metadata {
                usage: Some(usage), ..
            }))) => self.usage = Some(*usage),
            Poll::Ready(None) => self.count(),
            _ => {}
        }
        next
    }
}

impl Drop for MeteredStream {
    fn drop(&mut self) {
        self.count();
    }
}
