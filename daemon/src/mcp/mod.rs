//! MCP tools: the owner's Model Context Protocol servers, started by the hub, their tools offered
//! to the model behind the tier gate with the tier the owner wrote in `[mcp.servers.*]`.
//!
//! Parts: `spec` (configuration → what to start, environment), `launch` (process group, stderr
//! drain, group kill), `session` (rmcp client with deadlines), `adapter` (a tool as a tau
//! [`crate::tool::Tool`]), `result` (results → model blocks, capped), `names` (`mcp__<server>__<tool>`: the naming
//! rule, and the table that gives each name one owner),
//! `list_refresh` (`list_changed` debounced, an older listing never replacing a newer one),
//! `supervisor` (restart with backoff, given up on a server that keeps dying), `status` (what the
//! hub shows).
//!
//! Invariants: a tool without an owner's tier is never offered; a server's annotations never set or
//! lower a tier; no hub start, turn or other server ever waits on a server (servers start in their
//! own tasks, and every request has a deadline); after [`McpManager::stop`] no process of any
//! server's group is left; rmcp types stay inside this module; no two (server, tool) pairs are ever
//! offered under one name, and a name never changes owner while the hub runs (see `names`).

mod adapter;
mod launch;
mod list_refresh;
mod names;
mod result;
mod server_spec;
mod session;
mod status;
mod supervisor;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use adapter::{McpTool, distribution};
pub use names::{MAX_NAME_LEN, NameError, NameTable, NameTaken, check_names, model_name};
pub use result::{MAX_RESULT_BYTES, to_output};
pub use server_spec::{Backoff, McpServerSpec, RestartLimit, ToolTier, specs_from_config};
pub use status::{Phase, ServerStatus, ToolListing, ToolState};

use crate::tool::Tool;
use supervisor::{ServerShared, supervise};

/// Why a server could not be started or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("cannot start {command:?}: {reason}")]
    Spawn { command: String, reason: String },
    #[error("handshake failed: {0}")]
    Handshake(String),
    #[error("{what} timed out after {after:?}")]
    Timeout { what: &'static str, after: Duration },
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("the server exited ({0})")]
    Exited(String),
}

/// The hub's MCP servers. Cheap to share (`Arc`).
pub struct McpManager {
    specs: Vec<McpServerSpec>,
    names: Arc<NameTable>,
    servers: Vec<Arc<ServerShared>>,
    published: Arc<watch::Sender<u64>>,
    stop: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpManager")
            .field(
                "servers",
                &self.specs.iter().map(|s| &s.key).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl McpManager {
    /// A manager for `specs`; nothing starts before [`McpManager::start`]. The hub refuses specs
    /// that [`check_names`] refuses before it gets here; given such specs anyway, a tool whose name
    /// another owns is refused when listed (logged, `refused` in the status).
    pub fn new(specs: Vec<McpServerSpec>) -> Self {
        let (names, problems) = NameTable::build(&specs);
        for problem in problems {
            tracing::error!("{problem}");
        }
        let published = Arc::new(watch::channel(0u64).0);
        let servers = specs
            .iter()
            .map(|spec| Arc::new(ServerShared::new(spec, Arc::clone(&published))))
            .collect();
        Self {
            specs,
            names: Arc::new(names),
            servers,
            published,
            stop: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
        }
    }

    /// Whether any server is configured.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Starts every server in its own task (returns at once). Calling it again does nothing.
    pub fn start(&self) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        if !tasks.is_empty() || self.stop.is_cancelled() {
            return;
        }
        for (spec, shared) in self.specs.iter().zip(&self.servers) {
            tasks.push(tokio::spawn(supervise(
                spec.clone(),
                Arc::clone(shared),
                Arc::clone(&self.names),
                self.stop.child_token(),
            )));
        }
    }

    /// The tiered tools of every ready server, as the catalog takes them.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.servers
            .iter()
            .flat_map(|server| server.tools())
            .map(|tool| tool as Arc<dyn Tool>)
            .collect()
    }

    /// Changes whenever a server's tools are published anew (a listing, a `list_changed`, a
    /// death or a restart): what [`McpManager::tools`] returns may then differ. A node re-announces
    /// the tools it lends on it.
    pub fn watch_tools(&self) -> watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// Every server's status.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| s.snapshot()).collect()
    }

    /// Stops every server: closes each session, kills each process group and waits for the
    /// supervisors (at most `deadline`).
    pub async fn stop(&self, deadline: Duration) {
        self.stop.cancel();
        let tasks: Vec<JoinHandle<()>> = self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
            .collect();
        let all = futures::future::join_all(tasks);
        if tokio::time::timeout(deadline, all).await.is_err() {
            tracing::warn!("mcp servers did not stop within {deadline:?}");
        }
    }
}

impl Drop for McpManager {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The hub's catalog: the shipped tools, then every ready MCP server's tiered tools, minus
/// `[components.tools] disabled` (a tool name, `dist:mcp:<server>` or `dist:taud`). No MCP tool
/// offered here clashes with another tool (the manager's [`NameTable`] refused it when it was
/// listed); should the catalog still refuse one, it keeps what it has and logs an error.
pub fn hub_catalog(
    clock: Arc<dyn crate::clock::Clock>,
    disabled: &[String],
    mcp: &McpManager,
) -> Result<crate::tool::ToolCatalog, crate::tool::CatalogError> {
    let mut catalog = crate::tool::builtin::shipped_catalog(clock, &[])?;
    for tool in mcp.tools() {
        let name = tool.spec().name.clone();
        if let Err(e) = catalog.add(tool) {
            tracing::error!(tool = %name, "mcp tool left out: {e}");
        }
    }
    catalog.disable(disabled);
    Ok(catalog)
}

/// The MCP tools that are listed but not offered (untiered, tiered but missing, or refused for
/// a name another owns), for `ListTools` and `tau components`.
pub fn not_offered(mcp: &McpManager) -> Vec<crate::tool::ToolSummary> {
    mcp.status()
        .into_iter()
        .flat_map(|server| {
            let name = server.name;
            server
                .tools
                .into_iter()
                .filter(|t| t.state != ToolState::Offered)
                .map(move |t| crate::tool::ToolSummary {
                    name: if t.name.is_empty() {
                        t.tool.clone()
                    } else {
                        t.name
                    },
                    tier: t
                        .tier
                        .and_then(|n| crate::tool::Tier::from_number(u64::from(n))),
                    description: t.description,
                    effect: t.effect.unwrap_or_default(),
                    server: Some(name.clone()),
                    node: None,
                    state: match t.state {
                        ToolState::Untiered => "untiered",
                        ToolState::Missing => "missing",
                        ToolState::Refused => "refused",
                        ToolState::Offered => "ready",
                    }
                    .to_owned(),
                })
        })
        .collect()
}

/// The `mcp` key of `GET /status`: every server with its state, error, restarts, pid and tools.
pub fn status_json(mcp: &McpManager) -> serde_json::Map<String, serde_json::Value> {
    let mut map = serde_json::Map::new();
    let servers = serde_json::to_value(mcp.status()).unwrap_or_default();
    map.insert("mcp".to_owned(), serde_json::json!({ "servers": servers }));
    map
}
