//! One task per server: launch, handshake, list, serve calls, and on death kill the group and
//! restart with backoff; on stop, close and kill the group.
//!
//! Invariants: the process group is killed after every run of the server, clean exit or not, so
//! no grandchild outlives it; a server that died more than its restart limit allows within the
//! window is not started again (`gave_up`); the server's state (starting, ready, restarting,
//! gave_up, stopped) and its tool listing are published through [`ServerShared`] only, never
//! awaited by a turn; a new `tools/list` replaces the published tools as a whole (turns pick it up
//! when they build their catalog), unless a newer one was applied first (see `list_refresh`); a
//! listed tool is offered only under a name the [`NameTable`] gives it, else it is refused (logged,
//! `refused` in the status), as is a second listing of one tool.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::McpError;
use super::adapter::{HandleSlot, McpTool};
use super::launch::{StderrTail, kill_group, launch};
use super::list_refresh::{DEBOUNCE, ListingGuard, change_counter};
use super::names::{NameTable, model_name};
use super::server_spec::McpServerSpec;
use super::session::{CallLimits, Connection, ListedTool};
use super::status::{Phase, ServerStatus, ToolListing, ToolState};

/// How long a dead server's stderr may take to be read to its end.
const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// A server's published state, shared with the hub.
pub struct ServerShared {
    pub(super) status: Mutex<ServerStatus>,
    pub(super) tools: Mutex<Vec<Arc<McpTool>>>,
    pub(super) slot: Arc<HandleSlot>,
    pub(super) tail: Arc<StderrTail>,
    /// Bumped at every publish (shared by the manager's servers).
    published: Arc<watch::Sender<u64>>,
}

impl ServerShared {
    pub(super) fn new(spec: &McpServerSpec, published: Arc<watch::Sender<u64>>) -> Self {
        Self {
            status: Mutex::new(ServerStatus::new(&spec.key, &spec.command)),
            tools: Mutex::new(Vec::new()),
            slot: Arc::new(HandleSlot::default()),
            tail: Arc::new(StderrTail::default()),
            published,
        }
    }

    fn update(&self, f: impl FnOnce(&mut ServerStatus)) {
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut status);
    }

    fn publish(&self, tools: Vec<Arc<McpTool>>) {
        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = tools;
        self.published.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A copy of the status, with the stderr tail.
    pub fn snapshot(&self) -> ServerStatus {
        let mut status = self
            .status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        status.stderr_tail = self.tail.lines();
        status
    }

    /// The tiered tools of the last listing (empty unless ready).
    pub fn tools(&self) -> Vec<Arc<McpTool>> {
        self.tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Runs `spec` until `stop`, or until it died more often than its [`RestartLimit`] allows (then
/// it stays `gave_up` with the last error).
///
/// [`RestartLimit`]: super::server_spec::RestartLimit
pub(super) async fn supervise(
    spec: McpServerSpec,
    shared: Arc<ServerShared>,
    names: Arc<NameTable>,
    stop: CancellationToken,
) {
    let mut attempt = 0u32;
    let mut deaths: VecDeque<Instant> = VecDeque::new();
    let allowed = usize::try_from(spec.restart_limit.restarts).unwrap_or(usize::MAX);
    loop {
        shared.update(|s| s.state = Phase::Starting);
        let listed_before = shared.snapshot().generation;
        let error = run_once(&spec, &shared, &names, &stop).await;
        if shared.snapshot().generation != listed_before {
            // It reached ready: the backoff starts over.
            attempt = 0;
        }
        shared.slot.set(None);
        shared.publish(Vec::new());
        if stop.is_cancelled() {
            break;
        }
        attempt += 1;
        let why = match error {
            Some(e) => e.to_string(),
            None => "the server exited".to_owned(),
        };
        let tail = shared.tail.summary(3);
        let why = if tail.is_empty() {
            why
        } else {
            format!("{why}; stderr: {tail}")
        };
        let now = Instant::now();
        deaths.push_back(now);
        while deaths
            .front()
            .is_some_and(|t| now.duration_since(*t) > spec.restart_limit.window)
        {
            deaths.pop_front();
        }
        if deaths.len() > allowed {
            let why = format!(
                "gave up after {} restarts within {} s (restart the hub to try again): {why}",
                spec.restart_limit.restarts,
                spec.restart_limit.window.as_secs()
            );
            tracing::error!(server = %spec.key, "mcp server keeps dying: {why}");
            shared.update(|s| {
                s.state = Phase::GaveUp;
                s.error = Some(why);
                s.pid = None;
            });
            return;
        }
        let delay = spec.backoff.delay(attempt);
        tracing::warn!(server = %spec.key, "mcp server down, restarting in {delay:?}: {why}");
        shared.update(|s| {
            s.state = Phase::Restarting;
            s.error = Some(why);
            s.restarts += 1;
            s.pid = None;
        });
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stop.cancelled() => break,
        }
    }
    shared.update(|s| {
        s.state = Phase::Stopped;
        s.pid = None;
    });
}

/// One life of the server; `None` when it was stopped or exited on its own, else why it failed.
async fn run_once(
    spec: &McpServerSpec,
    shared: &Arc<ServerShared>,
    names: &NameTable,
    stop: &CancellationToken,
) -> Option<McpError> {
    let mut launched = match launch(spec, &shared.tail) {
        Ok(launched) => launched,
        Err(e) => return Some(e),
    };
    let pid = launched.pid;
    shared.update(|s| s.pid = Some(pid));
    let (changed_tx, mut changed_rx) = change_counter();
    let stdout = launched.stdout;
    let stdin = launched.stdin;
    let child = &mut launched.child;
    let outcome = async {
        let connection = tokio::select! {
            c = Connection::connect(stdout, stdin, spec.startup_timeout, changed_tx) => c?,
            () = stop.cancelled() => return Ok(None),
        };
        let listed = connection.list_tools(spec.startup_timeout).await?;
        let tools = apply_listing(spec, shared, names, &listed);
        shared.slot.set(Some(connection.handle()));
        shared.publish(tools);
        shared.update(|s| {
            s.state = Phase::Ready;
            s.error = None;
        });
        tracing::info!(server = %spec.key, pid, "mcp server ready");
        serve_ready(
            spec,
            shared,
            names,
            &connection,
            child,
            &mut changed_rx,
            stop,
        )
        .await?;
        connection.close().await;
        Ok(None)
    }
    .await;
    kill_group(pid, &mut launched.child, spec.kill_grace).await;
    // The group is gone: what it wrote to stderr is read to the end (bounded, in case something
    // outside the group holds the pipe), so the error below carries its last lines.
    let _ = tokio::time::timeout(DRAIN_WAIT, launched.drain).await;
    match outcome {
        Ok(None) => None,
        Ok(Some(e)) | Err(e) => Some(e),
    }
}

/// Watches a ready server until `stop` (`Ok`) or its death (`Err`), re-listing its tools after
/// `list_changed`: one `tools/list` per [`DEBOUNCE`] window, several may be in flight, and only a
/// listing newer than the published one is applied.
async fn serve_ready(
    spec: &McpServerSpec,
    shared: &Arc<ServerShared>,
    names: &NameTable,
    connection: &Connection,
    child: &mut Child,
    changes: &mut watch::Receiver<u64>,
    stop: &CancellationToken,
) -> Result<(), McpError> {
    let mut guard = ListingGuard::default();
    let mut due: Option<Instant> = None;
    let mut listings = FuturesUnordered::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            status = child.wait() => {
                let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                return Err(McpError::Exited(status));
            }
            Ok(()) = changes.changed(), if due.is_none() => {
                due = Some(Instant::now() + DEBOUNCE);
            }
            () = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                due = None;
                let generation = *changes.borrow_and_update();
                listings.push(async move {
                    (generation, connection.list_tools(spec.startup_timeout).await)
                });
            }
            Some((generation, listed)) = listings.next(), if !listings.is_empty() => match listed {
                Ok(listed) if guard.admit(generation) => {
                    let tools = apply_listing(spec, shared, names, &listed);
                    shared.publish(tools);
                    tracing::info!(server = %spec.key, generation, "mcp tool list changed; applies from the next turn");
                }
                Ok(_) => tracing::debug!(server = %spec.key, generation, "an older mcp tools/list answered after a newer one; dropped"),
                Err(e) => tracing::warn!(server = %spec.key, "mcp tools/list after list_changed failed: {e}"),
            },
        }
    }
}

