//! [`FakeModel`]: a model that answers from a script (tests) or from a tiny rule set (the offline
//! demo). A scripted model records every request it received so tests can assert what the model
//! read.
//!
//! Invariants: it never touches the network; a scripted model that runs out of replies fails the
//! call (it never invents one); usage is reported either as scripted or as a deterministic estimate
//! (characters / 4), so token budgets can be tested. The demo model ([`FakeModel::demo`]) answers a
//! hub for as long as it runs, so it keeps nothing per call: its memory stays flat however many
//! turns it serves ([`FakeModel::demo_recording`] is the demo for tests that inspect requests).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::demo::demo_reply;
use crate::message::{ContentBlock, ToolResultContent, Usage};
use crate::model::{
    Model, ModelError, ModelEvent, ModelRequest, ModelStream, ReasoningDelta, StopReason,
};

#[derive(Debug, Clone, PartialEq)]
enum FakeBlock {
    Text(Vec<String>),
    Reasoning(String),
    ToolUse {
        id: Option<String>,
        name: String,
        raw_input: String,
    },
}

/// One scripted model reply.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeReply {
    blocks: Vec<FakeBlock>,
    stop_reason: Option<StopReason>,
    usage: Option<Usage>,
    throttled: Option<Duration>,
    open_error: Option<ModelError>,
    stream_error: Option<ModelError>,
    hang: bool,
}

impl FakeReply {
    fn empty() -> Self {
        Self {
            blocks: Vec::new(),
            stop_reason: None,
            usage: None,
            throttled: None,
            open_error: None,
            stream_error: None,
            hang: false,
        }
    }

