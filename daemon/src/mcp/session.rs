//! The MCP conversation with one running server, on rmcp: the handshake, `tools/list` (paged, with a
//! cap) and `tools/call`, each under a tau deadline; `list_changed` notifications counted for the
//! supervisor.
//!
//! Invariants: no rmcp type leaves this module except the cheap `Peer` handle inside
//! [`Connection`]; every request has a deadline (rmcp sets none); the client declares no
//! capabilities (no sampling, roots or elicitation), so a server cannot ask anything outside the
//! gate; a call's clock is an idle timeout that a progress notification from the server starts
//! over, under a hard cap, and whose `notifications/progress` reach the caller's
//! `ProgressReporter` while it runs (routed by the request's progress token); a dropped or timed-out call sends `notifications/cancelled` (rmcp does on
//! a timeout, [`CancelOnDrop`] when the caller gives up).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, Implementation, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, RequestId, ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RoleClient, RunningService, ServiceError,
};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::watch;

use super::McpError;
use super::list_refresh::count_change;
use crate::tool::{ProgressReporter, ToolProgress};

/// Most `tools/list` pages read.
pub const MAX_PAGES: usize = 20;
/// Most tools kept from one server.
pub const MAX_TOOLS: usize = 500;

/// A tool as the server lists it (its JSON, untrusted).
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// `annotations` as the server sent them (hints only).
    pub annotations: Map<String, Value>,
}

impl ListedTool {
    /// Whether the server says the tool is destructive (`destructiveHint` true, or absent on a tool
    /// that is not read-only, as the spec defaults it).
    pub fn claims_destructive(&self) -> bool {
        let read_only = self.annotations.get("readOnlyHint") == Some(&Value::Bool(true));
        match self.annotations.get("destructiveHint") {
            Some(Value::Bool(b)) => *b && !read_only,
            _ => !read_only,
        }
    }

    /// Whether the server says the tool only reads.
    pub fn claims_read_only(&self) -> bool {
        self.annotations.get("readOnlyHint") == Some(&Value::Bool(true))
    }
}

/// How long one `tools/call` may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// Longest wait without an answer or a progress notification.
    pub idle: Duration,
    /// Longest wait in all, progress or not.
    pub max: Duration,
}

/// How a call ended without a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The server went quiet (no answer, no progress) for this long: it may or may not have acted.
    #[error("timed out after {0:?} without an answer or progress")]
    Timeout(Duration),
    /// The server was still working (reporting progress) when the hard cap passed.
    #[error("still running after the {0:?} cap")]
    CapReached(Duration),
    /// The server answered with a protocol error (unknown tool, bad params).
    #[error("{0}")]
    Protocol(String),
    /// The connection went away mid-call (the server died): outcome unknown too.
    #[error("the server's connection closed during the call")]
    Closed,
}

/// Where each running call's progress goes, by the progress token rmcp put on its request.
/// Entries live only while their call runs ([`ProgressRoute`] removes them); the map is a small
/// mutex never held across an await.
#[derive(Clone, Default)]
struct ProgressRoutes(Arc<Mutex<HashMap<ProgressToken, ProgressReporter>>>);

impl ProgressRoutes {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, ProgressReporter>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `notifications/progress` to its call's reporter (a token of no running call is
    /// ignored, as the spec allows).
    fn deliver(&self, params: ProgressNotificationParam) {
        let reporter = self.lock().get(&params.progress_token).cloned();
        if let Some(reporter) = reporter {
            reporter.report(ToolProgress {
                message: params.message.unwrap_or_default(),
                progress: Some(params.progress),
                total: params.total,
            });
        }
    }
}

/// A call's entry in [`ProgressRoutes`], removed when the call ends however it ends.
struct ProgressRoute {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        let removed = self.routes.lock().remove(&self.token);
        drop(removed);
    }
}

/// Counts `list_changed` for the supervisor and routes progress to the calls; everything else
/// keeps rmcp's defaults.
struct Handler {
    changed: watch::Sender<u64>,
    routes: ProgressRoutes,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("taud", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        count_change(&self.changed);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.routes.deliver(params);
    }
}

/// A live MCP session. Dropping it closes the transport.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    routes: ProgressRoutes,
}

/// A cheap handle for calls, shared with tool adapters.
#[derive(Clone)]
pub struct CallHandle {
    peer: Peer<RoleClient>,
    routes: ProgressRoutes,
}

impl Connection {
    /// Performs the handshake over the server's pipes within `deadline`; `changed` counts the
    /// server's `list_changed` notifications.
    pub async fn connect(
        stdout: ChildStdout,
        stdin: ChildStdin,
        deadline: Duration,
        changed: watch::Sender<u64>,
    ) -> Result<Self, McpError> {
        let routes = ProgressRoutes::default();
        let handler = Handler {
            changed,
            routes: routes.clone(),
        };
        match tokio::time::timeout(deadline, handler.serve((stdout, stdin))).await {
            Ok(Ok(service)) => Ok(Self { service, routes }),
            Ok(Err(e)) => Err(McpError::Handshake(e.to_string())),
            Err(_) => Err(McpError::Timeout {
                what: "the handshake",
                after: deadline,
            }),
        }
    }

