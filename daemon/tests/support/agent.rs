//! Helpers shared by the agent loop tests: test tools and small assertions.
#![allow(dead_code)]

use std::borrow::Borrow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use taud::agent::{AgentTurn, HistoryError, HistoryObserver, TurnEvent};
use taud::message::{Message, Role, ToolResult, ToolResultContent};
use taud::tool::{Tier, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use tokio::sync::Notify;

pub const DEADLINE: Duration = Duration::from_secs(10);

/// Tracks how many tools run at once.
#[derive(Default)]
pub struct Concurrency {
    pub running: AtomicUsize,
    pub most: AtomicUsize,
    pub finished: Mutex<Vec<String>>,
}

/// What a [`TestTool`] does when called.
pub enum Act {
    /// Returns `"<name> done"`.
    Done,
    /// Waits (bounded by `within`) for `signal`; says whether it came.
    WaitFor {
        signal: Arc<Notify>,
        within: Duration,
    },
    /// Signals `signal` when done.
    Signal(Arc<Notify>),
    /// Waits for the turn's cancel.
    UntilCancelled,
    /// Fails.
    Fail,
}

pub struct TestTool {
    spec: ToolSpec,
    act: Act,
    track: Arc<Concurrency>,
}

impl TestTool {
    pub fn shared(name: &str, tier: Tier, act: Act, track: &Arc<Concurrency>) -> Arc<dyn Tool> {
        Arc::new(Self {
            spec: ToolSpec::builder(name, format!("Test tool {name}."))
                .tier(tier)
                .build(),
            act,
            track: Arc::clone(track),
        })
    }
}

#[async_trait]
impl Tool for TestTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _input: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let now = self.track.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.track.most.fetch_max(now, Ordering::SeqCst);
        let name = &self.spec.name;
        let result = match &self.act {
            Act::Done => Ok(format!("{name} done")),
            Act::WaitFor { signal, within } => {
                match tokio::time::timeout(*within, signal.notified()).await {
                    Ok(()) => Ok(format!("{name} saw the signal")),
                    Err(_) => Ok(format!("{name} waited in vain")),
                }
            }
            Act::Signal(signal) => {
                tokio::task::yield_now().await;
                signal.notify_one();
                Ok(format!("{name} done"))
            }
            Act::UntilCancelled => {
                ctx.cancel.cancelled().await;
                Err(ToolError::Cancelled)
            }
            Act::Fail => Err(ToolError::Failed(format!("{name} broke"))),
        };
        self.track.running.fetch_sub(1, Ordering::SeqCst);
        lock(&self.track.finished).push(name.clone());
        result.map(ToolOutput::text)
    }
}

/// Records every appended message with its index, and the indices of each write (messages the
/// agent appended together are one write).
#[derive(Default)]
pub struct Recorder {
    pub appended: Mutex<Vec<(usize, Message)>>,
    pub writes: Mutex<Vec<Vec<usize>>>,
    pub fail: std::sync::atomic::AtomicBool,
}

impl HistoryObserver for Recorder {
    fn message_appended(&self, index: usize, message: &Message) -> Result<(), HistoryError> {
        self.messages_appended(index, &[Arc::new(message.clone())])
    }

    fn messages_appended(
        &self,
        first: usize,
        messages: &[Arc<Message>],
    ) -> Result<(), HistoryError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(HistoryError("disk full".into()));
        }
        let indices = (first..first + messages.len()).collect();
        lock(&self.appended).extend((first..).zip(messages.iter().map(|m| Message::clone(m))));
        lock(&self.writes).push(indices);
        Ok(())
    }
}

/// Locks a mutex, ignoring poisoning (a panicking test thread already failed its test).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads events until one matches, within the deadline; `None` if the stream ended or time ran out.
pub async fn wait_for(
    stream: &mut AgentTurn,
    matches: impl Fn(&TurnEvent) -> bool,
) -> Option<TurnEvent> {
    let found = tokio::time::timeout(DEADLINE, async {
        while let Some(event) = stream.next_event().await {
            if matches(&event) {
                return Some(event);
            }
        }
        None
    })
    .await;
    found.ok().flatten()
}

/// The text of a tool result.
pub fn result_text(result: &ToolResult) -> String {
    result
        .content
        .iter()
        .map(ToolResultContent::as_text)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every tool result in `messages` (held or shared), in order.
pub fn all_results<M: Borrow<Message>>(messages: &[M]) -> Vec<ToolResult> {
    messages
        .iter()
        .flat_map(|m| m.borrow().tool_results().cloned().collect::<Vec<_>>())
        .collect()
}

/// A catalog of `tools`, each added without error.
pub fn catalog(tools: Vec<Arc<dyn taud::tool::Tool>>) -> taud::tool::ToolCatalog {
    let mut catalog = taud::tool::ToolCatalog::new();
    for tool in tools {
        assert_eq!(catalog.add(tool), Ok(()));
    }
    catalog
}

/// Each message's role and text (messages held or shared).
pub fn texts<M: Borrow<Message>>(messages: &[M]) -> Vec<(Role, String)> {
    messages
        .iter()
        .map(|m| (m.borrow().role, m.borrow().text()))
        .collect()
}
