//! Nodes on the wire: the gRPC side of node links (the second room, after `rpc`, that sees
//! tonic). On a hub, `hub_side.rs` serves `tau.v1.NodeLink` on the node listener (`[nodes]
//! listen`, TLS 1.3 through `tls_accept.rs`, both keys pinned); on a node, `node_side.rs` dials
//! the hub it pinned, holds one bidirectional stream, announces what it lends (`lent.rs`: its
//! built-ins and its own MCP servers' tools) whenever that changes, runs calls with its own tools
//! (`node_calls.rs`: progress up, cancels down) and reconnects with capped, jittered back-off; `join.rs` pairs a node with a hub; `admin.rs`
//! serves `tau.v1.Nodes` (`tau node pair|join|list|revoke`) beside `tau.v1.Tau` on the local
//! socket. The domain (keys, the pairing store, the registry, a node's tool) is `crate::node`.
//!
//! Invariants: the node listener is the only listener that may bind a non-loopback address, and
//! it is off unless configured; both sides send a heartbeat every interval and end a link silent
//! for two; a node runs only calls that arrive on its authenticated hub link.

mod admin;
mod first_bytes;
mod hub_side;
mod join;
mod lent;
mod node_calls;
mod node_side;
mod tls_accept;

use std::sync::Arc;

use tau_api::config::{NodeConfig, NodeRole};
use tokio::sync::Notify;
use tonic::service::Routes;

pub use hub_side::{NODE_LISTENER, NodeListener};
pub use node_side::{NODE_DIALER, NodeDialer};
pub use tls_accept::NodePeer;

use crate::host::ServiceRegistry;
use crate::mcp::McpServerSpec;
use crate::node::NodeRegistry;

/// What a `taud` runs for nodes, in either role.
#[derive(Clone)]
pub struct NodeServices {
    registry: Arc<NodeRegistry>,
    role: NodeRole,
    lend: NodeConfig,
    mcp: Vec<McpServerSpec>,
    wake: Arc<Notify>,
}

impl NodeServices {
    /// The node services of a `taud` in `role` over `registry`; on a node, `lend` limits the
    /// tools it offers.
    pub fn new(registry: Arc<NodeRegistry>, role: NodeRole, lend: NodeConfig) -> Self {
        Self {
            registry,
            role,
            lend,
            mcp: Vec::new(),
            wake: Arc::new(Notify::new()),
        }
    }

    /// On a node, also lends the tools of these MCP servers (its own tau.toml's `[mcp]`), which
    /// its link service starts and stops; a hub ignores them (its core runs its own).
    pub fn with_mcp(mut self, mcp: Vec<McpServerSpec>) -> Self {
        self.mcp = mcp;
        self
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<NodeRegistry> {
        &self.registry
    }

    /// `routes` with `tau.v1.Nodes` added (served wherever `tau.v1.Tau` is, behind its checks).
    pub fn add_routes(&self, routes: Routes) -> Routes {
        routes.add_service(admin::server(
            Arc::clone(&self.registry),
            self.role,
            Arc::clone(&self.wake),
        ))
    }

    /// Registers the service of this role: a hub's node listener (when `[nodes] listen` is set),
    /// or a node's dialer.
    pub fn register(&self, services: &mut ServiceRegistry) {
        let me = self.clone();
        match self.role {
            // Off by default: a hub accepts nodes only once `[nodes] listen` is set.
            NodeRole::Hub if self.registry.config().listen.is_none() => {}
            NodeRole::Hub => {
                services.register(NODE_LISTENER, move |_| {
                    Ok(Arc::new(NodeListener::new(Arc::clone(&me.registry))))
                });
            }
            NodeRole::Node => {
                services.register(NODE_DIALER, move |_| {
                    Ok(Arc::new(NodeDialer::new(
                        Arc::clone(&me.registry),
                        &me.lend,
                        me.mcp.clone(),
                        Arc::clone(&me.wake),
                    )))
                });
            }
        }
    }
}
