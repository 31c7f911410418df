//! [`FakeModel`]: a model that answers from a script of [`FakeReply`]s (tests) or from a tiny rule
//! set (the offline demo). A scripted model records every request it received so tests can assert
//! what the model read.
//!
//! Invariants: it never touches the network; a scripted model that runs out of replies fails the
//! call (it never invents one); usage is reported either as scripted or as a deterministic estimate
//! (characters / 4), so token budgets can be tested. The demo model ([`FakeModel::demo`]) answers a
//! hub for as long as it runs, so it keeps nothing per call: its memory stays flat however many
//! turns it serves ([`FakeModel::demo_recording`] is the demo for tests that inspect requests).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::demo::demo_reply;
use super::reply::FakeReply;
use crate::message::{ContentBlock, ToolResultContent};
use crate::model::{Model, ModelError, ModelRequest, ModelStream};

enum Mode {
    Scripted(Mutex<VecDeque<FakeReply>>),
    Demo,
}

/// The fake model: scripted (tests) or demo (offline use).
pub struct FakeModel {
    mode: Mode,
    /// Every request received, when this model records them (scripted and test demo models).
    requests: Option<Mutex<Vec<ModelRequest>>>,
    calls: AtomicUsize,
}

impl std::fmt::Debug for FakeModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeModel")
            .field("calls", &self.calls.load(Ordering::Relaxed))
            .finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeModel {
    /// Answers each model call with the next reply; fails once the script is used up.
    pub fn scripted(replies: impl IntoIterator<Item = FakeReply>) -> Self {
        Self {
            mode: Mode::Scripted(Mutex::new(replies.into_iter().collect())),
            requests: Some(Mutex::new(Vec::new())),
            calls: AtomicUsize::new(0),
        }
    }

    /// The offline demo: a short friendly reply; `current_time` when asked the time ("time",
    /// "saat"); `demo_physical_action` when asked to switch something ("turn on/off", "switch",
    /// "aç", "kapat"); after a tool result it says what happened. It records no requests
    /// ([`FakeModel::requests`] stays empty), so a hub can run on it for months.
    pub fn demo() -> Self {
        Self {
            mode: Mode::Demo,
            requests: None,
            calls: AtomicUsize::new(0),
        }
    }

    /// The demo model, recording every request like a scripted one (tests only: the log grows
    /// with every call).
    pub fn demo_recording() -> Self {
        Self {
            mode: Mode::Demo,
            requests: Some(Mutex::new(Vec::new())),
            calls: AtomicUsize::new(0),
        }
    }

    /// Appends replies to the script (no effect in demo mode).
    pub fn push_replies(&self, replies: impl IntoIterator<Item = FakeReply>) {
        if let Mode::Scripted(script) = &self.mode {
            lock(script).extend(replies);
        }
    }

    /// Every request received, in order (empty for [`FakeModel::demo`], which records none).
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .as_ref()
            .map(|requests| lock(requests).clone())
            .unwrap_or_default()
    }

    /// The last request received (`None` for [`FakeModel::demo`], which records none).
    pub fn last_request(&self) -> Option<ModelRequest> {
        self.requests
            .as_ref()
            .and_then(|requests| lock(requests).last().cloned())
    }

    /// How many model calls were made.
    pub fn call_count(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

/// A deterministic token estimate of a request: characters / 4.
fn estimate_input_tokens(request: &ModelRequest) -> u64 {
    let mut chars = crate::message::SystemContentBlock::join(&request.system).len();
    for message in &request.messages {
        for block in &message.content {
            chars += match block {
                ContentBlock::Text(text) => text.len(),
                ContentBlock::ToolUse(tool_use) => tool_use.name.len() + 16,
                ContentBlock::ToolResult(result) => result
                    .content
                    .iter()
                    .map(|c| match c {
                        ToolResultContent::Text(text) => text.len(),
                        ToolResultContent::Json(_) => 16,
                        ToolResultContent::Image(image) => image.note().len(),
                    })
                    .sum(),
                _ => 0,
            };
        }
    }
    (chars as u64).div_ceil(4)
}

#[async_trait]
impl Model for FakeModel {
    fn name(&self) -> &str {
        "fake"
    }

    async fn stream(
        &self,
        request: ModelRequest,
        _cancel: CancellationToken,
    ) -> Result<ModelStream, ModelError> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let reply = match &self.mode {
            Mode::Scripted(script) => lock(script).pop_front(),
            Mode::Demo => Some(demo_reply(&request)),
        };
        let input_tokens = estimate_input_tokens(&request);
        if let Some(requests) = &self.requests {
            lock(requests).push(request);
        }
        let reply = reply
            .ok_or_else(|| ModelError::Request("FakeModel: no scripted reply left".to_owned()))?;
        if let Some(error) = reply.open_error.clone() {
            return Err(error);
        }
        let events = futures::stream::iter(reply.events(call, input_tokens));
        if reply.hang {
            Ok(events.chain(futures::stream::pending()).boxed())
        } else {
            Ok(events.boxed())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use std::sync::Arc;

    fn request(text: &str) -> ModelRequest {
        ModelRequest {
            system: Vec::new(),
            messages: vec![Message::user_text(text)]
                .into_iter()
                .map(Arc::new)
                .collect(),
            tools: Vec::new().into(),
        }
    }

    async fn call(model: &FakeModel, text: &str) {
        let stream = model.stream(request(text), CancellationToken::new()).await;
        assert!(stream.is_ok(), "the demo answers every call");
    }

    /// The hub's offline model serves turns for as long as the hub runs: it must not keep them.
    #[tokio::test]
    async fn the_demo_model_keeps_nothing_per_call() {
        let model = FakeModel::demo();
        for i in 0..50 {
            call(&model, &format!("hello {i}")).await;
        }
        assert_eq!(model.call_count(), 50);
        assert!(model.requests().is_empty());
        assert!(model.last_request().is_none());
    }

    #[tokio::test]
    async fn the_recording_demo_and_scripted_models_keep_every_request() {
        let model = FakeModel::demo_recording();
        call(&model, "one").await;
        call(&model, "two").await;
        assert_eq!(model.requests().len(), 2);
        let scripted = FakeModel::scripted([FakeReply::text("a")]);
        call(&scripted, "three").await;
        assert_eq!(
            scripted.last_request().map(|r| r.messages[0].text()),
            Some("three".to_owned())
        );
    }
}