/// Builds the adapters of the tiered tools in `listed` and records the whole listing (untiered
/// tools, configured tools the server does not offer, tiers that look too low, tools refused for a
/// name another owns or for being listed twice) in the status.
fn apply_listing(
    spec: &McpServerSpec,
    shared: &Arc<ServerShared>,
    names: &NameTable,
    listed: &[ListedTool],
) -> Vec<Arc<McpTool>> {
    let mut tools = Vec::new();
    let mut listing = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for tool in listed {
        let model_name = model_name(&spec.key, &tool.name);
        let Some(tier) = spec.tools.get(&tool.name) else {
            tracing::warn!(server = %spec.key, tool = %tool.name, "mcp tool has no tier in tau.toml; it is not offered to the model");
            listing.push(ToolListing::new(
                tool,
                model_name,
                None,
                ToolState::Untiered,
            ));
            continue;
        };
        let refused = if !seen.insert(tool.name.as_str()) {
            Some("the server lists this tool twice; only its first listing is offered".to_owned())
        } else {
            names
                .claim(&model_name, &spec.key, &tool.name)
                .err()
                .map(|taken| taken.to_string())
        };
        if let Some(why) = refused {
            tracing::error!(server = %spec.key, tool = %tool.name, "mcp tool refused, not offered to the model: {why}");
            let mut entry = ToolListing::new(tool, model_name, Some(tier), ToolState::Refused);
            entry.warning = Some(why);
            listing.push(entry);
            continue;
        }
        let mut entry = ToolListing::new(tool, model_name.clone(), Some(tier), ToolState::Offered);
        if tier.tier.number() == 0 && tool.claims_destructive() {
            let warning =
                "the server marks this tool destructive (or not read-only) but its tier is 0";
            tracing::warn!(server = %spec.key, tool = %tool.name, "{warning}");
            entry.warning = Some(warning.to_owned());
        }
        listing.push(entry);
        tools.push(Arc::new(McpTool::new(
            &spec.key,
            model_name,
            tool,
            tier,
            CallLimits {
                idle: spec.call_timeout,
                max: spec.call_max,
            },
            Arc::clone(&shared.slot),
        )));
    }
    for (name, tier) in &spec.tools {
        if !listed.iter().any(|t| t.name == *name) {
            tracing::info!(server = %spec.key, tool = %name, "configured mcp tool is not offered by the server");
            listing.push(ToolListing::missing(
                name,
                model_name(&spec.key, name),
                tier,
            ));
        }
    }
    shared.update(|s| {
        s.tools = listing;
        s.generation += 1;
    });
    tools
}