    /// Whether this reply calls a tool.
    #[cfg(test)]
    pub(super) fn calls_a_tool(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| matches!(b, FakeBlock::ToolUse { .. }))
    }

    /// A plain text answer in one delta.
    pub fn text(text: impl Into<String>) -> Self {
        Self::empty().and_text(text)
    }

    /// A text answer streamed in these deltas.
    pub fn deltas<S: Into<String>>(deltas: impl IntoIterator<Item = S>) -> Self {
        let mut reply = Self::empty();
        reply.blocks.push(FakeBlock::Text(
            deltas.into_iter().map(Into::into).collect(),
        ));
        reply
    }

    /// One tool call (id generated: `fake-<call>-<block>`).
    pub fn tool_call(name: impl Into<String>, input: Value) -> Self {
        Self::empty().and_tool_call(name, input)
    }

    /// Several tool calls in one message, in this order.
    pub fn tool_calls<S: Into<String>>(calls: impl IntoIterator<Item = (S, Value)>) -> Self {
        calls
            .into_iter()
            .fold(Self::empty(), |reply, (name, input)| {
                reply.and_tool_call(name, input)
            })
    }

    /// `Model::stream` itself fails.
    pub fn error(message: impl Into<String>) -> Self {
        let mut reply = Self::empty();
        reply.open_error = Some(ModelError::Request(message.into()));
        reply
    }

    /// `Model::stream` itself fails with `error` (e.g. an unavailable provider).
    pub fn fail(error: ModelError) -> Self {
        let mut reply = Self::empty();
        reply.open_error = Some(error);
        reply
    }

    /// Adds a text block.
    pub fn and_text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(FakeBlock::Text(vec![text.into()]));
        self
    }

    /// Adds a reasoning block.
    pub fn and_reasoning(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(FakeBlock::Reasoning(text.into()));
        self
    }

    /// Adds a tool call.
    pub fn and_tool_call(mut self, name: impl Into<String>, input: Value) -> Self {
        self.blocks.push(FakeBlock::ToolUse {
            id: None,
            name: name.into(),
            raw_input: input.to_string(),
        });
        self
    }

    /// Adds a tool call with this id.
    pub fn and_tool_call_with_id(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Self {
        self.blocks.push(FakeBlock::ToolUse {
            id: Some(id.into()),
            name: name.into(),
            raw_input: input.to_string(),
        });
        self
    }

    /// Adds a tool call whose input is this raw (possibly broken) JSON text.
    pub fn and_raw_tool_call(
        mut self,
        name: impl Into<String>,
        raw_input: impl Into<String>,
    ) -> Self {
        self.blocks.push(FakeBlock::ToolUse {
            id: None,
            name: name.into(),
            raw_input: raw_input.into(),
        });
        self
    }

    /// Reports this usage instead of the estimate.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(Usage {
            input_tokens,
            output_tokens,
            total_tokens: input_tokens + output_tokens,
            ..Usage::default()
        });
        self
    }

    /// Ends with this stop reason instead of `end_turn`/`tool_use`.
    pub fn with_stop_reason(mut self, stop_reason: StopReason) -> Self {
        self.stop_reason = Some(stop_reason);
        self
    }

    /// Announces a throttle of `delay` before the reply.
    pub fn throttled_first(mut self, delay: Duration) -> Self {
        self.throttled = Some(delay);
        self
    }

    /// After the blocks, the stream fails with this error instead of stopping.
    pub fn then_fail(mut self, message: impl Into<String>) -> Self {
        self.stream_error = Some(ModelError::Stream(message.into()));
        self
    }

    /// After the blocks, the stream never ends (until the caller gives up).
    pub fn then_hang(mut self) -> Self {
        self.hang = true;
        self
    }

    fn events(&self, call: usize, input_tokens: u64) -> Vec<Result<ModelEvent, ModelError>> {
        let mut events = Vec::new();
        if let Some(delay) = self.throttled {
            events.push(Ok(ModelEvent::Throttled { delay }));
        }
        let mut output_chars = 0usize;
        let mut has_tool = false;
        for (index, block) in self.blocks.iter().enumerate() {
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            match block {
                FakeBlock::Text(deltas) => {
                    for text in deltas {
                        output_chars += text.chars().count();
                        events.push(Ok(ModelEvent::TextDelta {
                            index,
                            text: text.clone(),
                        }));
                    }
                }
                FakeBlock::Reasoning(text) => {
                    output_chars += text.chars().count();
                    events.push(Ok(ModelEvent::ReasoningDelta {
                        index,
                        delta: ReasoningDelta::Text(text.clone()),
                    }));
                }
                FakeBlock::ToolUse {
                    id,
                    name,
                    raw_input,
                } => {
                    has_tool = true;
                    output_chars += raw_input.chars().count() + name.len();
                    let tool_use_id = id.clone().unwrap_or_else(|| format!("fake-{call}-{index}"));
                    events.push(Ok(ModelEvent::ToolUseStart {
                        index,
                        tool_use_id,
                        name: name.clone(),
                    }));
                    let split = raw_input.char_indices().nth(raw_input.chars().count() / 2);
                    let (head, tail) = raw_input.split_at(split.map_or(0, |(at, _)| at));
                    for part in [head, tail].into_iter().filter(|p| !p.is_empty()) {
                        events.push(Ok(ModelEvent::ToolUseInputDelta {
                            index,
                            partial_json: part.to_owned(),
                        }));
                    }
                }
            }
            events.push(Ok(ModelEvent::BlockStop { index }));
        }
        if let Some(error) = &self.stream_error {
            events.push(Err(error.clone()));
            return events;
        }
        if self.hang {
            return events;
        }
        let stop_reason = self.stop_reason.unwrap_or(if has_tool {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        });
        events.push(Ok(ModelEvent::MessageStop { stop_reason }));
        let usage = self.usage.unwrap_or_else(|| {
            let output_tokens = (output_chars as u64).div_ceil(4);
            Usage {
                input_tokens,
                output_tokens,
                total_tokens: input_tokens + output_tokens,
                ..Usage::default()
            }
        });
        events.push(Ok(ModelEvent::Metadata {
            usage: Some(usage),
            metrics: None,
        }));
        events
    }
}

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

    fn request(text: &str) -> ModelRequest {
        ModelRequest {
            system: Vec::new(),
            messages: vec![Message::user_text(text)],
            tools: Vec::new(),
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
