//! The MCP conversation with one running server, on rmcp: the handshake, `tools/list` (paged, with a
//! cap) and `tools/call`, each under a tau deadline; `list_changed` notifications forwarded to the
//! supervisor.
//!
//! Invariants: no rmcp type leaves this module except the cheap `Peer` handle inside
//! [`Connection`]; every request has a deadline (rmcp sets none); the client declares no
//! capabilities (no sampling, roots or elicitation), so a server cannot ask anything outside the
//! gate; a dropped or timed-out call sends `notifications/cancelled` (rmcp does on drop).

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion,
};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService, ServiceError};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::mpsc;

use super::McpError;

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

/// How a call ended without a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The deadline passed: the server may or may not have acted.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The server answered with a protocol error (unknown tool, bad params).
    #[error("{0}")]
    Protocol(String),
    /// The connection went away mid-call (the server died): outcome unknown too.
    #[error("the server's connection closed during the call")]
    Closed,
}

/// Forwards `list_changed` to the supervisor; everything else keeps rmcp's defaults.
struct Handler {
    changed: mpsc::Sender<()>,
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
        // Full means a refresh is already queued.
        let _ = self.changed.try_send(());
    }
}

/// A live MCP session. Dropping it closes the transport.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
}

/// A cheap handle for calls, shared with tool adapters.
#[derive(Clone)]
pub struct CallHandle {
    peer: Peer<RoleClient>,
}

impl Connection {
    /// Performs the handshake over the server's pipes within `deadline`; `changed` receives a
    /// message per `list_changed`.
    pub async fn connect(
        stdout: ChildStdout,
        stdin: ChildStdin,
        deadline: Duration,
        changed: mpsc::Sender<()>,
    ) -> Result<Self, McpError> {
        let handler = Handler { changed };
        match tokio::time::timeout(deadline, handler.serve((stdout, stdin))).await {
            Ok(Ok(service)) => Ok(Self { service }),
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
    /// `tools/call` of `name` with `arguments`, within `deadline`. The result is the server's
    /// `CallToolResult` as JSON (`content`, `isError`, `structuredContent`).
    pub async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        deadline: Duration,
    ) -> Result<Value, CallError> {
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(deadline, self.peer.call_tool(params)).await {
            Err(_) => Err(CallError::Timeout(deadline)),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                Err(CallError::Closed)
            }
            Ok(Err(e)) => Err(CallError::Protocol(e.to_string())),
            Ok(Ok(result)) => {
                serde_json::to_value(&result).map_err(|e| CallError::Protocol(e.to_string()))
            }
        }
    }

    /// Whether the transport is gone.
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
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