    /// A handle for calls.
    pub fn handle(&self) -> CallHandle {
        CallHandle {
            peer: self.service.peer().clone(),
            routes: self.routes.clone(),
        }
    }

    /// Every tool, page by page (at most [`MAX_PAGES`] pages and [`MAX_TOOLS`] tools), within
    /// `deadline` for the whole listing.
    pub async fn list_tools(&self, deadline: Duration) -> Result<Vec<ListedTool>, McpError> {
        let peer = self.service.peer();
        let listing = async {
            let mut tools = Vec::new();
            let mut cursor: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let params = cursor
                    .take()
                    .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
                let page = peer
                    .list_tools(params)
                    .await
                    .map_err(|e| McpError::Protocol(e.to_string()))?;
                for tool in &page.tools {
                    let value = serde_json::to_value(tool)
                        .map_err(|e| McpError::Protocol(e.to_string()))?;
                    tools.push(listed(value));
                }
                match page.next_cursor {
                    Some(next) if tools.len() < MAX_TOOLS => cursor = Some(next),
                    _ => break,
                }
            }
            tools.truncate(MAX_TOOLS);
            Ok(tools)
        };
        tokio::time::timeout(deadline, listing)
            .await
            .map_err(|_| McpError::Timeout {
                what: "tools/list",
                after: deadline,
            })?
    }

    /// Closes the session (stdin EOF; the supervisor kills the group after).
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_millis(500), self.service.close()).await;
    }
}

impl CallHandle {
    /// `tools/call` of `name` with `arguments`, within `limits`; the server's
    /// `notifications/progress` for it go to `progress`. The result is the server's
    /// `CallToolResult` as JSON (`content`, `isError`, `structuredContent`).
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        limits: CallLimits,
        progress: &ProgressReporter,
    ) -> Result<Value, CallError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = PeerRequestOptions::with_timeout(limits.idle)
            .reset_timeout_on_progress()
            .with_max_total_timeout(limits.max);
        let exchange = async {
            let handle = self.peer.send_cancellable_request(request, options).await?;
            self.routes
                .lock()
                .insert(handle.progress_token.clone(), progress.clone());
            let _route = ProgressRoute {
                routes: self.routes.clone(),
                token: handle.progress_token.clone(),
            };
            let mut guard = CancelOnDrop {
                peer: self.peer.clone(),
                id: Some(handle.id.clone()),
            };
            let result = handle.await_response().await;
            // Answered, or rmcp already sent the cancel of its timeout.
            guard.id = None;
            result
        };
        // rmcp's own clocks end the exchange; this one also bounds queueing the request.
        let outcome = tokio::time::timeout(limits.max + CAP_SLACK, exchange).await;
        match outcome {
            Err(_) => Err(CallError::CapReached(limits.max)),
            Ok(Err(ServiceError::Timeout { timeout })) if timeout >= limits.max => {
                Err(CallError::CapReached(limits.max))
            }
            Ok(Err(ServiceError::Timeout { timeout })) => Err(CallError::Timeout(timeout)),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                Err(CallError::Closed)
            }
            Ok(Err(e)) => Err(CallError::Protocol(e.to_string())),
            Ok(Ok(result)) => call_result(result),
        }
    }

    /// Whether the transport is gone.
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
    }
}

/// How much longer than the cap the whole exchange may take (queueing the request included).
const CAP_SLACK: Duration = Duration::from_secs(1);

/// Sends `notifications/cancelled` for a call whose caller stopped waiting (the turn was
/// interrupted), unless it was answered first.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        let param = CancelledNotificationParam::new(
            Some(id),
            Some("request abandoned by the caller".to_owned()),
        );
        runtime.spawn(async move {
            let _ = peer.notify_cancelled(param).await;
        });
    }
}

/// A `tools/call` answer as JSON. A reply without `content` decodes as another result kind and is
/// taken as it is; one that needs interactive input or became a task is refused (tau supports
/// neither).
fn call_result(result: ServerResult) -> Result<Value, CallError> {
    match result {
        ServerResult::CallToolResult(result) => {
            serde_json::to_value(&result).map_err(|e| CallError::Protocol(e.to_string()))
        }
        ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_) => {
            Err(CallError::Protocol(
                "the server requires interactive input or a task, which tau does not support"
                    .to_owned(),
            ))
        }
        ServerResult::EmptyResult(_)
        | ServerResult::TaskAckResult(_)
        | ServerResult::CustomResult(_) => {
            serde_json::to_value(&result).map_err(|e| CallError::Protocol(e.to_string()))
        }
        _ => Err(CallError::Protocol(
            "the server answered tools/call with another kind of result".to_owned(),
        )),
    }
}

fn listed(value: Value) -> ListedTool {
    let text = |key: &str| value.get(key).and_then(Value::as_str).unwrap_or_default();
    ListedTool {
        name: text("name").to_owned(),
        description: text("description").to_owned(),
        input_schema: value
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        annotations: value
            .get("annotations")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    }
}
